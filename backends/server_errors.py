"""What OpenAI-compatible servers answer when a request does not fit, and when their tool-call parser
fails: one table of their messages (OVERFLOWS), read into structured facts (Overflow) for the backend
(a smaller max_tokens, or the chat's compact-and-retry) and into one-line errors for the user.

Each entry is the server's own wording, as its source sends it; tests/server_answers.py serves each
one exactly so (status and body) from a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

N = r"([\d,]+)"


@dataclass(frozen=True)
class OverflowForm:
    server: str
    situation: str
    example: str  # the message as the server words it (numbers are an example's)
    pattern: re.Pattern[str]
    groups: tuple[str, ...]  # what each group of `pattern` is: window, prompt, asked, over


def _form(server: str, situation: str, example: str, pattern: str, *groups: str) -> OverflowForm:
    return OverflowForm(server, situation, example, re.compile(pattern, re.I), groups)


OVERFLOWS: tuple[OverflowForm, ...] = (
    _form(
        "llama.cpp server",
        "the prompt is longer than the slot's context (HTTP 400, type exceed_context_size_error)",
        "request (1531 tokens) exceeds the available context size (512 tokens), try increasing it",
        rf"request \({N} tokens\) exceeds the available context size \({N} tokens\)",
        "prompt",
        "window",
    ),
    _form(
        "llama.cpp server (older)",
        "the prompt is longer than the context (HTTP 400)",
        "the request exceeds the available context size, try increasing it",
        r"exceeds the available context size",
    ),
    _form(
        "vLLM 0.10+",
        "prompt plus max_tokens past max_model_len (HTTP 400)",
        "'max_tokens' or 'max_completion_tokens' is too large: 4096. This model's maximum context length "
        "is 4096 tokens and your request has 1200 input tokens (4096 > 4096 - 1200).",
        rf"is too large: {N}\. This model's maximum context length is {N} tokens and your request has "
        rf"{N} input tokens",
        "asked",
        "window",
        "prompt",
    ),
    _form(
        "vLLM 0.10+",
        "the prompt alone past max_model_len (HTTP 400)",
        "This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens. "
        "Please reduce the length of the input messages.",
        rf"maximum context length is {N} tokens\. However, your request has {N} input tokens",
        "window",
        "prompt",
    ),
    _form(
        "vLLM (V1 engine's input check)",
        "the prompt past max_model_len (HTTP 400)",
        "The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that "
        "`max_model_len` is no smaller than the number of text tokens.",
        rf"prompt \(length {N}\) is longer than the maximum model length of {N}",
        "prompt",
        "window",
    ),
    _form(
        "vLLM (older), llama-cpp-python, LM Studio",
        "prompt plus max_tokens past the context (HTTP 400, code context_length_exceeded)",
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4800 in the "
        "messages, 200 in the completion). Please reduce the length of the messages or completion.",
        rf"maximum context length is {N} tokens\. However, you requested {N} tokens \({N} in the messages, "
        rf"{N} in the completion\)",
        "window",
        "total",
        "prompt",
        "asked",
    ),
    _form(
        "SGLang",
        "the prompt past the context length (HTTP 400)",
        "The input (5000 tokens) is longer than the model's context length (4096 tokens).",
        rf"input \({N} tokens\) is longer than the model's context length \({N} tokens\)",
        "prompt",
        "window",
    ),
    _form(
        "SGLang",
        "prompt plus max_tokens past the context length (HTTP 400)",
        "Requested token count exceeds the model's maximum context length of 4096 tokens. You requested a "
        "total of 5000 tokens: 4800 tokens from the input messages and 200 tokens for the completion.",
        rf"exceeds the model's maximum context length of {N} tokens\. You requested a total of {N} tokens: "
        rf"{N} tokens from the input messages and {N} tokens for the completion",
        "window",
        "total",
        "prompt",
        "asked",
    ),
    _form(
        "Ollama",
        "the prompt past num_ctx, with truncation off (HTTP 400)",
        "prompt too long; exceeded max context length by 100 tokens",
        rf"prompt too long; exceeded max context length by {N} tokens",
        "over",
    ),
    _form(
        "OpenAI API",
        "the messages past the model's context (HTTP 400, code context_length_exceeded)",
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 "
        "tokens. Please reduce the length of the messages.",
        rf"maximum context length is {N} tokens\. However, your messages resulted in {N} tokens",
        "window",
        "prompt",
    ),
    _form(
        "OpenAI API (newer models)",
        "the input past the context window (HTTP 400, code context_length_exceeded)",
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        r"input exceeds the context window of this model",
    ),
)
# Error codes or types that say the same whatever the message (OpenAI, llama-cpp-python; llama.cpp).
OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
# A generic wording some servers and proxies use, after the specific forms.
_GENERIC = re.compile(r"maximum context length|context length exceeded|context window (?:is )?exceeded", re.I)

# llama.cpp's tool-call parser, failing on what the model wrote (HTTP 500 before a stream, or an error
# event inside one): "Failed to parse input at pos 1234: <tool_call>...", older builds "Failed to
# parse tool call arguments as JSON", "Failed to parse tool call"; vLLM's parsers "Error in extracting
# tool call from response".
TOOL_PARSE = re.compile(
    r"failed to parse (?:input at pos|tool call|the tool call|function call)|"
    r"error (?:in|while) (?:extracting|parsing) tool call",
    re.I,
)


@dataclass(frozen=True)
class Overflow:
    """What the server said of a request that does not fit; None where it did not say."""

    server: str
    window: int | None = None  # the context, in tokens
    prompt: int | None = None  # the request's prompt, in tokens
    asked: int | None = None  # the completion asked for (max_tokens)

    @property
    def room(self) -> int | None:
        """Tokens the completion could have had: the prompt fits, max_tokens did not."""
        if self.window is None or self.prompt is None or self.asked is None:
            return None
        return self.window - self.prompt if self.prompt < self.window else None


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def overflow_of(message: str, body: Any = None) -> Overflow | None:
    """The overflow `message` (and the error's body) reports, or None when it reports another error."""
    for form in OVERFLOWS:
        m = form.pattern.search(message)
        if m is None:
            continue
        found = {name: _number(value) for name, value in zip(form.groups, m.groups(), strict=False)}
        return Overflow(form.server, found.get("window"), found.get("prompt"), found.get("asked"))
    inner = body.get("error", body) if isinstance(body, dict) else None
    codes = {str(inner.get(k)) for k in ("code", "type")} if isinstance(inner, dict) else set()
    if codes & OVERFLOW_CODES or _GENERIC.search(message):
        window = inner.get("n_ctx") if isinstance(inner, dict) else None
        prompt = inner.get("n_prompt_tokens") if isinstance(inner, dict) else None
        return Overflow(
            "a server",
            window if isinstance(window, int) else None,
            prompt if isinstance(prompt, int) else None,
        )
    return None


def is_tool_parse_error(message: str) -> bool:
    return bool(TOOL_PARSE.search(message))


def one_line(text: Any, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def detail_of(body: Any, fallback: str) -> str:
    """The server's own message from an error body (OpenAI's `error.message`, SGLang's and older
    vLLM's top-level `message`, a bare string), else `fallback`."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return one_line(inner["message"])
        if isinstance(inner, str):
            return one_line(inner)
        if isinstance(body.get("detail"), str):  # FastAPI's own errors
            return one_line(body["detail"])
    return one_line(fallback)


__all__ = [
    "OVERFLOWS",
    "Overflow",
    "OverflowForm",
    "detail_of",
    "is_tool_parse_error",
    "one_line",
    "overflow_of",
]
