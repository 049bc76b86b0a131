"""What the agent checks of a model's call before running it: whether it can run as written (parsed,
a known tool, arguments matching the schema) and the hint a wrong one gets, what makes two calls the
same call (repeats), and whether a call may change files (the step recorder wraps those)."""

from __future__ import annotations

import json
import posixpath
from typing import Any

from clover.core.model_protocol import ToolCall
from clover.core.tool_protocol import Tool
from clover.schema import check_arguments


def call_signature(call: ToolCall) -> str:
    """What makes two calls the same call: their name and arguments, a `path` compared as the file it
    names (`tests`, `tests/` and `./tests` are one directory; a model that alternates them is still
    repeating itself)."""
    args = dict(call.arguments)
    if isinstance(args.get("path"), str) and args["path"].strip():
        args["path"] = posixpath.normpath(args["path"].strip())
    return json.dumps([call.name, args], sort_keys=True, default=str)


def format_problem(call: ToolCall, tools: dict[str, Tool]) -> str | None:
    """Why `call` cannot run as the model wrote it (unparsed, an unknown tool, arguments against the
    tool's schema), with a hint of how to call it; None when it can."""
    if call.error:
        return f"Malformed tool call: {call.error}. {call_hint(call.name, tools)}"
    if call.name not in tools:
        return f"Unknown tool {call.name!r}. Available tools: {', '.join(sorted(tools))}."
    problem = check_arguments(tools[call.name].parameters, call.arguments)
    if problem:
        return f"Invalid arguments for {call.name}: {problem}. {call_hint(call.name, tools)}"
    return None


def call_hint(name: str, tools: dict[str, Tool]) -> str:
    """What the model is told a tool takes, after a call it got wrong."""
    tool = tools.get(name)
    if tool is None:
        return f"Available tools: {', '.join(sorted(tools))}."
    props = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", []))
    params = ", ".join(
        f"{p} ({spec.get('type', 'any')}{', required' if p in required else ''})" for p, spec in props.items()
    )
    return f"{name} takes: {params}."


def read_only(tool: Tool, args: dict[str, Any]) -> bool:
    """Whether the call cannot change files, as its tool says; a tool that cannot tell may write."""
    try:
        return bool(tool.is_read_only(args))
    except Exception:  # a tool without the method, or one that cannot tell: it may write
        return False
