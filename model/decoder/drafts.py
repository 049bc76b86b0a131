"""Drafts from the context for block decoding (prompt lookup, as a denoising acceptance rule).

An agent's output copies a great deal from its context: paths, names, the line it read, a command it ran
before. When the last `n` tokens written so far also occur in the prompt, the tokens that followed them there
are a draft of what comes next. Only the prompt is drafted from: a draft taken from the turn's own output
would pull a model that has begun to repeat itself into a loop. The draft never writes a token: in a denoising
round, a masked position whose own prediction (the model's argmax, given the block as it is) equals the draft
token is accepted, together with every position left of it that agrees too, even when the model's confidence
is below the threshold. The model still decides every token; a draft only lets a run it agrees with be
committed in one round instead of one position at a time, so a block that copies needs fewer forwards. With B
= 1 there is one position per round and drafts change nothing."""

from __future__ import annotations

from collections.abc import Sequence


class DraftIndex:
    """The latest occurrence in a prompt of each of its n-grams that some token follows."""

    def __init__(self, prompt: Sequence[int], n: int) -> None:
        self.n = n
        self.tokens: list[int] = list(prompt)
        self.last: dict[tuple[int, ...], int] = {}  # n-gram -> the start of its latest occurrence
        for start in range(len(self.tokens) - n):
            self.last[tuple(self.tokens[start : start + n])] = start

    def draft(self, recent: Sequence[int], length: int) -> list[int]:
        """Up to `length` tokens that followed, in the prompt, the latest occurrence of the last n
        tokens of (prompt + `recent`, the output so far); [] when the prompt has none."""
        if length <= 0:
            return []
        short = self.n - len(recent)
        tail = (self.tokens[-short:] + list(recent)) if short > 0 else list(recent[-self.n :])
        if len(tail) < self.n:
            return []
        start = self.last.get(tuple(tail))
        if start is None:
            return []
        begin = start + self.n
        return self.tokens[begin : begin + length]


__all__ = ["DraftIndex"]
