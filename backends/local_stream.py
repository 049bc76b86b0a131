"""Streaming a local decode: the decoder's round events as block_round events and, block by block,
the text as "thinking"/"text" deltas; the decoded text as an AssistantTurn; the stats of a turn
decoded in two pieces."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clover.core.model_protocol import AssistantTurn, EventHandler, StreamEvent, ToolCall, ToolSpec
from clover.model.text.chat import StreamParser, parse_assistant, tool_schemas
from clover.model.text.tokenizer import CloverTokenizer, IncrementalDecoder


def block_size_of(decode: Any) -> int:
    return decode.block_size or 1


def merged_stats(first: Mapping[str, float], second: Mapping[str, float]) -> dict[str, float]:
    """Decoding stats of a turn decoded in two pieces: counts add up, rates are recomputed."""
    out = dict(first)
    for k in (
        "forwards",
        "tokens",
        "blocks",
        "prefill_seconds",
        "seconds",
        "prefill_tokens",
        "prefill_forwards",
        "drafted_tokens",
    ):
        out[k] = first.get(k, 0.0) + second.get(k, 0.0)
    tokens, forwards = out.get("tokens", 0.0), max(out.get("forwards", 0.0), 1.0)
    out["tokens_per_forward"] = tokens / forwards
    out["tok_per_s"] = tokens / max(out["seconds"] - out["prefill_seconds"], 1e-9)
    rounds = first.get("rounds_per_block", 0.0) * first.get("blocks", 0.0)
    rounds += second.get("rounds_per_block", 0.0) * second.get("blocks", 0.0)
    out["rounds_per_block"] = rounds / max(out["blocks"], 1.0)
    return out


def turn_from_text(text: str, tools: list[ToolSpec] | None, *, opened: bool) -> AssistantTurn:
    """A decoded reply -> AssistantTurn (thinking, answer, parsed tool calls; never raises)."""
    thinking, answer, parsed = parse_assistant(text, tool_schemas(tools), opened=opened)
    calls = [ToolCall(p.name, p.arguments, raw=p.raw, error=p.error) for p in parsed]
    return AssistantTurn(text=answer.strip(), thinking=thinking, tool_calls=calls)


class BlockStreamer:
    """Turns the decoder's round events into block_round events and, once a block is complete,
    text deltas classified by the chat StreamParser. A block whose positions were all forced has
    no rounds: its text is taken from `forced` (the caller's and the grammar's placements) when the
    next block starts (or at the end)."""

    def __init__(
        self,
        tok: CloverTokenizer,
        stops: set[int],
        parser: StreamParser,
        emit: EventHandler,
        forced: Mapping[int, int],
        first_offset: int,
        block_size: int,
    ) -> None:
        self.tok, self.stops, self.parser, self.emit = tok, stops, parser, emit
        self.forced, self.first_offset, self.block_size = forced, first_offset, block_size
        self.text = IncrementalDecoder(tok)
        self.done_blocks = -1
        self.streamed = 0  # generated tokens already passed on as text

    def round(self, ev: Any) -> None:
        row = ev.tokens[0]
        pieces = [None if t is None else self.tok.piece(t) for t in row]
        if ev.block > self.done_blocks + 1:  # blocks without rounds came first: fully forced
            start = max(ev.block * self.block_size - self.first_offset, 0)
            self._push([self.forced[o] for o in range(self.streamed, start) if o in self.forced])
            self.streamed = start
        self.emit(StreamEvent("block_round", data={"tokens": pieces, "block": ev.block, "round": ev.round}))
        if None not in row and ev.block > self.done_blocks:  # the block's last round: it is final
            self.done_blocks = ev.block
            self._push(row)
            self.streamed += len(row)

    def _push(self, ids: list[int]) -> None:
        delta = self.text.push([t for t in ids if t not in self.stops])
        if delta:
            self._pieces(self.parser.feed(delta))

    def _pieces(self, pieces: list[tuple[str, str]]) -> None:
        for kind, text in pieces:
            if kind in ("thinking", "text"):  # call markup is held back; calls are emitted parsed
                self.emit(StreamEvent(kind, text))  # type: ignore[arg-type]

    def finish(self, out: list[int]) -> None:
        self._push(out[self.streamed :])
        self.streamed = len(out)
        delta = self.text.flush()
        if delta:
            self._pieces(self.parser.feed(delta))
        self._pieces(self.parser.finish())


__all__ = ["BlockStreamer", "block_size_of", "merged_stats", "turn_from_text"]
