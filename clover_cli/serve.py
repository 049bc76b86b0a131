"""`clover serve`: an OpenAI-compatible chat-completions API over any Model (the local Clover in
practice), so Harbor sandboxes, other agents and editors can use it. FastAPI + uvicorn."""

# No `from __future__ import annotations`: FastAPI resolves the endpoint annotations at run time.
import asyncio
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from clover.core.model_protocol import AssistantTurn, Model, StreamEvent, TurnOptions
from clover.core.stops import ModelError
from clover.settings import Settings


def create_app(model: Model):
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse

    app = FastAPI(title="clover serve")
    lock = threading.Lock()  # one generation at a time: the local model is a single stream

    def complete(messages: list[dict], tools: list[dict], on_event=None, options=None) -> AssistantTurn:
        with lock:
            return model.complete(messages, tools, on_event, TurnOptions(**options) if options else None)

    def error(status: int, message: str, kind: str = "invalid_request_error"):
        return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model.name, "object": "model", "owned_by": "clover"}]}

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        try:
            body = await request.json()
        except ValueError:
            return error(400, "request body is not JSON")
        messages, tools = body.get("messages"), body.get("tools") or []
        if not isinstance(messages, list) or not messages:
            return error(400, "'messages' must be a non-empty list")
        messages = [_normalise(m) for m in messages]
        options = _options(body)
        if isinstance(options, str):
            return error(400, options)
        rid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = _stream(
                lambda *a: complete(*a, options=options),
                messages,
                tools,
                rid,
                created,
                model.name,
                include_usage,
            )
            return StreamingResponse(chunks, media_type="text/event-stream")
        try:
            turn = await asyncio.to_thread(complete, messages, tools, None, options)
        except ModelError as exc:
            return error(500, str(exc), "server_error")
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.thinking:
            message["reasoning_content"] = turn.thinking
        if turn.tool_calls:
            message["tool_calls"] = [_call_dict(i, c) for i, c in enumerate(turn.tool_calls)]
        return {
            "id": rid,
            "object": "chat.completion",
            "created": created,
            "model": model.name,
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(turn)}],
            "usage": _usage(turn),
        }

    return app


def _options(body: dict[str, Any]) -> dict[str, Any] | str:
    """The request's max_tokens / temperature / enable_thinking as TurnOptions fields, or the 400 message."""
    options: dict[str, Any] = {}
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            return f"'max_tokens' must be a positive integer, not {limit!r}"
        options["max_tokens"] = limit
    temperature = body.get("temperature")
    if temperature is not None:
        if (
            isinstance(temperature, bool)
            or not isinstance(temperature, int | float)
            or not 0 <= temperature <= 2
        ):
            return f"'temperature' must be a number between 0 and 2, not {temperature!r}"
        options["temperature"] = float(temperature)
    think = (body.get("chat_template_kwargs") or {}).get("enable_thinking")  # vLLM / SGLang's switch
    if think is not None:
        if not isinstance(think, bool):
            return f"'chat_template_kwargs.enable_thinking' must be true or false, not {think!r}"
        options["think"] = think
    return options


def _normalise(message: dict[str, Any]) -> dict[str, Any]:
    """Content given as a list of parts becomes plain text."""
    content = message.get("content")
    if isinstance(content, list):
        text = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        message = {**message, "content": text}
    return message


def _call_dict(index: int, call) -> dict[str, Any]:
    return {
        "index": index,
        "id": call.id or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)},
    }


def _finish(turn: AssistantTurn) -> str:
    return "tool_calls" if turn.tool_calls else (turn.finish_reason or "stop")


def _usage(turn: AssistantTurn) -> dict[str, int]:
    return {
        "prompt_tokens": turn.prompt_tokens,
        "completion_tokens": turn.completion_tokens,
        "total_tokens": turn.prompt_tokens + turn.completion_tokens,
    }


async def _stream(complete, messages, tools, rid, created, name, include_usage) -> AsyncIterator[bytes]:
    """Run the model in a thread; its thinking/text events become SSE deltas as they come."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    def on_event(event: StreamEvent) -> None:
        if event.kind in ("thinking", "text") and event.text:
            loop.call_soon_threadsafe(queue.put_nowait, event)

    def work() -> None:
        try:
            result: Any = complete(messages, tools, on_event)
        except Exception as exc:  # reported to the client as an error chunk
            result = exc
        loop.call_soon_threadsafe(queue.put_nowait, ("done", result))

    def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict | None = None) -> bytes:
        payload: dict[str, Any] = {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None else [],
        }
        if usage is not None:
            payload["usage"] = usage
        return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()

    threading.Thread(target=work, daemon=True).start()
    yield chunk({"role": "assistant", "content": ""})
    while True:
        item = await queue.get()
        if isinstance(item, StreamEvent):
            key = "reasoning_content" if item.kind == "thinking" else "content"
            yield chunk({key: item.text})
            continue
        result = item[1]
        if isinstance(result, Exception):
            err = {"error": {"message": str(result), "type": "server_error"}}
            yield f"data: {json.dumps(err)}\n\n".encode()
            break
        if result.tool_calls:
            yield chunk({"tool_calls": [_call_dict(i, c) for i, c in enumerate(result.tool_calls)]})
        yield chunk({}, _finish(result))
        if include_usage:
            yield chunk({}, usage=_usage(result))
        break
    yield b"data: [DONE]\n\n"


SERVE_EXTRA = "pip install 'clover-cli[serve]'"


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8000) -> None:
    from clover.cli_common import fail
    from clover.runner import build_model

    try:  # the optional [serve] extra: say what to install, not a ModuleNotFoundError
        import fastapi  # noqa: F401
        import uvicorn
    except ImportError as exc:
        fail(f"clover serve needs {exc.name or 'fastapi and uvicorn'}, from the [serve] extra: {SERVE_EXTRA}")
    if not 0 <= port <= 65535:
        fail(f"--port must be between 0 and 65535, not {port}")
    try:  # before loading the model (slow): a busy port is one line, not a uvicorn traceback
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        fail(
            f"cannot listen on {host}:{port}: {os.strerror(exc.errno) if (exc.errno or 0) > 0 else exc.strerror or exc}"
        )
    try:
        model = build_model(settings)
    except ModelError as exc:
        fail(str(exc))
    print(f"clover serve: {model.name} on http://{host}:{port}/v1")
    uvicorn.run(create_app(model), host=host, port=port, log_level="warning")
