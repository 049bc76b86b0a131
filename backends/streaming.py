"""Reading a chat-completions reply off the wire, as servers really send it: SSE deltas of text,
reasoning and native tool calls (streamed) or one JSON body (not). What is not a reply is said in the
server's words: a 200 whose body is not an event stream (an HTML error page from a proxy, a JSON
error), an event that is not JSON, a stream that ends before any reply. A stream that breaks after
tokens arrived is kept: the reply so far, finish_reason "incomplete"."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
import openai

from clover.backends.server_errors import detail_of, one_line
from clover.core.model_protocol import EventHandler, StreamEvent
from clover.core.stops import ModelError
from clover.model.text.chat import StreamParser


@dataclass
class Reply:
    content: str = ""
    reasoning: str = ""
    calls: list[dict[str, str]] = field(default_factory=list)  # {"id", "name", "arguments"}
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = ""


class Server(Protocol):
    client: Any
    base_url: str


def _field(obj: Any, name: str) -> str | None:
    """A field the SDK types may not declare (reasoning_content, reasoning)."""
    value = getattr(obj, name, None)
    if value is None and getattr(obj, "model_extra", None):
        value = obj.model_extra.get(name)
    return value if isinstance(value, str) else None


def emit_parsed(pieces: list[tuple[str, str]], emit: EventHandler) -> None:
    for kind, text in pieces:
        if kind in ("thinking", "text"):  # call markup is held back; calls are emitted parsed
            emit(StreamEvent(kind, text))  # type: ignore[arg-type]


def _not_a_stream(url: str, response: httpx.Response) -> ModelError:
    kind = response.headers.get("content-type", "").split(";")[0].strip() or "no content type"
    try:
        body = response.read().decode("utf-8", "replace")
    except (httpx.HTTPError, httpx.StreamError) as exc:
        body = f"(its body could not be read: {exc})"
    try:
        said = detail_of(json.loads(body), body)
    except ValueError:
        said = one_line(body) or "(an empty body)"
    return ModelError(
        f"the model server at {url} answered HTTP {response.status_code} with {kind}, not an event "
        f"stream: {said}"
    )


def read_stream(server: Server, req: dict[str, Any], emit: EventHandler) -> Reply:
    stream = server.client.chat.completions.create(**req)
    response = getattr(stream, "response", None)
    if response is not None and "event-stream" not in response.headers.get("content-type", "event-stream"):
        error = _not_a_stream(server.base_url, response)
        stream.close()
        raise error
    reply, parser = Reply(), StreamParser()
    content: list[str] = []
    reasoning: list[str] = []
    slots: dict[int, dict[str, str]] = {}
    broken: Exception | None = None
    try:
        for chunk in stream:
            _take(chunk, reply, parser, content, reasoning, slots, emit)
    except (httpx.HTTPError, openai.APIConnectionError) as exc:  # the server went away mid-stream
        broken = (exc.__cause__ or exc) if isinstance(exc, openai.APIConnectionError) else exc
    except json.JSONDecodeError as exc:
        raise ModelError(
            f"the model server at {server.base_url} sent a stream event that is not JSON ({exc.msg}: "
            f"{one_line(exc.doc, 120)})"
        ) from None
    finally:
        stream.close()
    arrived = bool(content or reasoning or slots)
    if broken is not None and not arrived:
        raise ModelError(
            f"the connection to the model server at {server.base_url} broke before any reply: {one_line(broken)}"
        )
    if not arrived and not reply.finish_reason:
        raise ModelError(
            f"the model server at {server.base_url} answered HTTP 200, but its stream ended before any "
            "reply (no text, no tool call, no finish reason)"
        )
    if broken is not None or not reply.finish_reason:  # it stopped without saying the reply was complete
        reply.finish_reason = "incomplete"
    emit_parsed(parser.finish(), emit)
    reply.content, reply.reasoning = "".join(content), "".join(reasoning)
    reply.calls = [slots[i] for i in sorted(slots)]
    return reply


def _take(
    chunk: Any,
    reply: Reply,
    parser: StreamParser,
    content: list[str],
    reasoning: list[str],
    slots: dict[int, dict[str, str]],
    emit: EventHandler,
) -> None:
    """One SSE chunk into the reply so far."""
    if chunk.usage is not None:
        reply.prompt_tokens = chunk.usage.prompt_tokens
        reply.completion_tokens = chunk.usage.completion_tokens
    for choice in chunk.choices or []:
        delta = choice.delta
        think = _field(delta, "reasoning_content") or _field(delta, "reasoning")
        if think:
            reasoning.append(think)
            emit(StreamEvent("thinking", think))
        if delta.content:
            content.append(delta.content)
            emit_parsed(parser.feed(delta.content), emit)
        for tc in delta.tool_calls or []:
            index = tc.index
            if index is None:  # servers that omit it: a new id starts a new call
                last = max(slots, default=-1)
                new = last == -1 or (tc.id and tc.id != slots[last]["id"])
                index = last + 1 if new else last
            slot = slots.setdefault(index, {"id": "", "name": "", "arguments": ""})
            slot["id"] = tc.id or slot["id"]
            if tc.function is not None:
                slot["name"] += tc.function.name or ""
                slot["arguments"] += tc.function.arguments or ""
        if choice.finish_reason:
            reply.finish_reason = choice.finish_reason


def read_plain(server: Server, req: dict[str, Any], emit: EventHandler) -> Reply:
    resp = server.client.chat.completions.create(**req)
    if not hasattr(resp, "choices"):  # the SDK hands back the body as text when it is not JSON
        raise ModelError(
            f"the model server at {server.base_url} answered HTTP 200 with something that is not a "
            f"completion: {one_line(resp)}"
        )
    reply = Reply()
    if resp.usage is not None:
        reply.prompt_tokens, reply.completion_tokens = resp.usage.prompt_tokens, resp.usage.completion_tokens
    if not resp.choices:
        raise ModelError(
            f"the model server at {server.base_url} answered HTTP 200 with no choice in its reply"
        )
    choice = resp.choices[0]
    msg = choice.message
    reply.finish_reason = choice.finish_reason or ""
    reply.content = msg.content or ""
    reply.reasoning = _field(msg, "reasoning_content") or _field(msg, "reasoning") or ""
    for tc in msg.tool_calls or []:
        fn = getattr(tc, "function", None)
        reply.calls.append(
            {
                "id": tc.id or "",
                "name": getattr(fn, "name", "") or "",
                "arguments": getattr(fn, "arguments", "") or "",
            }
        )
    if reply.reasoning:
        emit(StreamEvent("thinking", reply.reasoning))
    parser = StreamParser()
    emit_parsed(parser.feed(reply.content) + parser.finish(), emit)
    return reply
