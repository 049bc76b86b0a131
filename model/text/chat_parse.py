"""Parsing model text (torch-free): thinking blocks and tool calls in Qwen3-Coder XML or Hermes
JSON, whole or streamed. Never raises: a malformed call becomes a ParsedCall with `error`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
FUNC_OPEN, FUNC_CLOSE = "<function=", "</function>"
PARAM_OPEN, PARAM_CLOSE = "<parameter=", "</parameter>"
END_TOKENS = ("<|im_end|>", "<|endoftext|>")


@dataclass
class ParsedCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw: str = ""
    error: str | None = None


def _arguments_dict(arguments: Any) -> dict[str, Any] | None:
    if isinstance(arguments, dict):
        return arguments
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            value = json.loads(arguments)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None
    return None


# --------------------------------------------------------------------------- parsing


def split_thinking(text: str, opened: bool = False) -> tuple[str, str]:
    """(thinking, rest). `opened`: the prompt already opened `<think>`, so text without any tag
    is all thinking (unterminated). A lone `</think>` also means the prompt opened it. Tags inside a
    tool call (a parameter value that mentions `<think>`) are the call's, not thinking."""
    call = text.find(CALL_OPEN)
    open_at = text.find(THINK_OPEN)
    if open_at >= 0 and (call < 0 or open_at < call):
        before, after = text[:open_at], text[open_at + len(THINK_OPEN) :]
        if THINK_CLOSE in after:
            thinking, _, rest = after.partition(THINK_CLOSE)
            return thinking.strip(), (before + rest.lstrip("\n")).strip("\n")
        return after.strip(), before.strip("\n")
    close_at = text.find(THINK_CLOSE)
    if close_at >= 0 and (opened or call < 0 or close_at < call):
        thinking, rest = text[:close_at], text[close_at + len(THINK_CLOSE) :]
        return thinking.strip(), rest.lstrip("\n").rstrip("\n")
    if opened:
        return text.strip(), ""
    return "", text


def _strip_one_newline(value: str) -> str:
    if value.startswith("\n"):
        value = value[1:]
    if value.endswith("\n"):
        value = value[:-1]
    return value


def _types_of(spec: Any) -> list[str]:
    if not isinstance(spec, dict):
        return []
    wanted = spec.get("type")
    if isinstance(wanted, str):
        return [wanted]
    return [w for w in wanted if isinstance(w, str)] if isinstance(wanted, list) else []


def _coerce(value: str, spec: Any) -> Any:
    """A parameter's text as the type its schema asks for; unchanged when that is a string,
    unknown, or the text does not parse (the agent's schema check then says what is wrong)."""
    types = _types_of(spec)
    if not types or "string" in types:
        return value
    text = value.strip()
    if "boolean" in types and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if "null" in types and text.lower() in ("null", "none"):
        return None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return value
    if isinstance(parsed, float) and "integer" in types and "number" not in types and parsed.is_integer():
        return int(parsed)
    return parsed


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _scan_function(text: str, pos: int, schemas: dict[str, Any] | None) -> tuple[ParsedCall, int]:
    """Parse `<function=NAME>` at `pos` up to its `</function>`: (call, end). Values are found by
    their `</parameter>`, so they may hold `</function>` or `</tool_call>` themselves.
    On an error `end` is -1: the caller decides where to resume."""
    gt = text.find(">", pos)
    newline = text.find("\n", pos)
    if gt == -1 or (newline != -1 and newline < gt):
        return ParsedCall("", error="unclosed <function=...> tag: expected '>' after the function name"), -1
    name = text[pos + len(FUNC_OPEN) : gt].strip()
    if not name:
        return ParsedCall("", error="missing function name in <function=...>"), -1
    schema = (schemas or {}).get(name)
    props = (schema.get("properties") or {}) if isinstance(schema, dict) else {}
    args: dict[str, Any] = {}
    pos = gt + 1
    while True:
        pos = _skip_ws(text, pos)
        if text.startswith(FUNC_CLOSE, pos):
            return ParsedCall(name, args), pos + len(FUNC_CLOSE)
        if pos >= len(text):
            return ParsedCall(name, args, error=f"unclosed <function={name}>: missing </function>"), -1
        if not text.startswith(PARAM_OPEN, pos):
            snippet = text[pos : pos + 40].split("\n")[0]
            return ParsedCall(
                name,
                args,
                error=f"expected <parameter=...> or </function> in call to {name}, got {snippet!r}",
            ), -1
        gt = text.find(">", pos)
        newline = text.find("\n", pos)
        if gt == -1 or (newline != -1 and newline < gt):
            return ParsedCall(name, args, error=f"unclosed <parameter=...> tag in call to {name}"), -1
        pname = text[pos + len(PARAM_OPEN) : gt].strip()
        if not pname:
            return ParsedCall(
                name, args, error=f"missing parameter name in <parameter=...> in call to {name}"
            ), -1
        end = text.find(PARAM_CLOSE, gt)
        if end == -1:
            return ParsedCall(
                name, args, error=f"unclosed <parameter={pname}> in call to {name}: missing </parameter>"
            ), -1
        args[pname] = _coerce(_strip_one_newline(text[gt + 1 : end]), props.get(pname))
        pos = end + len(PARAM_CLOSE)


