"""Chat format of Clover (torch-free): ChatML turns, thinking blocks, Qwen3-Coder XML tool calls.

Messages are OpenAI chat-completions dicts. `text_messages` turns them into plain
system/user/assistant text messages (tool specs in the system prompt, tool calls as XML, tool
results as `<tool_response>` blocks in a user turn); `render_messages` wraps those in ChatML.
Parsing goes the other way and never raises: a malformed call becomes a ParsedCall with `error`.
"""

from __future__ import annotations

import json
from typing import Any

from clover.model.text.chat_parse import (
    CALL_CLOSE,
    CALL_OPEN,
    END_TOKENS,
    FUNC_CLOSE,
    FUNC_OPEN,
    PARAM_CLOSE,
    PARAM_OPEN,
    THINK_CLOSE,
    THINK_OPEN,
    ParsedCall,
    StreamParser,
    _arguments_dict,
    parse_assistant,
    parse_tool_calls,
    split_thinking,
    tool_schemas,
)

# The reserved ids 0..9: the control tokens (tokenizer_build.CONTROL_TOKENS, dropped on decode), then
# the thinking and call markup (kept on decode).
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|mask|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
]

# --------------------------------------------------------------------------- rendering


def content_text(content: Any) -> str:
    """Message content as text: a string, None, or a list of OpenAI content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def render_compact_tools_section(tools: list[dict[str, Any]]) -> str:
    """Tools as `name(param, optional?)` lines plus the call format: a few dozen tokens per tool
    fewer than the full section, which matters to a small model trained on it."""
    lines = ["# Tools", "", "Functions (? marks an optional parameter):"]
    for spec in tools:
        fn = spec.get("function", spec)
        params = fn.get("parameters") or {}
        required = set(params.get("required", []))
        names = [p if p in required else f"{p}?" for p in (params.get("properties") or {})]
        lines.append(f"- {fn.get('name', '')}({', '.join(names)})")
    lines += [
        "",
        "Call one with:",
        "<tool_call>",
        "<function=NAME>",
        "<parameter=NAME>",
        "value",
        "</parameter>",
        "</function>",
        "</tool_call>",
        "To finish, answer without a tool call.",
    ]
    return "\n".join(lines)


def render_tools_section(tools: list[dict[str, Any]], tool_prompt: str = "full") -> str:
    """The system-prompt section that lists the tools and shows the call format."""
    if tool_prompt == "compact":
        return render_compact_tools_section(tools)
    lines = ["# Tools", "", "You can call these functions:", "", "<tools>"]
    for spec in tools:
        fn = spec.get("function", spec)
        lines += ["<function>", f"<name>{fn.get('name', '')}</name>"]
        if fn.get("description"):
            lines.append(f"<description>{fn['description'].strip()}</description>")
        params = fn.get("parameters") or {}
        required = set(params.get("required", []))
        lines.append("<parameters>")
        for pname, pspec in (params.get("properties") or {}).items():
            lines += ["<parameter>", f"<name>{pname}</name>"]
            pspec = dict(pspec)
            if "type" in pspec:
                ptype = pspec.pop("type")
                lines.append(f"<type>{ptype if isinstance(ptype, str) else json.dumps(ptype)}</type>")
            if "description" in pspec:
                lines.append(f"<description>{str(pspec.pop('description')).strip()}</description>")
            for key, value in pspec.items():  # enum, items, default...: as JSON
                lines.append(f"<{key}>{json.dumps(value, ensure_ascii=False)}</{key}>")
            if pname in required:
                lines.append("<required>true</required>")
            lines.append("</parameter>")
        lines += ["</parameters>", "</function>"]
    lines += [
        "</tools>",
        "",
        "To call a function, reply with this exact format (one <tool_call> block per call):",
        "",
        "<tool_call>",
        "<function=example_function_name>",
        "<parameter=example_parameter>",
        "value (several lines allowed)",
        "</parameter>",
        "</function>",
        "</tool_call>",
        "",
        "Rules: give every required parameter; write non-string values as JSON; write nothing after "
        "your tool calls; to finish, answer without any tool call.",
    ]
    return "\n".join(lines)


def render_tool_call(name: str, arguments: Any) -> str:
    """One call in Qwen3-Coder XML (Hermes JSON when the arguments are not an object)."""
    args = _arguments_dict(arguments)
    if args is None:  # keep what the model wrote, so history stays faithful
        return f"{CALL_OPEN}\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n{CALL_CLOSE}"
    parts = [CALL_OPEN, f"{FUNC_OPEN}{name}>"]
    for key, value in args.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts += [f"{PARAM_OPEN}{key}>", text, PARAM_CLOSE]
    parts += [FUNC_CLOSE, CALL_CLOSE]
    return "\n".join(parts)


def render_assistant_content(content: Any, tool_calls: list[dict[str, Any]] | None = None) -> str:
    """An assistant history turn: the final answer (thinking dropped) and its calls as text."""
    _, answer = split_thinking(content_text(content))
    pieces = [answer.strip()] if answer.strip() else []
    for call in tool_calls or []:
        fn = call.get("function", call)
        pieces.append(render_tool_call(fn.get("name", ""), fn.get("arguments", {})))
    return "\n".join(pieces)


def render_tool_responses(outputs: list[str]) -> str:
    return "\n".join(f"<tool_response>\n{out}\n</tool_response>" for out in outputs)


def text_messages(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, tool_prompt: str = "full"
) -> list[dict[str, str]]:
    """OpenAI messages -> system/user/assistant messages with tools, calls and results as text."""
    out: list[dict[str, str]] = []
    pending: list[str] = []  # consecutive tool results, grouped into one user turn

    def flush() -> None:
        if pending:
            out.append({"role": "user", "content": render_tool_responses(pending)})
            pending.clear()

    for msg in messages:
        role = msg.get("role", "user")
        if role == "tool":
            pending.append(content_text(msg.get("content")))
            continue
        flush()
        if role == "assistant":
            out.append(
                {
                    "role": "assistant",
                    "content": render_assistant_content(msg.get("content"), msg.get("tool_calls")),
                }
            )
        else:
            out.append(
                {
                    "role": "system" if role in ("system", "developer") else role,
                    "content": content_text(msg.get("content")),
                }
            )
    flush()
    if tools:
        section = render_tools_section(tools, tool_prompt)
        if out and out[0]["role"] == "system":
            base = out[0]["content"].rstrip()
            out[0] = {"role": "system", "content": f"{base}\n\n{section}" if base else section}
        else:
            out.insert(0, {"role": "system", "content": section})
    return out


def render_turn(message: dict[str, Any]) -> str:
    """One ChatML message (as text_messages leaves it: a role and a string content)."""
    return f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>\n"


def generation_prompt(think: bool = True) -> str:
    return "<|im_start|>assistant\n" + ("<think>\n" if think else "<think>\n\n</think>\n\n")


def thought_and_reply(thinking: str, content: str) -> str:
    """What the model writes after `generation_prompt(think=True)`: its thinking, then the reply,
    up to and including `<|im_end|>` (the training target of a thinking turn)."""
    return f"{thinking}\n{THINK_CLOSE}\n\n{content}<|im_end|>"


def encode_prompt(tokenizer: Any, config: Any, text: str) -> list[int]:
    """Token ids of a rendered prompt, opened with the checkpoint's `prompt_start_ids` (the token its
    training rows started with; a prompt without it is one the model never saw)."""
    return list(config.prompt_start_ids) + tokenizer.encode(text)


def render_messages(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    think: bool = True,
    add_generation_prompt: bool = True,
    template: str | None = None,
    tool_prompt: str = "full",
) -> str:
    """The prompt text. A checkpoint's jinja2 `template` wins over the built-in ChatML one;
    `tool_prompt` ("full" or "compact") picks how the built-in one lists the tools."""
    if template is not None:
        return _render_jinja(template, messages, tools, think, add_generation_prompt)
    text = "".join(render_turn(m) for m in text_messages(messages, tools, tool_prompt))
    return text + (generation_prompt(think) if add_generation_prompt else "")


def _render_jinja(
    template: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    think: bool,
    add_gen: bool,
) -> str:
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def tojson(
        value: Any, indent: int | None = None, ensure_ascii: bool = False, sort_keys: bool = False
    ) -> str:
        return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    # HF templates expect tool-call arguments as mappings, not JSON strings.
    msgs = []
    for msg in messages:
        msg = dict(msg)
        if msg.get("tool_calls"):
            calls = []
            for call in msg["tool_calls"]:
                fn = dict(call.get("function", call))
                args = _arguments_dict(fn.get("arguments"))
                fn["arguments"] = args if args is not None else fn.get("arguments")
                calls.append({**call, "function": fn})
            msg["tool_calls"] = calls
        msgs.append(msg)
    return env.from_string(template).render(
        messages=msgs, tools=tools or None, add_generation_prompt=add_gen, enable_thinking=think
    )


__all__ = [  # parsing lives in model/text/chat_parse.py; re-exported here as the one chat-format API
    "END_TOKENS",
    "THINK_CLOSE",
    "THINK_OPEN",
    "SPECIAL_TOKENS",
    "ParsedCall",
    "StreamParser",
    "encode_prompt",
    "generation_prompt",
    "parse_assistant",
    "parse_tool_calls",
    "render_assistant_content",
    "render_messages",
    "render_tool_call",
    "render_compact_tools_section",
    "render_tool_responses",
    "render_tools_section",
    "render_turn",
    "split_thinking",
    "text_messages",
    "thought_and_reply",
    "tool_schemas",
]
