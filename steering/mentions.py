"""What a conversation names: the copy prior of grounded values (grounding.py) prefers these candidates."""

from __future__ import annotations

import re

WORD = re.compile(r"[A-Za-z0-9_./-]*[A-Za-z0-9_]")  # a name or path as text writes it


class Mentions:
    """The names and paths a text mentions: every word (dotted and slashed runs included), each
    part of a dotted name, and each tail of a path after a slash (`/home/u/proj/src/m.py` names
    `src/m.py`). A path candidate is also named by a tail of it that has a dot or a slash in it
    (`pricing.py` names `src/shop/pricing.py`; a bare `shop` does not name `src/shop`)."""

    def __init__(self, text: str) -> None:
        words: set[str] = set()
        for w in WORD.findall(text):
            words.add(w)
            words.update(w.split("."))
            words.update(w[i + 1 :] for i, c in enumerate(w) if c == "/")
        self.words = words

    def names(self, candidate: str) -> bool:
        c = candidate.rstrip("/")
        if c in self.words:
            return True
        tails = (c[i + 1 :] for i, ch in enumerate(c) if ch == "/")
        return any(("." in t or "/" in t) and t in self.words for t in tails)


__all__ = ["Mentions"]
