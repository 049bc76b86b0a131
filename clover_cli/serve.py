"""`clover serve`: an OpenAI-compatible chat-completions API over any Model (the local Clover in
practice), so Harbor sandboxes, other agents and editors can use it. FastAPI + uvicorn."""


# No `from __future__ import annotations`: FastAPI resolves the endpoint annotations at run time.
import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from clover_cli.settings import Settings
from clover_cli.types import AssistantTurn, Model, ModelError, StreamEvent


def create_app(model: Model):
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, StreamingResponse

    app = FastAPI(title="clover serve")
    lock = threading.Lock()  # one generation at a time: the local model is a single stream

    def complete(messages: list[dict], tools: list[dict], on_event=None) -> AssistantTurn:
        with lock:
            return model.complete(messages, tools, on_event)

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
        rid, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = _stream(complete, messages, tools, rid, created, model.name, include_usage)
            return StreamingResponse(chunks, media_type="text/event-stream")
        try:
            turn = await asyncio.to_thread(complete, messages, tools)
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


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8000) -> None:
    import uvicorn

    from clover_cli.cli_common import fail
    from clover_cli.runner import build_model

    try:
        model = build_model(settings)
    except ModelError as exc:
        fail(str(exc))
    print(f"clover serve: {model.name} on http://{host}:{port}/v1")
    uvicorn.run(create_app(model), host=host, port=port, log_level="warning")
