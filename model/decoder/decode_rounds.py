"""A block's denoising rounds for the decoder (model/decoder/generate.py): their forwards over the cache,
with the queue of finished blocks each block's first round commits (commit fusion), and the two ways
a round keeps tokens: the threshold family (with n-gram drafts from the prompt, model/decoder/drafts.py) and
verify (a greedy draft checked causally, model/decoder/verify.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from clover.model.cache import CloverCache
from clover.model.decoder.decode_block import Steering
from clover.model.decoder.decode_policy import propose, select
from clover.model.decoder.drafts import DraftIndex
from clover.model.decoder.verify import needs_draft, speculate, verified_round, windows
from clover.model.modeling import CloverForCausalLM

if TYPE_CHECKING:  # the settings' home is the decoder's API; only their fields are read here
    from clover.model.decoder.generate import DecodeSettings


class Rounds:
    """The rounds of one `generate` call. `drafts`: one index per prompt (threshold rounds with
    n-gram drafts) or None; `rows_for`: a grammar's per-position rows for verified rounds, or None;
    `constrained`: a constraint steers the blocks."""

    def __init__(
        self,
        model: CloverForCausalLM,
        s: DecodeSettings,
        gen: torch.Generator | None,
        drafts: list[DraftIndex] | None,
        rows_for: Callable | None,
        constrained: bool,
    ) -> None:
        self.model, self.s, self.gen = model, s, gen
        self.cache: CloverCache | None = None  # the run's cache, once the prompt's prefill filled it
        self.drafts, self.rows_for, self.constrained = drafts, rows_for, constrained
        self.pending: list[Tensor] = []  # finished blocks not yet committed
        self.drafted = 0  # tokens accepted on a draft's agreement below the threshold

    def logits(self, block: Tensor, masked: Tensor, rnd: int) -> Tensor:
        """A round's logits: the first round of a block also commits the blocks before it."""
        if rnd == 0 and self.pending:  # only the masked positions' logits are read
            logits = self.model.commit_and_denoise(
                torch.cat(self.pending, dim=1), block, self.cache, need=masked
            )
            self.pending = []
            return logits
        return self.model.denoise(block, self.cache, need=masked)

    def proposed(self, logits: Tensor, banned: Tensor, steer: Steering) -> tuple[Tensor, Tensor]:
        steered = logits.masked_fill(banned, float("-inf"))
        return propose(
            steered if steer.bias is None else steered + steer.bias.to(steered.dtype), self.s, self.gen
        )

    def threshold(
        self,
        block: Tensor,
        masked: Tensor,
        open_: Tensor,
        ban: Tensor,
        steer: Steering,
        rnd: int,
        out: list[list[int]],
    ) -> tuple[Tensor, Tensor]:
        """Keep what the policy accepts; with n-gram drafts, also the run the prompt's draft agrees with."""
        logits = self.logits(block, masked, rnd)
        banned = ban if steer.ban is None else ban | steer.ban
        tok, score = self.proposed(logits, banned, steer)
        choosable = masked if steer.frozen is None else masked & ~steer.frozen
        accept = select(score, choosable, self.s, steer.frozen)
        if self.drafts is not None:
            plain = accept
            agree = _draft_agreement(self.drafts, out, block, open_, masked, tok)
            accept = select(score, choosable, self.s, steer.frozen, agree)
            self.drafted += int((accept & ~plain).sum())
        return accept, tok

    def verify(
        self,
        block: Tensor,
        masked: Tensor,
        open_: Tensor,
        ban: Tensor,
        steer: Steering,
        rnd: int,
        guess: Tensor | None,
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """A greedy draft checked causally (model/decoder/verify.py); also returns the next round's logits
        when this round's check denoised a guess of it that still holds (fused rounds)."""
        # without a grammar's rows a constraint's rules are known at the frontier only
        spans = windows(masked, None if self.rows_for is not None else steer.frozen)
        if self.constrained and self.rows_for is None:
            spans = [None if sp is None else (sp[0], sp[0] + 1) for sp in spans]
        logits = None
        if not needs_draft(masked, spans):  # a lone frontier: one causal step
            if rnd == 0 and self.pending:
                self.model.commit(torch.cat(self.pending, dim=1), self.cache)
                self.pending = []
        elif guess is not None:  # denoised in the last round's checking forward
            logits = guess
        else:
            logits = self.logits(block, masked, rnd)
        banned = ban if steer.ban is None else ban | steer.ban
        draft = spec = given = None
        if logits is not None:
            draft, score = self.proposed(logits, banned, steer)
            if self.s.fused_rounds:
                spec, given = speculate(block, masked, draft, score, spans)
        accept, tok, nxt = verified_round(
            self.model,
            self.cache,
            block,
            masked,
            spans,
            draft,
            banned,
            steer.bias,
            _grammar_rows(self.rows_for, open_),
            ban,
            spec=spec,
        )
        # kept only when the check kept every guessed token: a guess made after a token the check
        # rejected drafts worse than a fresh round
        keep_guess = spec is not None and not (given & ~(accept & (tok == draft))).any()
        return accept, tok, nxt if keep_guess else None


def _draft_agreement(
    drafts: list[DraftIndex], out: list[list[int]], block: Tensor, open_: Tensor, masked: Tensor, tok: Tensor
) -> Tensor:
    """[N, B]: masked positions whose prediction equals the prompt's draft for them. The draft
    continues the output from its leftmost masked position (everything left of it is known)."""
    draft = torch.full_like(block, -1)
    rows, opens, masks = block.tolist(), open_.tolist(), masked.tolist()
    for i, index in enumerate(drafts):
        if True not in masks[i]:
            continue
        f = masks[i].index(True)
        recent = out[i][-index.n :] + [t for t, o in zip(rows[i][:f], opens[i][:f], strict=True) if o]
        guess = index.draft(recent, len(rows[i]) - f)
        if guess:
            draft[i, f : f + len(guess)] = torch.tensor(guess, dtype=block.dtype, device=block.device)
    return (tok == draft) & masked


def _grammar_rows(rows_for: Callable | None, open_: Tensor) -> Callable | None:
    """A grammar's per-position rows for a verified round, with the block's output positions."""
    if rows_for is None:
        return None
    opens = open_.tolist()
    return lambda i, row, f, e: rows_for(i, row, opens[i], f, e)