def _json_call(obj: Any) -> ParsedCall:
    if not isinstance(obj, dict):
        return ParsedCall("", error='<tool_call> JSON must be an object with "name" and "arguments"')
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        return ParsedCall("", error='missing "name" in <tool_call> JSON')
    name = name.strip()
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # some models double-encode the arguments
        parsed = _arguments_dict(args)
        if parsed is None:
            return ParsedCall(name, error=f'"arguments" of {name} is a string that is not a JSON object')
        args = parsed
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return ParsedCall(name, error=f'"arguments" of {name} must be a JSON object')
    return ParsedCall(name, args)


def _scan_tool_call(text: str, start: int, schemas: dict[str, Any] | None) -> tuple[ParsedCall, int]:
    """Parse the `<tool_call>` block at `start`: (call, end). Never fails to advance."""
    pos = _skip_ws(text, start + len(CALL_OPEN))
    close = text.find(CALL_CLOSE, pos)
    fallback = close + len(CALL_CLOSE) if close != -1 else len(text)  # resume point after an error
    nxt = text.find(CALL_OPEN, pos)
    if nxt != -1 and nxt < fallback:
        fallback = nxt
    if text.startswith(FUNC_OPEN, pos):
        call, end = _scan_function(text, pos, schemas)
    elif text.startswith("{", pos):
        try:
            obj, end = json.JSONDecoder().raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            call, end = (
                ParsedCall(
                    "",
                    error=f"invalid JSON in <tool_call>: {exc.msg} at line {exc.lineno} column {exc.colno}",
                ),
                -1,
            )
        else:
            call = _json_call(obj)
            if call.error:
                end = -1
    elif pos >= len(text) or text.startswith(CALL_CLOSE, pos):
        call, end = ParsedCall("", error="empty <tool_call>"), -1
    else:
        call, end = (
            ParsedCall("", error="a <tool_call> must hold <function=NAME>...</function> or a JSON object"),
            -1,
        )
    if end == -1:
        if close == -1 and not call.error:
            call.error = "unclosed <tool_call>: missing </tool_call>"
        call.raw = text[start:fallback]
        return call, fallback
    after = _skip_ws(text, end)
    if text.startswith(CALL_CLOSE, after):
        end = after + len(CALL_CLOSE)
    elif (
        after < len(text)
        and not text.startswith(CALL_OPEN, after)
        and not any(text.startswith(t, after) for t in END_TOKENS)
    ):
        call.error = (
            f"expected </tool_call> after the call to {call.name}, got "
            f"{text[after : after + 40].split(chr(10))[0]!r}"
        )
        end = max(fallback, after)
    # else: a complete call that only lacks </tool_call> (the reply stopped there): kept
    call.raw = text[start:end]
    return call, end


def parse_tool_calls(text: str, schemas: dict[str, Any] | None = None) -> tuple[str, list[ParsedCall]]:
    """(text without the calls, calls). Handles `<tool_call>` blocks (XML or JSON inside) and bare
    `<function=...>` blocks. `schemas` maps tool name -> parameters JSON schema for coercion."""
    try:
        return _parse_tool_calls(text, schemas)
    except Exception as exc:  # the contract is "never raises"; this is the safety net
        return text, [
            ParsedCall("", raw=text, error=f"could not parse tool calls: {type(exc).__name__}: {exc}")
        ]


