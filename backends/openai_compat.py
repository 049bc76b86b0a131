"""Any OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp, Ollama, OpenAI...).

Tool calls go native (`tools=`) or as text (specs in the system prompt, Qwen3-Coder XML / Hermes
JSON parsed from the reply, via model/chat.py). "auto" starts native and switches to text for the
rest of the session when the server answers with calls written as text, or rejects `tools`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import openai

from clover.core.protocols import (
    AssistantTurn,
    BackendSettings,
    EventHandler,
    Message,
    ModelError,
    StreamEvent,
    ToolCall,
    ToolSpec,
    TurnOptions,
)
from clover.model.chat import StreamParser, parse_assistant, split_thinking, text_messages, tool_schemas

TEXT_CALL_MARKERS = ("<tool_call>", "<function=")
DEFAULT_WINDOW = 131072  # when neither the settings nor the server say
# What servers call a model's context in GET /v1/models (vLLM, OpenRouter / LM Studio, others).
WINDOW_FIELDS = ("max_model_len", "context_length", "context_window", "max_context_length", "n_ctx")
_OVERFLOW = re.compile(
    r"context length|context window|context_length_exceeded|maximum context|too many tokens|prompt is too long"
    r"|exceeds? the (?:model'?s? )?(?:context|max)",
    re.I,
)
_LIMIT = re.compile(r"(?:maximum context length|context (?:length|window)) (?:is|of) (\d+)", re.I)


@dataclass
class _Reply:
    content: str = ""
    reasoning: str = ""
    calls: list[dict[str, str]] = field(default_factory=list)  # {"id", "name", "arguments"}
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = ""


def _field(obj: Any, name: str) -> Any:
    """A field the SDK types may not declare (reasoning_content, reasoning)."""
    value = getattr(obj, name, None)
    if value is None and getattr(obj, "model_extra", None):
        value = obj.model_extra.get(name)
    return value if isinstance(value, str) else None


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class OpenAICompatModel:
    def __init__(
        self,
        settings: BackendSettings,
        *,
        stream: bool = True,
        max_retries: int = 2,
        context_window: int | None = None,
    ) -> None:
        self.settings = settings
        self.name = settings.model
        self.base_url = (settings.base_url or "").rstrip("/")
        # Explicit, else the setting, else what the server lists (fetched when first needed).
        self._window = context_window or max(int(getattr(settings, "context_window", 0) or 0), 0) or None
        self.tool_format = settings.tool_format  # becomes "text" when auto switches
        self.stream = stream
        # Optional request fields, dropped for good when a server rejects them (HTTP 400).
        self._stream_options = True
        self._template_kwargs = True  # the server takes chat_template_kwargs (to turn thinking off)
        self._tool_choices = True  # the server takes tool_choice ("none", "required")
        self.client = openai.OpenAI(
            base_url=self.base_url,
            api_key=settings.api_key or "not-set",  # local servers take any key
            timeout=settings.request_timeout,
            max_retries=max_retries,
        )

    # ------------------------------------------------------------------ the server's models

    @property
    def context_window(self) -> int:
        if self._window is None:
            self._window = self._server_window() or DEFAULT_WINDOW
        return self._window

    @context_window.setter
    def context_window(self, tokens: int) -> None:
        self._window = tokens

    def _listed(self) -> list[Any] | None:
        """The server's GET /v1/models entries, or None when it does not answer (quickly)."""
        try:
            page = self.client.with_options(timeout=5.0, max_retries=0).models.list()
            return list(page.data)
        except Exception:  # a server without the route, or down: the chat request will say so
            return None

    def served_models(self) -> list[str] | None:
        listed = self._listed()
        return None if listed is None else [str(getattr(m, "id", "")) for m in listed]

    def _server_window(self) -> int | None:
        listed = self._listed() or []
        mine = [m for m in listed if getattr(m, "id", None) == self.name] or (
            listed if len(listed) == 1 else []
        )
        for entry in mine:
            extra = {**(getattr(entry, "model_extra", None) or {})}
            extra.update((extra.get("meta") or {}) if isinstance(extra.get("meta"), dict) else {})
            for name in (*WINDOW_FIELDS, "n_ctx_train"):
                value = extra.get(name)
                if isinstance(value, int) and value > 0:
                    return value
        return None

    # ------------------------------------------------------------------ request

    def _request(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        text_mode: bool,
        s: BackendSettings,
        tool_choice: str | None = None,
    ) -> dict[str, Any]:
        if text_mode:
            sent: list[Any] = text_messages(messages, tools)
        else:  # thinking never goes back: agent messages carry none, and we add none
            sent = [
                {k: v for k, v in m.items() if k not in ("reasoning_content", "reasoning")} for m in messages
            ]
        req: dict[str, Any] = {"model": self.name, "messages": sent, "max_tokens": s.max_tokens}
        if tools and not text_mode:
            req["tools"] = tools
            if tool_choice and self._tool_choices:
                req["tool_choice"] = tool_choice
        if s.temperature is not None:
            req["temperature"] = s.temperature
        if self.stream:
            req["stream"] = True
            if self._stream_options:
                req["stream_options"] = {"include_usage": True}
        if not s.think and self._template_kwargs:
            req["extra_body"] = {"chat_template_kwargs": {"enable_thinking": False}}
        return req

    def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        on_event: EventHandler | None = None,
        options: TurnOptions | None = None,
    ) -> AssistantTurn:
        start = time.monotonic()
        turn_settings = (
            dataclasses.replace(self.settings, **options.overrides()) if options else self.settings
        )
        emit = on_event or (lambda event: None)
        text_mode = self.tool_format == "text"
        while True:
            req = self._request(
                messages, tools, text_mode, turn_settings, options.tool_choice if options else None
            )
            try:
                reply = self._stream(req, emit) if self.stream else self._plain(req, emit)
                break
            except openai.BadRequestError as exc:
                # Drop an optional feature the server names as unsupported, and try again.
                detail = f"{exc} {exc.body}"
                if "stream_options" in req and "stream_options" in detail:
                    self._stream_options = False
                elif "extra_body" in req and "chat_template_kwargs" in detail:
                    self._template_kwargs = False
                elif "tool_choice" in req and "tool_choice" in detail:  # the turn goes on without it
                    self._tool_choices = False
                elif "tools" in req and self.tool_format == "auto" and "tool" in detail.lower():
                    self.tool_format, text_mode = "text", True
                else:
                    raise self._error(exc) from None
            except openai.APIError as exc:
                raise self._error(exc) from None
            except Exception as exc:  # a transport failure in the middle of a stream
                import httpx

                if isinstance(exc, httpx.HTTPError):
                    raise ModelError(
                        f"the connection to the model server at {self.base_url} broke: {_one_line(exc)}"
                    ) from None
                raise
        return self._turn(reply, messages, tools, text_mode, emit, time.monotonic() - start)

    def _stream(self, req: dict[str, Any], emit: EventHandler) -> _Reply:
        reply, parser = _Reply(), StreamParser()
        content: list[str] = []
        reasoning: list[str] = []
        slots: dict[int, dict[str, str]] = {}
        stream = self.client.chat.completions.create(**req)
        try:
            for chunk in stream:
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
                        self._emit_parsed(parser.feed(delta.content), emit)
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
        finally:
            stream.close()
        if not reply.finish_reason:  # the stream stopped without saying the reply was complete
            reply.finish_reason = "incomplete"
        self._emit_parsed(parser.finish(), emit)
        reply.content, reply.reasoning = "".join(content), "".join(reasoning)
        reply.calls = [slots[i] for i in sorted(slots)]
        return reply

    def _plain(self, req: dict[str, Any], emit: EventHandler) -> _Reply:
        resp = self.client.chat.completions.create(**req)
        reply = _Reply()
        if resp.usage is not None:
            reply.prompt_tokens, reply.completion_tokens = (
                resp.usage.prompt_tokens,
                resp.usage.completion_tokens,
            )
        if resp.choices:
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
        self._emit_parsed(parser.feed(reply.content) + parser.finish(), emit)
        return reply

    @staticmethod
    def _emit_parsed(pieces: list[tuple[str, str]], emit: EventHandler) -> None:
        for kind, text in pieces:
            if kind in ("thinking", "text"):  # call markup is held back; calls are emitted parsed
                emit(StreamEvent(kind, text))  # type: ignore[arg-type]

    # ------------------------------------------------------------------ reply

    def _turn(
        self,
        reply: _Reply,
        messages: list[Message],
        tools: list[ToolSpec],
        text_mode: bool,
        emit: EventHandler,
        seconds: float,
    ) -> AssistantTurn:
        thinking_parts = [reply.reasoning.strip()]
        calls: list[ToolCall] = []
        if reply.calls:
            _, answer = split_thinking(reply.content)
            thinking_parts.append(split_thinking(reply.content)[0])
            calls = [self._native_call(c) for c in reply.calls]
        elif text_mode or (self.tool_format == "auto" and any(m in reply.content for m in TEXT_CALL_MARKERS)):
            thinking, answer, parsed = parse_assistant(reply.content, tool_schemas(tools))
            thinking_parts.append(thinking)
            calls = [ToolCall(p.name, p.arguments, raw=p.raw, error=p.error) for p in parsed]
            if parsed and self.tool_format == "auto":
                self.tool_format = "text"  # the server does not do native calls for this model
        else:
            thinking, answer = split_thinking(reply.content)
            thinking_parts.append(thinking)
        for call in calls:
            emit(StreamEvent("tool_call", data={"name": call.name, "arguments": call.arguments}))
        prompt_tokens = reply.prompt_tokens
        if prompt_tokens is None:  # no usage from the server: a rough estimate keeps limits working
            prompt_tokens = len(json.dumps(messages)) // 4
        completion_tokens = reply.completion_tokens
        if completion_tokens is None:
            completion_tokens = (len(reply.content) + len(reply.reasoning)) // 4
        emit(
            StreamEvent(
                "usage", data={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
            )
        )
        return AssistantTurn(
            text=answer.strip(),
            thinking="\n".join(p for p in thinking_parts if p),
            tool_calls=calls,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            seconds=seconds,
            finish_reason=reply.finish_reason,
        )

    @staticmethod
    def _native_call(slot: dict[str, str]) -> ToolCall:
        name, raw = slot["name"].strip(), slot["arguments"]
        if not name:
            return ToolCall("", id=slot["id"], raw=raw, error="tool call without a function name")
        if not raw.strip():
            return ToolCall(name, {}, id=slot["id"], raw=raw)
        try:
            args = json.loads(raw)
        except json.JSONDecodeError as exc:
            return ToolCall(
                name,
                id=slot["id"],
                raw=raw,
                error=f"arguments of {name} are not valid JSON: {exc.msg} at column {exc.colno}",
            )
        if not isinstance(args, dict):
            return ToolCall(name, id=slot["id"], raw=raw, error=f"arguments of {name} must be a JSON object")
        return ToolCall(name, args, id=slot["id"], raw=raw)

    # ------------------------------------------------------------------ errors

    def _error(self, exc: openai.APIError) -> ModelError:
        url = self.base_url
        if isinstance(exc, openai.APITimeoutError):
            return ModelError(
                f"the model server at {url} did not answer within {self.settings.request_timeout:g} s"
            )
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc
            return ModelError(f"cannot reach the model server at {url}: {_one_line(cause)}")
        status = getattr(exc, "status_code", None)
        detail = self._detail(exc)
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            hint = (
                "check --api-key or OPENAI_API_KEY"
                if self.settings.api_key
                else "no API key is set (--api-key or OPENAI_API_KEY)"
            )
            return ModelError(
                f"the model server at {url} rejected the API key (HTTP {status}: {detail}); {hint}"
            )
        if isinstance(exc, openai.NotFoundError):
            return ModelError(
                f"model {self.name!r} not found at {url} (HTTP 404: {detail}); check --model and that "
                "--base-url ends in /v1"
            )
        if status is not None:
            error = ModelError(f"the model server at {url} answered HTTP {status}: {detail}")
            if status in (400, 413, 422) and _OVERFLOW.search(detail):
                limit = _LIMIT.search(detail)
                error.context_overflow = True  # type: ignore[attr-defined]  # the chat compacts and retries
                if limit:
                    self._window = int(limit.group(1))
            return error
        return ModelError(f"model server error at {url}: {detail}")

    @staticmethod
    def _detail(exc: openai.APIError) -> str:
        body = getattr(exc, "body", None)
        if isinstance(body, dict):
            inner = body.get("error", body)
            if isinstance(inner, dict) and inner.get("message"):
                return _one_line(inner["message"])
            if isinstance(inner, str):
                return _one_line(inner)
        return _one_line(getattr(exc, "message", "") or str(exc))
