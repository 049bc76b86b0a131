"""A runaway guard for any backend's streamed text: a reply stuck repeating itself (`ssss…`, the same
line over and over) is stopped as it streams and cut where the loop began, instead of running to the
token limit and being taken for an answer. Also: which finish reasons mean the reply is incomplete."""

from __future__ import annotations

import time
from typing import Any

from clover.core.protocols import AssistantTurn, EventHandler, Message, Model, StreamEvent, TurnOptions

MAX_PERIOD = 200  # the longest repeated unit looked for, in characters
MIN_SPAN = 400  # a loop must cover at least this many characters...
MIN_REPEATS = 8  # ...and repeat its unit at least this often
CHECK_EVERY = 32  # characters between checks (the check is a few slice comparisons per period)
KEEP_COPIES = 2  # copies of the repeated unit left in the cut text

TRUNCATED = {
    "length": "the reply hit the token limit (max_tokens)",
    "incomplete": "the stream ended before the server said the reply was complete",
    "repetition": "the reply kept repeating itself and was stopped",
}


class Runaway(Exception):
    """Raised from the stream callback to stop generation; carries the kind of stream."""


def loop_start(text: str) -> int | None:
    """Where a repetition at the end of `text` begins (keeping KEEP_COPIES copies), or None. Only
    the end of the text is searched; the loop is then followed back as far as it goes."""
    n = len(text)
    for period in range(1, min(MAX_PERIOD, n // MIN_REPEATS) + 1):
        need = max(MIN_SPAN, MIN_REPEATS * period)
        if need + period > n or text[n - need - period : n - period] != text[n - need :]:
            continue
        # Extend backwards: text[i] == text[i + period] for every i from `start` on.
        start = n - need - period
        step = 256
        while start > 0:
            lo = max(0, start - step)
            if text[lo:start] == text[lo + period : start + period]:
                start = lo
                continue
            while start > 0 and text[start - 1] == text[start - 1 + period]:
                start -= 1
            break
        return min(n, start + KEEP_COPIES * period)
    return None


class RepetitionGuard:
    def __init__(self) -> None:
        self.text = {"text": "", "thinking": ""}
        self._checked = {"text": 0, "thinking": 0}
        self.cut_at: dict[str, int] = {}

    def feed(self, kind: str, piece: str) -> None:
        if kind not in self.text or not piece:
            return
        self.text[kind] += piece
        buf = self.text[kind]
        if len(buf) - self._checked[kind] < CHECK_EVERY:
            return
        self._checked[kind] = len(buf)
        start = loop_start(buf)
        if start is not None:
            self.cut_at[kind] = start
            raise Runaway(kind)

    def cut(self, kind: str) -> str:
        buf = self.text[kind]
        return buf[: self.cut_at[kind]] if kind in self.cut_at else buf


def guarded_complete(
    model: Model,
    messages: list[Message],
    tools: list[Any],
    on_event: EventHandler | None,
    options: TurnOptions | None = None,
) -> AssistantTurn:
    """`model.complete` with the guard on its stream; a runaway reply comes back cut, with
    finish_reason "repetition" and no tool calls (a call inside a loop is not to be trusted)."""
    guard = RepetitionGuard()
    start = time.monotonic()

    def emit(event: StreamEvent) -> None:
        guard.feed(event.kind, event.text)
        if on_event is not None:
            on_event(event)

    try:
        return model.complete(messages, tools, emit, options)
    except Runaway:
        from clover.repl.compaction import estimate_tokens

        text, thinking = guard.cut("text"), guard.cut("thinking")
        return AssistantTurn(
            text=text.strip(),
            thinking=thinking.strip(),
            tool_calls=[],
            prompt_tokens=estimate_tokens(messages),
            completion_tokens=(len(guard.text["text"]) + len(guard.text["thinking"])) // 4,
            seconds=time.monotonic() - start,
            finish_reason="repetition",
        )


def truncation(turn: AssistantTurn | None) -> str | None:
    """Why the turn's reply is incomplete, or None when it ended normally."""
    return TRUNCATED.get(turn.finish_reason) if turn is not None else None