def _parse_tool_calls(text: str, schemas: dict[str, Any] | None) -> tuple[str, list[ParsedCall]]:
    calls: list[ParsedCall] = []
    kept: list[str] = []
    pos = 0
    while True:
        a, b = text.find(CALL_OPEN, pos), text.find(FUNC_OPEN, pos)
        if a == -1 and b == -1:
            kept.append(text[pos:])
            break
        if a != -1 and (b == -1 or a < b):
            kept.append(text[pos:a])
            call, pos = _scan_tool_call(text, a, schemas)
        else:  # a bare <function=...> block without the <tool_call> wrapper
            kept.append(text[pos:b])
            call, end = _scan_function(text, b, schemas)
            if end == -1:
                nxt = [i for i in (text.find(FUNC_CLOSE, b + 1), text.find(CALL_OPEN, b + 1)) if i != -1]
                end = min(nxt) if nxt else len(text)
                if text.startswith(FUNC_CLOSE, end):
                    end += len(FUNC_CLOSE)
            call.raw, pos = text[b:end], end
        calls.append(call)
    remaining = "".join(kept)
    for tok in END_TOKENS:
        remaining = remaining.replace(tok, "")
    return remaining.strip(), calls


def parse_assistant(
    text: str, schemas: dict[str, Any] | None = None, *, opened: bool = False
) -> tuple[str, str, list[ParsedCall]]:
    """(thinking, answer, calls) of a raw assistant reply."""
    for tok in END_TOKENS:
        text = text.replace(tok, "")
    thinking, rest = split_thinking(text, opened)
    answer, calls = parse_tool_calls(rest, schemas)
    return thinking, answer, calls


def tool_schemas(tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    """name -> parameters schema of OpenAI tool specs, for `parse_tool_calls`."""
    out: dict[str, Any] = {}
    for spec in tools or []:
        fn = spec.get("function", spec)
        if isinstance(fn, dict) and fn.get("name"):
            out[fn["name"]] = fn.get("parameters") or {}
    return out


# --------------------------------------------------------------------------- streaming


class StreamParser:
    """Classifies streamed text deltas as "thinking", "text" or "tool_call" (call markup, which a
    backend holds back and parses at the end). A tag split across deltas is held until it is
    whole. `thinking=True`: the prompt already opened `<think>`."""

    _MARKERS = {
        "thinking": ((THINK_CLOSE, "text"),),
        "text": ((CALL_OPEN, "tool_call"), (FUNC_OPEN, "tool_call"), (THINK_OPEN, "thinking")),
    }

    def __init__(self, thinking: bool = False) -> None:
        self.state = "thinking" if thinking else "text"
        self.buf = ""
        self._tool_end = CALL_CLOSE
        self._lstrip = True  # drop the newlines that follow an opening or closing think tag

    def _markers(self) -> tuple[tuple[str, str], ...]:
        if self.state == "tool_call":
            return ((self._tool_end, "text"),)
        return self._MARKERS[self.state]

    def _emit(self, out: list[tuple[str, str]], text: str) -> None:
        if self._lstrip and self.state != "tool_call":
            text = text.lstrip("\n")
        if text:
            self._lstrip = False
            out.append((self.state, text))

    def feed(self, delta: str) -> list[tuple[str, str]]:
        self.buf += delta
        out: list[tuple[str, str]] = []
        while True:
            hits = [(self.buf.find(m), m, nxt) for m, nxt in self._markers() if m in self.buf]
            if not hits:
                break
            idx, marker, nxt = min(hits)
            before, self.buf = self.buf[:idx], self.buf[idx + len(marker) :]
            if self.state == "tool_call":
                self._emit(out, before + marker)
            else:
                self._emit(out, before)
            if nxt == "tool_call":
                self._tool_end = CALL_CLOSE if marker == CALL_OPEN else FUNC_CLOSE
                self.state = nxt
                self._emit(out, marker)
            else:
                self.state = nxt
                self._lstrip = True
        hold = 0  # the longest tail of buf that may start a marker
        for marker, _ in self._markers():
            for n in range(min(len(marker) - 1, len(self.buf)), hold, -1):
                if marker.startswith(self.buf[-n:]):
                    hold = n
                    break
        ready, self.buf = (self.buf[:-hold], self.buf[-hold:]) if hold else (self.buf, "")
        self._emit(out, ready)
        return out

    def finish(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        self._emit(out, self.buf)
        self.buf = ""
        return out
