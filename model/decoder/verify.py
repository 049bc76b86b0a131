"""Verified rounds: block diffusion drafts, a causal pass decides (decode order "verify").

A denoising round predicts every masked position of the block at once; its argmax is a draft. The
same weights read causally (the path autoregressive decoding takes) then check it: one pass over
the block's tokens with the draft in place gives, at every position, the token autoregressive
greedy decoding would pick there given the tokens before it. The round keeps the draft's run from
the frontier while it agrees, plus the first disagreeing position's causal token, which is right
by construction. So a greedy decode produces exactly the autoregressive output (up to float
rounding between a chunked and a one-token pass), in about one round per agreeing run instead of
one forward per token: two forwards per round (draft, check), each about the cost of one
autoregressive step on this model.

Bans (a caller's allowed tokens, a constraint's) and logit biases apply to the causal logits as they
do to the draft's. A constraint's rules past the frontier depend on the tokens before each
position: a grammar that gives them along the draft (`verify_rows`, the tool grammar) lets the
window run to the block's end; any other constraint is trusted at the frontier only. Where the
window is the frontier alone, the draft is skipped and the round is a plain causal step.

Fused rounds (DecodeSettings.fused_rounds): the check's forward also denoises a guess of the next
round's block, the draft's confident run placed as if kept (`speculate`; the noisy block sees the
cache and itself, not the check's tokens, so both results are those of their own passes). When the
check keeps every guessed token, the next round needs no forward of its own; when it rejects one,
the guess is dropped (it was drafted after a wrong token) and the next round denoises afresh. The
guess knows fewer of the block's tokens than a fresh round would (the ones kept past it are still
masked in it), so a round keeps fewer; still, the embedded model's oracle turns in benchmarks/verify.py
take 374 forwards fused against 441 (MODEL_CARD). On a 2-core CPU a forward's cost grows
with its width, so decode time is not less; where width is nearly free (a GPU), fewer forwards is
less time.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from clover.model.cache import CloverCache
from clover.model.modeling import CloverForCausalLM

# rows_for(sequence, block row with the draft in place, frontier, end) -> per position from the
# frontier on, (ban row [V] | None, bias row [V] | None) in the grammar state after the tokens before
# it; as many positions as the constraint can vouch for (at least the frontier's, or none: unknown)
RowsFor = Callable[[int, list[int], int, int], list[tuple[Tensor | None, Tensor | None]]]


def windows(masked: Tensor, held: Tensor | None) -> list[tuple[int, int] | None]:
    """Per sequence: (frontier, end) of the positions this round may decide, or None (no mask).
    The window runs from the leftmost masked position up to the first held masked one (`held`
    None: to the block's end)."""
    rows = masked.tolist()
    holds = held.tolist() if held is not None else [[False] * len(r) for r in rows]
    spans: list[tuple[int, int] | None] = []
    for row, hold in zip(rows, holds, strict=True):
        if True not in row:
            spans.append(None)
            continue
        f = row.index(True)
        e = f + 1
        while e < len(row) and not (row[e] and hold[e]):
            e += 1
        spans.append((f, e))
    return spans


def needs_draft(masked: Tensor, spans: list[tuple[int, int] | None]) -> bool:
    """Is there a masked position after some frontier inside its window (else a draft is wasted)?"""
    rows = masked.tolist()
    return any(sp is not None and True in rows[i][sp[0] + 1 : sp[1]] for i, sp in enumerate(spans))


@torch.no_grad()
def verified_round(
    model: CloverForCausalLM,
    cache: CloverCache,
    block: Tensor,
    masked: Tensor,
    spans: list[tuple[int, int] | None],
    draft: Tensor | None,
    banned: Tensor,
    bias: Tensor | None = None,
    rows_for: RowsFor | None = None,
    base_ban: Tensor | None = None,
    spec: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor | None]:
    """(accept [N, B], tokens [N, B], next logits [N, B, V] | None) for one verified round.
    `draft` [N, B]: the round's proposed tokens at masked positions (None: no draft, the frontier
    alone is decided). `banned` [N, B, V] and `bias`: the round's steering; `rows_for` (a
    grammar's): the steering of each position past the frontier given the draft before it, on top
    of `base_ban` (the caller's own bans, without the grammar's). The cache holds everything before
    the block. `spec` [N, B]: a block to denoise in the same forward (see `speculate`); its logits
    come back as the third value (else None)."""
    spans = list(spans)
    if draft is None:  # the frontier alone
        spans = [None if sp is None else (sp[0], sp[0] + 1) for sp in spans]
    filled = torch.where(masked, draft, block) if draft is not None else block
    steering: list[list[tuple[Tensor | None, Tensor | None]] | None] = []
    for i, sp in enumerate(spans):
        rows = None
        if sp is not None and rows_for is not None and draft is not None:
            rows = rows_for(i, filled[i].tolist(), sp[0], sp[1]) or None
            spans[i] = (sp[0], sp[0] + len(rows)) if rows else (sp[0], sp[0] + 1)
        steering.append(rows)
    last = max((sp[1] - 1 for sp in spans if sp is not None), default=0)
    next_logits = None
    if spec is not None:
        need = spec == model.config.mask_token_id
        hidden, next_logits = model.peek_and_denoise(filled[:, : max(last, 1)], spec, cache, need=need)
    else:
        hidden = model.peek(filled[:, :last], cache) if last > 0 else None
    accept = torch.zeros_like(masked)
    tokens = filled.clone()
    masks = masked.tolist()
    for i, sp in enumerate(spans):
        if sp is None:
            continue
        f, e = sp
        parts = []
        if f == 0:  # the committed prefix's own next-token logits
            if cache.next_logits is None:
                raise ValueError("a block's first position needs a committed prefix or a fixed token")
            parts.append(cache.next_logits[i : i + 1].to(model.dtype))
        lo = max(f, 1)
        if lo < e:
            assert hidden is not None
            parts.append(model.lm_head(hidden[i, lo - 1 : e - 1]))
        logits = torch.cat(parts).float()
        ban = banned[i, f:e].clone()
        add = bias[i, f:e].float() if bias is not None else torch.zeros_like(logits)
        rows = steering[i]
        if rows is not None:  # the grammar's rows replace the round's own
            ban = base_ban[i, f:e].clone() if base_ban is not None else torch.zeros_like(ban)
            add = torch.zeros_like(logits)
            for k, (row_ban, row_bias) in enumerate(rows):
                if row_ban is not None:
                    ban[k] |= row_ban
                if row_bias is not None:
                    add[k] = row_bias.float()
        choice = (logits.masked_fill(ban, float("-inf")) + add).argmax(-1).tolist()
        for k, j in enumerate(range(f, e)):
            if not masks[i][j]:  # a given token (the caller's, the grammar's): context, not a choice
                continue
            accept[i, j] = True
            tokens[i, j] = choice[k]
            if draft is None or choice[k] != int(filled[i, j]):
                break  # what follows was drafted after another token
    return accept, tokens, next_logits


# A draft token at least this likely is taken as kept when guessing the next round: the best of 0.5, 0.7,
# 0.9, 0.97 on benchmarks/verify.py (B = 32: 2.82, 2.89, 3.04, 2.97 tokens per forward)
GUESS_SURE = 0.9


def speculate(
    block: Tensor,
    masked: Tensor,
    draft: Tensor,
    score: Tensor,
    spans: list[tuple[int, int] | None],
    sure: float = GUESS_SURE,
) -> tuple[Tensor | None, Tensor]:
    """(spec block [N, B] | None, given [N, B]): the next round's block as a guess, to denoise in this
    round's checking forward. Per sequence, the draft's tokens are placed from the frontier while
    its confidence is at least `sure` (the run the check will likely keep) and the positions after
    stay masked; `given` marks the placed ones. None when the guess leaves no mask (the block would
    be done: no round reads it)."""
    given = torch.zeros_like(masked)
    rows, sc = masked.tolist(), score.tolist()
    for i, sp in enumerate(spans):
        if sp is None:
            continue
        for j in range(sp[0], sp[1]):
            if rows[i][j]:
                if sc[i][j] < sure:
                    break
                given[i, j] = True
    if not (masked & ~given).any():  # the guess would finish the block: no round would read it
        return None, given
    return torch.where(given, draft, block), given
