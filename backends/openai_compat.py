"""Any OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp, Ollama, OpenAI...), as
these servers really answer.

Tool calls go native (`tools=`) or as text (specs in the system prompt, Qwen3-Coder XML / Hermes
JSON parsed from the reply, via model/text/chat.py). "auto" starts native and switches to text for the
rest of the session when the server answers with calls written as text, rejects `tools`, or says its
chat template takes none (llama.cpp's /props); a tool-call parse failure of the server's (llama.cpp:
HTTP 500, or an error event in the stream) is asked once more with the calls as text.

What the server says of itself (server_info.py) names the model when it serves only one and gives
the context size, or says that it is unknown. A request that does not fit (server_errors.py's table)
is retried with a smaller max_tokens where only that was too large, else raised as a context
overflow (the chat compacts and retries). A 200 that is not a stream, or a stream that ends before
any reply, is the backend failing, with what the server sent; a stream that breaks after tokens
arrived keeps them, as an incomplete reply.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import httpx
import openai

from clover.backends.server_errors import detail_of, is_tool_parse_error, one_line, overflow_of
from clover.backends.server_info import ServerInfo, probe
from clover.backends.streaming import Reply, read_plain, read_stream
from clover.core.model_protocol import (
    AssistantTurn,
    BackendSettings,
    EventHandler,
    Message,
    ModelCapabilities,
    StreamEvent,
    ToolCall,
    ToolSpec,
    TurnOptions,
)
from clover.core.stops import ModelError
from clover.core.tool_protocol import EDITED_KEY
from clover.model.text.chat import parse_assistant, split_thinking, text_messages, tool_schemas

TEXT_CALL_MARKERS = ("<tool_call>", "<function=")
UNNAMED = ("", "embedded")  # no model chosen for the server: the one it serves is asked
MIN_ROOM = 256  # a max_tokens the server would take, below which the conversation is compacted instead


class OpenAICompatModel(ModelCapabilities):
    def __init__(
        self,
        settings: BackendSettings,
        *,
        stream: bool = True,
        max_retries: int = 2,
        context_window: int | None = None,
    ) -> None:
        self.settings = settings
        self.base_url = (settings.base_url or "").rstrip("/")
        self.name = "" if settings.model in UNNAMED else settings.model
        # Explicit, else the setting, else what the server says (asked when first needed).
        explicit = context_window or max(int(settings.context_window or 0), 0) or None
        self._window, self.window_source = explicit, ("settings" if explicit else "")
        self._info: ServerInfo | None = None
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
        if not self.name:
            self._name_from_server(required=False)

    # ------------------------------------------------------------------ the server's own word

    def _server(self) -> ServerInfo:
        if self._info is None:
            self._info = probe(self.base_url, self.settings.api_key, self.name or None)
        return self._info

    def _name_from_server(self, required: bool) -> None:
        """The model the server serves, when it serves one; said in one line otherwise."""
        models = self._server().models
        url = self.base_url
        if models is None:
            if required:
                raise ModelError(
                    f"cannot ask the model server at {url} which model it serves (GET /v1/models did not "
                    "answer); pass --model NAME"
                )
            self._info = None  # asked again with the first request
            return
        if len(models) == 1:
            self.name = models[0]
            self._info = None  # its context is read for this name
            return
        shown = ", ".join(models[:8]) + (", …" if len(models) > 8 else "")
        raise ModelError(
            f"the model server at {url} serves {len(models)} models ({shown}); pick one with --model NAME"
            if models
            else f"the model server at {url} lists no model at GET /v1/models; pass --model NAME"
        )

    @property
    def context_window(self) -> int:
        """Tokens one request may take; 0 when nothing says (the chat then shows it as unknown)."""
        if self._window is None:
            info = self._server()
            self._window, self.window_source = info.window or 0, info.window_source or "unknown"
        return self._window

    @context_window.setter
    def context_window(self, tokens: int) -> None:
        self._window = tokens

    def served_models(self) -> list[str] | None:
        return probe(self.base_url, self.settings.api_key, None).models

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
        else:  # thinking never goes back (agent messages carry none, and we add none), nor Clover's keys
            sent = [
                {k: v for k, v in m.items() if k not in ("reasoning_content", "reasoning", EDITED_KEY)}
                for m in messages
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

    def _tools_taken(self, tools: list[ToolSpec]) -> None:
        """A chat template without tools (llama.cpp says so at /props) would drop them silently:
        auto goes to text calls, native says why it cannot work."""
        if not tools or self.tool_format == "text" or self._server().supports_tools is not False:
            return
        if self.tool_format == "auto":
            self.tool_format = "text"
            return
        raise ModelError(
            f"the chat template of {self.name} at {self.base_url} takes no tools (GET /props: "
            "supports_tools false), so native tool calls cannot work: use --tool-format text or auto"
        )

    def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        on_event: EventHandler | None = None,
        options: TurnOptions | None = None,
    ) -> AssistantTurn:
        start = time.monotonic()
        settings = dataclasses.replace(self.settings, **options.overrides()) if options else self.settings
        emit = on_event or (lambda event: None)
        if not self.name:
            self._name_from_server(required=True)
        self._tools_taken(tools)
        text_mode, retried_as_text, smaller = self.tool_format == "text", False, False
        while True:
            choice = options.tool_choice if options else None
            req = self._request(messages, tools, text_mode, settings, choice)
            try:
                reply = read_stream(self, req, emit) if self.stream else read_plain(self, req, emit)
                break
            except openai.BadRequestError as exc:
                detail = f"{exc} {exc.body}"
                overflow = overflow_of(self._detail(exc), exc.body)
                room = overflow.room if overflow is not None else None
                if "stream_options" in req and "stream_options" in detail:
                    self._stream_options = False
                elif "extra_body" in req and "chat_template_kwargs" in detail:
                    self._template_kwargs = False
                elif "tool_choice" in req and "tool_choice" in detail:  # the turn goes on without it
                    self._tool_choices = False
                elif room is not None and room >= MIN_ROOM and not smaller:  # only max_tokens was too much
                    settings, smaller = dataclasses.replace(settings, max_tokens=room - 16), True
                elif (
                    overflow is None
                    and "tools" in req
                    and self.tool_format == "auto"
                    and "tool" in detail.lower()
                ):
                    self.tool_format, text_mode = "text", True
                else:
                    raise self._error(exc) from None
            except openai.APIError as exc:  # an error status, or an error event inside the stream
                if is_tool_parse_error(self._detail(exc)) and not text_mode and not retried_as_text:
                    text_mode, retried_as_text = True, True  # this turn once more, its calls as text
                    continue
                raise self._error(exc) from None
            except httpx.HTTPError as exc:  # the connection broke before any reply arrived
                raise ModelError(
                    f"the connection to the model server at {self.base_url} broke before any reply: "
                    f"{one_line(exc)}"
                ) from None
        return self._turn(reply, messages, tools, text_mode, emit, time.monotonic() - start)

    # ------------------------------------------------------------------ reply

    def _turn(
        self,
        reply: Reply,
        messages: list[Message],
        tools: list[ToolSpec],
        text_mode: bool,
        emit: EventHandler,
        seconds: float,
    ) -> AssistantTurn:
        thinking_parts = [reply.reasoning.strip()]
        calls: list[ToolCall] = []
        if reply.calls:
            thinking, answer = split_thinking(reply.content)
            thinking_parts.append(thinking)
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
        if reply.finish_reason == "incomplete":
            calls = []  # a call cut by a broken stream is not to be run
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
            return ModelError(f"cannot reach the model server at {url}: {one_line(cause)}")
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
        where = f"answered HTTP {status}" if status is not None else "sent an error in its stream"
        error = ModelError(f"the model server at {url} {where}: {detail}")
        overflow = overflow_of(detail, getattr(exc, "body", None))
        if overflow is not None:
            error.context_overflow = True  # the chat compacts and retries
            error.overflow = overflow  # type: ignore[attr-defined]
            if overflow.window:
                self._window, self.window_source = overflow.window, "the server's error"
        return error

    @staticmethod
    def _detail(exc: openai.APIError) -> str:
        return detail_of(getattr(exc, "body", None), getattr(exc, "message", "") or str(exc))
