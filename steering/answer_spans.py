"""Code spans in an answer copy the conversation: grounded decoding for the model's prose.

A small model quotes names and paths in backticks ("`add` is defined in `calc.py`") and, when it loses the
thread, invents them: the embedded model answered "Which file defines the function add?" with "`ir` is defined
in `calc.py`". In the answer (not the thinking, not a call), the text between a backtick and the next one must
be a stretch of what the user wrote or a tool showed (quotable_text): one line, starting and ending on a word
boundary, without leading or trailing whitespace, with a letter, digit or underscore in it, its brackets and
double quotes balanced. A name, a path, a signature, a whole line of code or a pytest summary line all
qualify; "ir" cut out of "directory" does not, nor "return sum(points" cut out of "return sum(points) /
len(points)". Fences (three or more backticks in a row, as in a code block) stay free: code the model writes
is its own. Two backticks in a row (an empty span, or a ``double`` one) are not written: a model kept out of a
span by the rule otherwise slipped through them.

A copy prior (the grammar's `copy_bias`, as for tool values): inside a span, the tokens that spell on
toward a name of the workspace (a file, or a name its code defines) are preferred. Copying " add" out
of "Which file defines the function add?" into "`add`" means other tokens (`add` without its
space), and the embedded model wrote `Which` there once "ir" was ruled out; a model that means
another word still writes it (a prior, not a ban).

The rule is a byte automaton over the answer, so a token that holds a backtick and more (`` `, ``,
`` )`. ``, `` `return ``) is checked byte by byte. State: OUT (prose), ("span", text so far),
("ticks", n) (the backticks that open a fence) and ("fence", backticks in a row): a fence closes
at the first other byte after three or more backticks.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import Any

from clover.model.text.chat import content_text

TICK = ord("`")
NEWLINE = ord("\n")
WORD = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
SPACE = frozenset(b" \t\r\n")
OUT: tuple = ("out",)
CLOSED: tuple = ("closed",)  # prose right after a span: a backtick here would read as ``
PATH_JOINS = frozenset(b"./-")  # inside a path or dotted name: a span does not end or start here
FENCE = 3  # backticks in a row that open or close a code block


def in_span(code: tuple) -> bool:
    return code[0] == "span"


class AnswerSpans:
    """The conversation as bytes, for one turn: which code spans the answer may write.
    `after(state, token)` is the state after a token (None: the token breaks the rule);
    `allowed(text)` the tokens that may follow a span's `text`; `only(state)` and `banned(state)`
    the decoder's allowed or banned tokens in a state; `preferred(text)` those toward one of
    `names()` (the workspace's files and defined names, read once a span is open)."""

    def __init__(self, vocab: Any, context: str, names: Callable[[], Iterable[str]] | None = None) -> None:
        self.vocab, self._names_of = vocab, names
        self._names: list[bytes] | None = None
        self._preferred: dict[bytes, list[int]] = {}
        self.text = context.encode("utf-8", "replace")
        self._starts: list[int] | None = None  # where a span may start: indexed once a span opens
        self._start_set: set[int] = set()
        self.ticks = [i for i, b in vocab.bytes.items() if TICK in b]
        self._prefix: dict[bytes, list[int]] = {}
        self._allowed: dict[bytes, list[int]] = {}
        self._goes_on: dict[bytes, bool] = {}
        self._viable: dict[bytes, bool] = {}
        self._checked: dict[tuple, list[int]] = {}

    # ------------------------------------------------------------------ the text

    def _index(self) -> None:
        """Where a span may start (indexed on first use: most answers open no span)."""
        if self._starts is None:
            t = self.text
            self._starts = [i for i in range(len(t)) if t[i] not in SPACE and t[i] != TICK and _starts(t, i)]
            self._start_set = set(self._starts)

    @property
    def starts(self) -> list[int]:
        self._index()
        assert self._starts is not None
        return self._starts

    @property
    def start_set(self) -> set[int]:
        self._index()
        return self._start_set

    def occurrences(self, span: bytes) -> list[int]:
        """Where `span` starts in the conversation, at a word boundary (cached)."""
        if span not in self._prefix:
            if not span:
                found = self.starts
            else:
                found, i, starts = [], self.text.find(span), self.start_set
                while i >= 0:
                    if i in starts:
                        found.append(i)
                    i = self.text.find(span, i + 1)
            self._prefix[span] = found
        return self._prefix[span]

    def closable(self, span: bytes) -> bool:
        """May a span end here: a copy with a letter, digit or underscore in it, ending on a word
        boundary, without trailing whitespace, its brackets and double quotes balanced?"""
        if not span:
            return False
        if any(self._closes_on(i, len(span), exact=True) for i in self.occurrences(span)):
            return True
        return not self._continues(span)  # a dead end (the vocabulary cannot spell on): it may close

    def viable(self, span: bytes) -> bool:
        """Can some copy of `span` still close: read on along its line, does it reach an end where a
        span may close (on a word boundary, brackets and quotes balanced)? A copy that has left a
        bracket open must go on to close it ("return sum(points" -> "...(points)"); one that
        closed a bracket it never opened ("b)") cannot."""
        if span not in self._viable:
            self._viable[span] = any(self._closes_on(i, len(span)) for i in self.occurrences(span))
        return self._viable[span]

    def _closes_on(self, i: int, n: int, *, exact: bool = False) -> bool:
        """Does the copy text[i:i+n] close there (`exact`) or there or further on its line? Only
        outside double quotes do brackets count: `f"{x}"` and `"("` are whole."""
        t = self.text
        stack: list[int] = []
        quoted = word = False
        for e in range(i, len(t) + 1):
            if (
                e >= i + n
                and e > i
                and word
                and t[e - 1] not in SPACE
                and not stack
                and not quoted
                and _ends(t, e)
            ):
                return True
            if (exact and e >= i + n) or e == len(t) or t[e] == NEWLINE or t[e] == TICK:
                return False
            b = t[e]
            word |= b in WORD
            if b == QUOTE:
                quoted = not quoted
            elif quoted:
                continue
            elif b in OPENERS:
                stack.append(b)
            elif b in PAIRS and (not stack or stack.pop() != PAIRS[b]):
                return False
        return False

    def _continues(self, span: bytes) -> bool:
        """Can some token spell the span on (not close it)?"""
        if span not in self._goes_on:
            state = ("span", span)
            self._goes_on[span] = any(
                TICK not in self.vocab.bytes[t] and self.after(state, t) is not None
                for t in self._spelled(span)
            )
        return self._goes_on[span]

    def _spelled(self, span: bytes) -> set[int]:
        """The tokens that spell some copy of `span` on (unchecked)."""
        found: set[int] = set()
        seen: set[bytes] = set()
        for i in self.occurrences(span):
            j = i + len(span)
            key = self.text[j : j + self.vocab.longest]
            if key not in seen:  # the same continuation spells the same tokens
                seen.add(key)
                found.update(self.vocab.prefixes(self.text, j))
        return found

    # ------------------------------------------------------------------ the automaton

    def after(self, state: tuple, token: int) -> tuple | None:
        """The state after `token`; None where it breaks the rule. Tokens without bytes (the chat
        format's markup, the end of the turn) leave prose and fences as they are and cannot come
        inside a span."""
        data = self.vocab.bytes.get(token)
        if data is None:
            return None if in_span(state) else state
        for b in data:
            state = self._byte(state, b)
            if state is None:
                return None
        return state

    def _byte(self, state: tuple, b: int) -> tuple | None:
        kind = state[0]
        if kind in ("out", "closed"):
            if b == TICK:
                return None if kind == "closed" else ("span", b"")
            return OUT
        if kind == "span":
            text = state[1]
            if b == TICK:
                if not text:
                    return ("ticks", 2)
                return CLOSED if self.closable(text) else None
            if b == NEWLINE:
                return None
            text += bytes((b,))
            return ("span", text) if self.viable(text) else None
        run = state[1]  # the backticks in a row just read
        if kind == "ticks":
            if b == TICK:
                return ("ticks", run + 1)
            return ("fence", 0) if run >= FENCE else None
        if b == TICK:
            return ("fence", run + 1)
        return OUT if run >= FENCE else ("fence", 0)

    def allowed(self, span: bytes) -> list[int]:
        """The tokens that may follow a span's text: each spells on from some copy of it, or
        closes it (a token with a backtick)."""
        if span not in self._allowed:
            found = self._spelled(span) | set(self.ticks)
            state = ("span", span)
            self._allowed[span] = sorted(t for t in found if self.after(state, t) is not None)
        return self._allowed[span]

    def preferred(self, span: bytes) -> list[int]:
        """The allowed tokens after a span's `text` that spell on toward a name (or close it on one)."""
        if span not in self._preferred:
            if self._names is None:
                self._names = sorted({n.encode() for n in self._names_of()} if self._names_of else set())
            out = []
            for t in self.allowed(span):
                data = self.vocab.bytes[t]
                tick = data.find(TICK)
                if tick >= 0:
                    ok = self._is_name(span + data[:tick])
                else:
                    ok = self._names_prefix(span + data)
                if ok:
                    out.append(t)
            self._preferred[span] = out
        return self._preferred[span]

    def _is_name(self, text: bytes) -> bool:
        assert self._names is not None
        i = bisect.bisect_left(self._names, text)
        return i < len(self._names) and self._names[i] == text

    def _names_prefix(self, text: bytes) -> bool:
        assert self._names is not None
        i = bisect.bisect_left(self._names, text)
        return i < len(self._names) and self._names[i].startswith(text)

    def only(self, state: tuple) -> list[int] | None:
        """The tokens allowed in `state` where few are: inside a span, and after two backticks
        (only a third makes them a fence). None elsewhere: see `banned`."""
        if state[0] == "span":
            return self.allowed(state[1])
        if state[0] == "ticks" and state[1] < FENCE:
            return self._check(state, keep=True)
        return None

    def banned(self, state: tuple) -> list[int]:
        """The tokens that break the rule in prose, right after a span or in a fence: those with a
        backtick that open a span nothing continues (`` `xyz ``) or write `` `` ``."""
        return self._check(state, keep=False)

    def _check(self, state: tuple, *, keep: bool) -> list[int]:
        key = (state, keep)
        if key not in self._checked:
            self._checked[key] = [t for t in self.ticks if (self.after(state, t) is not None) == keep]
        return self._checked[key]


def quotable_text(messages: list[dict[str, Any]]) -> str:
    """What an answer may quote: the user's messages and the tool outputs. Not the system prompt
    or the chat format's role names: words such as "user" are there, and a span is meant to name
    what the user asked about or a tool showed."""
    return "\n".join(content_text(m.get("content")) for m in messages if m.get("role") in ("user", "tool"))


PAIRS = {ord(")"): ord("("), ord("]"): ord("["), ord("}"): ord("{")}
OPENERS = frozenset(PAIRS.values())
QUOTE = ord('"')


def _starts(text: bytes, i: int) -> bool:
    """May a span start at position i? Not inside a word, nor on the dot, slash or dash that joins
    a word to the rest of a path or dotted name (`.py` is not a copy of `calc.py`; `width` is one
    of `self.width`)."""
    if i <= 0 or i >= len(text):
        return True
    a, b = text[i - 1], text[i]
    return not (a in WORD and (b in WORD or b in PATH_JOINS))


def _ends(text: bytes, i: int) -> bool:
    """May a span end at position i? Not inside a word, nor right after a joining dot, slash or
    dash (`calc.` and `tests/` are cut-off paths; `calc` and `self` of `self.width` are names)."""
    if i <= 0 or i >= len(text):
        return True
    a, b = text[i - 1], text[i]
    return not (b in WORD and (a in WORD or a in PATH_JOINS))


__all__ = ["CLOSED", "OUT", "AnswerSpans", "in_span", "quotable_text"]
