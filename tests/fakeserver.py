"""A real HTTP chat-completions server on 127.0.0.1 for tests, scripted with queued replies.

    with FakeChatServer([FakeReply(text="hi")]) as server:
        model = OpenAICompatModel(Settings(model="m", base_url=server.url))

Speaks POST /v1/chat/completions, streaming (SSE `data:` chunks ending in `[DONE]`) and not;
replies carry text, native tool calls (streamed as deltas), reasoning and usage, or an HTTP error
(OpenAI's body, or any body a server really sends); a 200 that is not a stream, an error event inside
a stream, a stream cut before or after its first token (closed, or broken mid-chunk with
`chunked=True`). GET /v1/models, llama.cpp's /props and Ollama's /api/ps and /api/show answer what
they are given. Every request body is recorded in `server.requests`.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeReply:
    text: str = ""  # assistant content; may hold <think> or text tool calls
    reasoning: str = ""
    reasoning_field: str = "reasoning_content"  # or "reasoning" (Ollama, OpenRouter style)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"name", "arguments": dict | str}
    prompt_tokens: int = 11
    completion_tokens: int = 7
    status: int = 200  # anything else: an OpenAI-style error body with `error`
    error: str = ""
    chunk_size: int = 4  # characters per streamed delta: small, so tags split across deltas
    finish_reason: str | None = None  # default: "tool_calls" with calls, else "stop"; "length": cut off
    drop_after: int | None = None  # streaming: close the connection after this many content deltas
    body: dict[str, Any] | None = None  # with `status`: the whole error body, as a given server words it
    error_event: dict[str, Any] | None = None  # streaming: sent as `data: {...}` after the content
    raw: str | None = None  # a 200 whose body is this instead of a completion or an event stream
    content_type: str = "text/html; charset=utf-8"  # of `raw`


class FakeChatServer:
    def __init__(
        self,
        replies: list[FakeReply] | None = None,
        *,
        api_key: str | None = None,
        models: list[str] | None = None,
        reject_stream_options: bool = False,
        reject_tools: bool = False,
        reject_tool_choice: bool = False,
        max_model_len: int | None = None,
        context_limit: int | None = None,
        overflow: Any = None,
        model_fields: dict[str, Any] | None = None,
        props: dict[str, Any] | None = None,
        ollama_ps: dict[str, Any] | None = None,
        ollama_show: dict[str, Any] | None = None,
        chunked: bool = False,
    ) -> None:
        """`max_model_len`: listed per model by GET /v1/models (as vLLM does); `model_fields`: other
        fields of each listed model (llama.cpp's `meta`). `context_limit`: a request whose messages exceed
        this many tokens (4 characters a token) is refused, as vLLM does, or as `overflow(window,
        prompt, asked) -> (status, body)` says. `props`, `ollama_ps`, `ollama_show`: the bodies of GET
        /props, GET /api/ps, POST /api/show. `chunked`: streams go out chunk-encoded (HTTP/1.1), so a
        dropped stream breaks mid-message as a killed server's does."""
        self.replies = list(replies or [])
        self.max_model_len, self.context_limit, self.overflow = max_model_len, context_limit, overflow
        self.model_fields = model_fields or {}
        self.routes: dict[str, Any] = {"/props": props, "/api/ps": ollama_ps, "/api/show": ollama_show}
        self.chunked = chunked
        self.requests: list[dict[str, Any]] = []  # request bodies, in order
        self.api_key, self.models = api_key, models
        self.reject_stream_options, self.reject_tools = reject_stream_options, reject_tools
        self.reject_tool_choice = reject_tool_choice
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def add(self, *replies: FakeReply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeChatServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ answering

    def answer(
        self, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, dict[str, Any] | list[dict[str, Any]]]:
        """(status, JSON body) or (200, list of stream chunks)."""
        with self._lock:
            self.requests.append(body)
            if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
                return 401, _error("Incorrect API key provided.", "invalid_api_key")
            if self.reject_stream_options and "stream_options" in body:
                return 400, _error("Unrecognized request argument supplied: stream_options")
            if self.reject_tool_choice and "tool_choice" in body:
                return 400, _error(
                    '"auto" tool choice requires --enable-auto-tool-choice; tool_choice "required" is not supported'
                )
            if self.reject_tools and "tools" in body:
                return 400, _error("tools are not supported by this server")
            if self.models is not None and body.get("model") not in self.models:
                return 404, _error(f"The model `{body.get('model')}` does not exist.", "model_not_found")
            if self.context_limit is not None and self.overflow is not None:
                size = len(json.dumps(body.get("messages", []))) // 4
                refused = self.overflow(self.context_limit, size, int(body.get("max_tokens") or 0))
                if refused is not None:
                    return refused
            if self.context_limit is not None and self.overflow is None:
                size = len(json.dumps(body.get("messages", []))) // 4
                if size > self.context_limit:
                    return 400, _error(
                        f"This model's maximum context length is {self.context_limit} tokens. However, you "
                        f"requested {size + int(body.get('max_tokens') or 0)} tokens ({size} in the messages, "
                        f"{body.get('max_tokens')} in the completion). Please reduce the length of the messages "
                        "or completion.",
                        None,
                    )
            if not self.replies:
                return 500, _error("fake server: no more replies queued")
            reply = self.replies.pop(0)
        if reply.status != 200:
            return reply.status, reply.body or _error(reply.error or f"error {reply.status}")
        if reply.raw is not None:
            return 200, {"raw": reply.raw, "content_type": reply.content_type}
        model = str(body.get("model", ""))
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return 200, _chunks(reply, model, usage)
        return 200, _completion(reply, model)


def _error(message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}


def _calls(reply: FakeReply) -> list[dict[str, Any]]:
    out = []
    for i, call in enumerate(reply.tool_calls):
        args = call.get("arguments", {})
        out.append(
            {
                "id": call.get("id", f"call_{i}"),
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    return out


_DROP: dict[str, Any] = {"drop": True}  # a marker in a chunk list: close the connection here


def _finish(reply: FakeReply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _usage(reply: FakeReply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def _completion(reply: FakeReply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.reasoning:
        message[reply.reasoning_field] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = _calls(reply)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
        "usage": _usage(reply),
    }


def _chunks(reply: FakeReply, model: str, usage: bool) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def pieces(text: str) -> list[str]:
        n = max(1, reply.chunk_size)
        return [text[i : i + n] for i in range(0, len(text), n)]

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({reply.reasoning_field: p}) for p in pieces(reply.reasoning)]
    content = [chunk({"content": p}) for p in pieces(reply.text)]
    if reply.drop_after is not None:  # the connection breaks: no finish, no usage, no [DONE]
        return [*out, *content[: reply.drop_after], _DROP]
    if reply.error_event is not None:  # the server's error inside the stream, then its end (llama.cpp)
        return [*out, *content, {"error": reply.error_event}, _DROP]
    out += content
    for i, call in enumerate(_calls(reply)):
        head = {
            "index": i,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        out.append(chunk({"tool_calls": [head]}))
        out += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
            for p in pieces(call["function"]["arguments"])
        ]
    out.append(chunk({}, _finish(reply)))
    if usage:
        out.append(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [],
                "usage": _usage(reply),
            }
        )
    return out


def _handler(server: FakeChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def _json(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            path = self.path.rstrip("/")
            if path == "/v1/models":
                extra = {"max_model_len": server.max_model_len} if server.max_model_len else {}
                extra.update(server.model_fields)
                self._json(
                    200,
                    {
                        "object": "list",
                        "data": [{"id": m, "object": "model", **extra} for m in server.models or []],
                    },
                )
            elif path in ("/props", "/api/ps") and server.routes.get(path) is not None:
                self._json(200, server.routes[path])
            else:
                self._json(404, _error(f"no route {self.path}"))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") == "/api/show" and server.routes.get("/api/show") is not None:
                self._json(200, server.routes["/api/show"])
                return
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._json(404, _error(f"no route {self.path}"))
                return
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                self._json(400, _error("request body is not JSON"))
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, answer = server.answer(headers, body)
            if isinstance(answer, dict) and "raw" in answer:
                data = answer["raw"].encode()
                self.send_response(200)
                self.send_header("Content-Type", answer["content_type"])
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if not isinstance(answer, list):
                self._json(status, answer)
                return
            self._stream(answer)

        def _stream(self, answer: list[dict[str, Any]]) -> None:
            chunked = server.chunked
            if chunked:
                self.protocol_version = "HTTP/1.1"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()  # HTTP/1.0: the stream ends when the connection closes

            def write(data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n" if chunked else data)
                self.wfile.flush()

            for item in answer:
                if item is _DROP:  # chunked: no closing chunk, the message breaks off
                    self.close_connection = True
                    return
                write(f"data: {json.dumps(item)}\n\n".encode())
            write(b"data: [DONE]\n\n")
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            self.close_connection = True

    return Handler
