"""The one-line forms the chat prints: a call as `tool(key argument)`, thinking folded to a line,
and a status line fit to the terminal's width (lowest-priority parts dropped first)."""

from __future__ import annotations

from clover.core.model_protocol import ToolCall
from clover.terminal_text import visible

KEY_ARGS = ("command", "path", "file_path", "pattern", "query", "url", "glob")


def describe_call(call: ToolCall, width: int = 90) -> str:
    """`tool(key argument, ...)` on one line."""
    args = call.arguments or {}
    parts = [args[k] for k in KEY_ARGS if isinstance(args.get(k), str)]
    if not parts:
        parts = [v for v in args.values() if isinstance(v, str | int | float) and not isinstance(v, bool)][:1]
    inner = ", ".join(str(p).strip().splitlines()[0] if str(p).strip() else "" for p in parts)
    inner = visible(inner)  # a command's escape codes must not repaint the line
    if len(inner) > width:
        inner = inner[: width - 1] + "…"
    return f"{visible(call.name)}({inner})"


def fold_thinking(thinking: str, seconds: float, width: int = 80) -> str:
    words = visible(" ".join(thinking.split()))
    if len(words) > width:
        words = words[: width - 1] + "…"
    return f"∴ thought for {seconds:.1f}s: {words}"


def fit_parts(parts: list[tuple[str, int]], width: int) -> str:
    """`a · b · c` in at most `width` cells: the parts with the lowest priority go first, then the
    line is cut with an ellipsis (a status line never wraps)."""
    kept = list(parts)
    while len(kept) > 1 and len(" · ".join(text for text, _ in kept)) > width:
        kept.remove(min(kept, key=lambda part: part[1]))
    line = " · ".join(text for text, _ in kept)
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"
