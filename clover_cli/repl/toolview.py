"""What a tool's output looks like on screen: colours and cursor codes removed, carriage-return
progress collapsed to its last state, every other control shown as an escape (terminal_text.py),
cut to head and tail, an edit summarised as `path +N -M`, a diff with its long lines wrapped."""

from __future__ import annotations

import re

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.text import Text

from clover.core.tool_protocol import ToolResult
from clover.terminal_text import visible
from clover.tools.shell import exit_trailer

# CSI (colours, cursor moves), OSC (titles, links; ended by BEL or ST), and lone two-byte escapes.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_BACKSPACES = re.compile(r"[\x00\x08\x7f]")  # NULs and erased characters: nothing to show


def clean(text: str) -> str:
    """A command's output as shown: colours, cursor codes and titles dropped, `a\\rb` (a progress
    bar redrawn) as `b`, any other control character as an escape."""
    text = _ANSI.sub("", text)
    lines = []
    for line in text.split("\n"):
        line = line.rstrip("\r")  # CRLF endings
        if "\r" in line:
            line = next((part for part in reversed(line.split("\r")) if part), "")
        lines.append(_BACKSPACES.sub("", line))
    return visible("\n".join(lines))


def split_exit(result: ToolResult) -> tuple[str, int | None]:
    """A command's output without the `[exit code N]` line the bash tool ends it with, and N
    (None for a result that ran no command, or was cut short: timed out)."""
    code, trailer = result.exit_code, exit_trailer(result.exit_code)
    if code is None or not result.output.endswith(trailer):
        return result.output, None
    return result.output.removesuffix(trailer), code


def head_tail(lines: list[str], head: int, tail: int) -> tuple[list[str], int, list[str]]:
    """(first lines, how many are left out, last lines); nothing left out when all fit."""
    if len(lines) <= head + tail + 1:
        return lines, 0, []
    return lines[:head], len(lines) - head - tail, lines[-tail:]


def diff_counts(diff: str) -> tuple[int, int]:
    added = removed = 0
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def edit_summary(path: str, diff: str) -> str:
    added, removed = diff_counts(diff)
    return f"{path} +{added} -{removed}"


def tail_lines(text: str, count: int, width: int) -> list[str]:
    """The last `count` non-empty lines of a running command's output, cleaned and cut to `width`."""
    lines = [line for line in clean(text[-8000:]).split("\n") if line.strip()][-count:]
    return [line if len(line) <= width else line[: width - 1] + "…" for line in lines]


LONG_LINE = 2000  # characters of a diff line shown; past them the line is marked (the edit has it whole)


def mark_long_lines(text: str, limit: int = LONG_LINE) -> str:
    out = []
    for line in text.split("\n"):
        if len(line) > limit:
            line = line[:limit] + f" ⟪… {len(line) - limit:,} more characters on this line⟫"
        out.append(line)
    return "\n".join(out)


def diff_view(diff: str, terminal: bool) -> RenderableType:
    """A diff as the screen shows it, whole: escapes visible, lines wrapped at the terminal's width
    (never cut silently), a line past LONG_LINE characters marked where it is cut."""
    text = mark_long_lines(visible(diff.rstrip("\n")))
    if terminal:
        return Syntax(text, "diff", theme="ansi_dark", background_color="default", word_wrap=True)
    return Text(text)
