"""A denoising round's policy: a proposed token and a certainty score per masked position (greedy
or sampled), and which of those positions the round keeps (`select`: the policy's threshold or
top k, the decode order, a draft's agreement)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:  # the settings' home is the decoder's API; only their fields are read here
    from clover.model.decoder.generate import DecodeSettings

POLICIES = ("threshold", "margin", "entropy", "fixed-k")


def _filter(logits: Tensor, top_k: int, top_p: float) -> Tensor:
    if top_k > 0:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop = cum - sorted_logits.softmax(-1) >= top_p  # keep the smallest prefix reaching top_p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return logits


def propose(logits: Tensor, s: DecodeSettings, gen: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """logits [..., V] (already masked) -> (token, score); a higher score means more certain.

    Scores are read off the model's own distribution softmax(logits), whatever the sampling
    temperature / top-k / top-p, so thresholds mean the same thing in every sampling mode."""
    probs = logits.float().softmax(-1)
    if s.temperature > 0:
        sample = _filter(logits.float() / s.temperature, s.top_k, s.top_p).softmax(-1)
        tok = torch.multinomial(sample.reshape(-1, sample.shape[-1]), 1, generator=gen).view(probs.shape[:-1])
    else:
        tok = probs.argmax(-1)
    if s.policy == "margin":
        top2 = probs.topk(2, dim=-1).values
        score = top2[..., 0] - top2[..., 1]
    elif s.policy == "entropy":
        score = (probs * probs.clamp_min(1e-30).log()).sum(-1)  # = -entropy
    else:
        score = probs.gather(-1, tok[..., None])[..., 0]
    return tok, score


def select(
    score: Tensor, masked: Tensor, s: DecodeSettings, held: Tensor | None = None, agree: Tensor | None = None
) -> Tensor:
    """Which masked positions to accept this round [N, B]; at least one per sequence with masks.
    `held`: masked positions that may not be accepted this round (they end a left-order run).
    `agree`: masked positions whose prediction matches the context's draft; the run of them from
    the leftmost masked position is accepted whatever its scores (model/decoder/drafts.py)."""
    score = score.masked_fill(~masked, float("-inf"))
    if s.policy == "fixed-k":
        k = min(s.k, score.shape[-1])
        accept = torch.zeros_like(masked).scatter(-1, score.topk(k, dim=-1).indices, True)
    else:
        thr = -s.threshold if s.policy == "entropy" else s.threshold
        accept = score >= thr
    if agree is not None:  # a draft's run ends at the first unknown position that disagrees
        unknown = masked | held if held is not None else masked
        agree = agree & masked
        accept = accept | (agree & ((unknown & ~agree).int().cumsum(-1) == 0))
    if s.order == "left":
        first = torch.zeros_like(masked).scatter(-1, masked.int().argmax(-1, keepdim=True), True) & masked
        accept = accept & masked
        unknown = masked | held if held is not None else masked
        breaks = unknown & ~accept  # the first still-unknown position ends the run
        return (accept & (breaks.int().cumsum(-1) == 0)) | first  # a forced first one ends it too
    best = torch.zeros_like(masked).scatter(-1, _leftmost_best(score), True)
    return (accept | best) & masked


# Scores closer than this (relative) are a tie. A batch runs other matmul kernels than one sequence,
# so scores differ in their last bits; on a nearly flat distribution two positions' entropies can
# be equal up to that noise, and a plain argmax then picked a different position in a batch.
TIE = 1e-5


def _leftmost_best(score: Tensor) -> Tensor:
    """[N, 1]: per row, the leftmost position whose score ties the best (within TIE)."""
    top = score.max(-1, keepdim=True).values
    near = score >= top - TIE * (1 + top.abs())
    return near.int().argmax(-1, keepdim=True)  # argmax returns the first of equal values
