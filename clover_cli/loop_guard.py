"""The runaway-loop guard around every agent run's model (runner.build_agent puts it there: chat,
`-p`, `clover fix`, the SWE-bench and Terminal-Bench runs). A reply stuck repeating itself (`ssss…`,
the same line over and over) is stopped as it streams and cut where the loop began, instead of
running to the token limit and being taken for an answer. The loop is found by the decoder's own
detector (model/decoder/repetition.py), here over the streamed characters.

A stopped turn reports what was measured: the characters streamed (its `stats`), and tokens only
where the backend counted them in a usage event before the stop; no count is made up from the
characters. Also: which finish reasons mean a reply is incomplete, and how to say so."""

from __future__ import annotations

import time
from typing import Any

from clover.core.model_protocol import (
    AssistantTurn,
    EventHandler,
    Message,
    Model,
    ModelWrapper,
    StreamEvent,
    TurnOptions,
)
from clover.model.decoder.repetition import RepetitionStop, loop_start

# In characters: a unit of up to 200 repeated over at least 400 characters past its first copy,
# and at least 8 times after it. Code repeats short patterns (`----`, `0, 0, `), rarely 400
# characters of one.
TEXT_RULE = RepetitionStop(
    min_tokens=2, min_repeats=9, max_period=200, long_period=0, twice_period=0, single_tokens=2, min_run=400
)
CHECK_EVERY = 32  # characters between checks
KEEP_COPIES = 2  # copies of the repeated unit left in the cut text

TRUNCATED = {
    "length": "the reply hit the token limit (max_tokens)",
    "incomplete": "the stream ended before the server said the reply was complete",
    "repetition": "the reply kept repeating itself and was stopped",
}


class Runaway(Exception):
    """Raised from the stream callback to stop generation; carries the kind of stream."""


class StreamWatch:
    """One turn's streamed text and thinking, checked for a loop as they grow."""

    def __init__(self) -> None:
        self.text = {"text": "", "thinking": ""}
        self._checked = {"text": 0, "thinking": 0}
        self.cut_at: dict[str, int] = {}
        self.usage: dict[str, Any] = {}  # the backend's own counts, when it sent them before the stop

    def feed(self, event: StreamEvent) -> None:
        if event.kind == "usage":
            self.usage = dict(event.data)
            return
        kind, piece = event.kind, event.text
        if kind not in self.text or not piece:
            return
        self.text[kind] += piece
        buf = self.text[kind]
        if len(buf) - self._checked[kind] < CHECK_EVERY:
            return
        self._checked[kind] = len(buf)
        found = loop_start(buf, TEXT_RULE)
        if found is not None:
            start, period = found
            self.cut_at[kind] = min(len(buf), start + KEEP_COPIES * period)
            raise Runaway(kind)

    def cut(self, kind: str) -> str:
        buf = self.text[kind]
        return buf[: self.cut_at[kind]] if kind in self.cut_at else buf

    def streamed_chars(self) -> int:
        return len(self.text["text"]) + len(self.text["thinking"])


def guarded_complete(
    model: Model,
    messages: list[Message],
    tools: list[Any],
    on_event: EventHandler | None,
    options: TurnOptions | None = None,
) -> AssistantTurn:
    """`model.complete` with the guard on its stream; a runaway reply comes back cut, with
    finish_reason "repetition" and no tool calls (a call inside a loop is not to be trusted)."""
    watch = StreamWatch()
    start = time.monotonic()

    def emit(event: StreamEvent) -> None:
        watch.feed(event)
        if on_event is not None:
            on_event(event)

    try:
        return model.complete(messages, tools, emit, options)
    except Runaway:
        text, thinking = watch.cut("text"), watch.cut("thinking")
        kept = len(text) + len(thinking)
        return AssistantTurn(
            text=text.strip(),
            thinking=thinking.strip(),
            tool_calls=[],
            prompt_tokens=int(watch.usage.get("prompt_tokens", 0)),
            completion_tokens=int(watch.usage.get("completion_tokens", 0)),
            seconds=time.monotonic() - start,
            stats={
                "streamed_chars": float(watch.streamed_chars()),
                "cut_chars": float(watch.streamed_chars() - kept),
            },
            finish_reason="repetition",
        )


def truncation(turn: AssistantTurn | None) -> str | None:
    """Why the turn's reply is incomplete, or None when it ended normally; a reply stopped for
    repeating itself says after how many characters."""
    why = TRUNCATED.get(turn.finish_reason) if turn is not None else None
    if turn is not None and why and turn.finish_reason == "repetition" and "streamed_chars" in turn.stats:
        why += f" after {int(turn.stats['streamed_chars']):,} characters"
    return why


class LoopGuard(ModelWrapper):
    """A model behind the guard, remembering its last turn (was it cut short, and why?)."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.last: AssistantTurn | None = None

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def context_window(self) -> int:  # read each time: a backend may learn it from a refusal
        return int(self.inner.context_window or 0)

    def complete(
        self,
        messages: list[Message],
        tools: list[Any],
        on_event: EventHandler | None = None,
        options: TurnOptions | None = None,
    ) -> AssistantTurn:
        self.last = guarded_complete(self.inner, messages, tools, on_event, options)
        return self.last

    def cut_reason(self) -> str:
        """The last reply's finish reason when it was incomplete, else ''."""
        return self.last.finish_reason if self.last is not None and truncation(self.last) else ""

    def cut_note(self) -> str:
        """What the last reply's cut was, in words ('' when it was complete)."""
        return truncation(self.last) or ""
