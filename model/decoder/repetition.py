"""Runaway-repetition stop for the decoder: the same n-gram over and over ends the generation.

A small model that has lost the thread tends to loop (`= = = = =`, `pathpathpath...`) until the token
budget runs out, which costs the user the whole budget and shows them garbage. `generate` checks each
sequence's output after every block and stops it with finish reason "repetition" when its tail is
periodic: one n-gram (period 1 to `max_period` tokens) repeated at least `min_repeats` times, over at
least `min_tokens` tokens (one token over and over: `single_tokens` in a row); or a longer one (a
whole sentence or reply, up to `long_period` tokens) repeated `long_repeats` times in a row, or only
twice when it is at least `twice_period` tokens long. The thresholds keep real output safe: code
repeats short patterns (`0, 0,` or a row of `-`), but rarely 64 tokens of one pattern in a row,
hardly ever three identical copies of a 33-token stretch back to back, and hardly ever a 64-token
stretch twice over, identical to the token (a 77-token reply looped twice filled a 256-token turn
before a third copy could show). One token 24 times in a row is a loop
already: byte-level BPE merges a run of one character, so that is hundreds of characters (the
embedded model wrote `zzzz...` into its thinking, 64 tokens of it before the stop).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RepetitionStop:
    min_tokens: int = 64  # the periodic tail must be at least this long
    min_repeats: int = 4  # and hold the n-gram at least this many times
    max_period: int = 32  # longest n-gram (in tokens) held to min_repeats
    long_period: int = 128  # longer n-grams up to this (0: none): a reply that repeats itself whole
    long_repeats: int = 3  # copies in a row of such a long n-gram
    twice_period: int = 64  # n-grams at least this long (up to long_period) need only two copies (0: off)
    single_tokens: int = 24  # one token repeated: this many in a row is enough
    min_run: int = 0  # and at least this many tokens past the n-gram's first copy (0: no such floor)

    def __post_init__(self) -> None:
        if (
            self.min_tokens < 2
            or self.min_repeats < 2
            or self.max_period < 1
            or self.long_repeats < 2
            or self.single_tokens < 2
        ):
            raise ValueError(
                "need min_tokens, single_tokens >= 2, min_repeats >= 2, max_period >= 1, long_repeats >= 2"
            )
        if 0 < self.twice_period <= self.max_period:
            raise ValueError("twice_period must be 0 (off) or longer than max_period")


def _window(rule: RepetitionStop) -> int:
    """How many trailing tokens can hold a runaway under `rule`."""
    longest = max(rule.max_period, rule.long_period)
    return (
        max(
            rule.min_tokens,
            rule.min_run,
            rule.min_repeats * rule.max_period,
            rule.long_repeats * rule.long_period,
        )
        + longest
    )


def repeated_tail(
    tokens: Sequence[Hashable], rule: RepetitionStop = RepetitionStop()
) -> tuple[int, int] | None:
    """(period, length) of the longest-running periodic tail of `tokens` that breaks `rule`, or None.
    `length` counts every token of the tail, the first occurrence of the n-gram included. Any
    sequence works: token ids for the decoder, a string's characters for a streamed reply."""
    n = len(tokens)
    longest = max(rule.max_period, rule.long_period)
    window = _window(rule)
    tail = list(tokens[-window:]) if n > window else list(tokens)
    m = len(tail)
    best: tuple[int, int] | None = None
    for p in range(1, min(longest, m // 2) + 1):
        repeats = rule.min_repeats if p <= rule.max_period else rule.long_repeats
        if rule.twice_period and p >= rule.twice_period:
            repeats = 2
        if repeats * p > m:
            continue
        run = 0  # trailing positions i with tail[i] == tail[i - p]
        i = m - 1
        while i >= p and tail[i] == tail[i - p]:
            run += 1
            i -= 1
        length = run + p
        least = min(rule.min_tokens, rule.single_tokens) if p == 1 else rule.min_tokens
        if (
            run >= rule.min_run
            and length >= least
            and length >= repeats * p
            and (best is None or length > best[1])
        ):
            best = (p, length)
    return best


def is_runaway(tokens: Sequence[Hashable], rule: RepetitionStop | None = RepetitionStop()) -> bool:
    """Whether generation should stop for repetition (`rule` None: never)."""
    return rule is not None and repeated_tail(tokens, rule) is not None


def first_runaway(
    tokens: Sequence[int], start: int, rule: RepetitionStop | None = RepetitionStop()
) -> int | None:
    """The shortest length L > start such that tokens[:L] ends in a runaway (`rule`), or None. The
    decoder checks after each block: a loop that ends inside a block ("read read ... read" 24
    times, then " Let me read ...") has no periodic tail at the block's end, so each new position
    is checked as an end."""
    if rule is None:
        return None
    window = _window(rule)
    for end in range(max(start, 0) + 1, len(tokens) + 1):
        if repeated_tail(tokens[max(0, end - window) : end], rule) is not None:
            return end
    return None


def cut_runaway(tokens: Sequence[int], rule: RepetitionStop | None = RepetitionStop()) -> list[int]:
    """`tokens` with a runaway tail (as `rule` defines it) cut down to one copy of its n-gram: what
    the loop said once is kept, the repeats are not shown to the user or fed back to the model."""
    found = repeated_tail(tokens, rule) if rule is not None else None
    if found is None:
        return list(tokens)
    period, length = found
    return list(tokens[: len(tokens) - length + period])


def loop_start(tokens: Sequence[Hashable], rule: RepetitionStop = RepetitionStop()) -> tuple[int, int] | None:
    """(start, period) of a runaway tail (as `rule` defines it), followed back past the window the
    check looks at to where the loop began: tokens[i] == tokens[i + period] for every i from
    `start` on. None without a runaway. Slices compare whole stretches at once (a long string is
    followed back in a few comparisons, not one per character)."""
    found = repeated_tail(tokens, rule)
    if found is None:
        return None
    period, length = found
    start = len(tokens) - length
    step = 256
    while start > 0:
        lo = max(0, start - step)
        if tokens[lo:start] == tokens[lo + period : start + period]:
            start = lo
            continue
        while start > 0 and tokens[start - 1] == tokens[start - 1 + period]:
            start -= 1
        break
    return start, period
