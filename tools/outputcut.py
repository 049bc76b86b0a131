"""The one head + tail cutter for command output: errors usually sit at the end, so a long output
keeps its start and its end around a one-line marker saying what was cut."""

from __future__ import annotations


def join_head_tail(head: str, tail: str, total: int, newlines: int, limit: int, where: str = "") -> str:
    """About `limit` characters: the first half of `head` and the last half of `tail` (the start and
    the end of an output of `total` characters and `newlines` lines), cut on line boundaries when one
    is near, joined by a marker; `where` tells where the full output is."""
    half = max(limit // 2, 100)
    head, tail = head[:half], tail[-half:]
    nl = head.rfind("\n")
    if nl >= half * 0.8:  # no half lines shown
        head = head[: nl + 1]
    nl = tail.find("\n")
    if 0 <= nl <= half * 0.2:
        tail = tail[nl + 1 :]
    cut = total - len(head) - len(tail)
    cut_lines = max(newlines - head.count("\n") - tail.count("\n"), 0)
    return f"{head}\n[... {cut} characters ({cut_lines} lines) cut{where} ...]\n{tail}"


def cut_output(text: str, limit: int, where: str = "") -> tuple[str, bool]:
    """(text, False) when it fits in `limit` characters, else (head + marker + tail, True)."""
    if len(text) <= limit:
        return text, False
    return join_head_tail(text, text, len(text), text.count("\n"), limit, where), True
