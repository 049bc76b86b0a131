"""What a tool's output looks like on screen: terminal escapes removed, carriage-return progress
collapsed to its last state, cut to head and tail, an edit summarised as `path +N -M`."""

from __future__ import annotations

import re

# CSI (colours, cursor moves), OSC (titles, links; ended by BEL or ST), and lone two-byte escapes.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_EXIT = re.compile(r"\n?\[exit code (-?\d+)\]\s*$")


def clean(text: str) -> str:
    """Printable text: no escapes or control bytes; `a\\rb` (a progress bar redrawn) shows as `b`."""
    text = _ANSI.sub("", text)
    lines = []
    for line in text.split("\n"):
        line = line.rstrip("\r")  # CRLF endings
        if "\r" in line:
            line = next((part for part in reversed(line.split("\r")) if part), "")
        lines.append(_CONTROL.sub("", line))
    return "\n".join(lines)


def split_exit(output: str) -> tuple[str, int | None]:
    """The bash tool's output without its trailing `[exit code N]`, and N."""
    m = _EXIT.search(output)
    if not m:
        return output, None
    return output[: m.start()], int(m.group(1))


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
