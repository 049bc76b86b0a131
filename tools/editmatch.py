"""Where str_replace's old_str is in a file, and why not when it is nowhere: CRLF files are
matched with '\\n' (positions mapped back), and a miss names the most similar region."""

from __future__ import annotations

import bisect
import difflib
import re

from clover.tools.textio import lines_of, numbered


def normalise(text: str) -> tuple[str, list[int]]:
    """text with CRLF -> LF, and the normalised positions of every '\\n' that lost its '\\r'."""
    removed = [m.start() - i for i, m in enumerate(re.finditer("\r\n", text))]
    return text.replace("\r\n", "\n"), removed


def original(pos: int, removed: list[int]) -> int:
    return pos + bisect.bisect_left(removed, pos)


def occurrences(text: str, sub: str) -> list[int]:
    found, i = [], text.find(sub)
    while i != -1:
        found.append(i)
        i = text.find(sub, i + 1)
    return found


def closest(text: str, old: str, rel: str) -> str:
    """Why old_str did not match: the most similar region of the file, numbered."""
    lines = lines_of(text)
    want = old.strip("\n").split("\n")
    k = max(len(want), 1)
    stripped = [w.strip() for w in want]
    rough = []
    for i in range(max(len(lines) - k + 1, 1)):
        window = lines[i : i + k]
        if [w.strip() for w in window] == stripped:
            return (
                f"old_str was not found in {rel}, but lines {i + 1}-{i + k} match it when "
                f"indentation and trailing whitespace are ignored:\n{numbered(window, i + 1)}\n"
                "Copy the whitespace exactly."
            )
        sm = difflib.SequenceMatcher(None, "\n".join(window), "\n".join(want), autojunk=False)
        rough.append((sm.quick_ratio(), i))
    best_ratio, best = 0.0, 0
    for _, i in sorted(rough, reverse=True)[:25]:
        ratio = difflib.SequenceMatcher(
            None, "\n".join(lines[i : i + k]), "\n".join(want), autojunk=False
        ).ratio()
        if ratio > best_ratio:
            best_ratio, best = ratio, i
    if not lines or best_ratio < 0.3:
        return f"old_str was not found in {rel} and no similar region exists; view the file first."
    lo, hi = max(best - 2, 0), min(best + k + 2, len(lines))
    return (
        f"old_str was not found in {rel}. The closest region is lines {best + 1}-{best + k} "
        f"({best_ratio:.0%} similar):\n{numbered(lines[lo:hi], lo + 1)}\n"
        "old_str must match the file exactly (whitespace included); view the file and retry."
    )
