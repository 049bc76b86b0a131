"""Likelihood of continuations: which of several texts the model finds most probable after a prefix.

The prefix is committed once; its cache is then copied to one row per continuation and all of them
run in one causal pass (right-padded; padding comes after every real token, so it changes nothing
a real token sees). A continuation's score is the sum of its tokens' log-probabilities, exactly
what greedy autoregressive decoding maximises token by token.
"""

from __future__ import annotations

import torch
from torch import Tensor

from clover.model.cache import CloverCache
from clover.model.layers.attention import KVCache
from clover.model.modeling import CloverForCausalLM

MAX_BATCH = 64  # continuations per pass: bounds memory on long prefixes


def _repeat(cache: CloverCache, net: CloverForCausalLM, n: int) -> CloverCache:
    """A batch-n copy of a batch-1 cache (the copies share nothing, so each row may grow on its own)."""
    out = net.new_cache(n)
    out.pos, out.pad = cache.pos, cache.pad.repeat(n)
    out.next_logits = cache.next_logits.repeat(n, 1) if cache.next_logits is not None else None
    for dst, src in zip(out.layers, cache.layers, strict=True):
        if isinstance(src, KVCache):
            dst.k, dst.v = src.k.repeat(n, 1, 1, 1), src.v.repeat(n, 1, 1, 1)
        else:
            dst.state, dst.conv = src.state.repeat(n, 1, 1, 1), src.conv.repeat(n, 1, 1)
    return out


class PrefixScorer:
    """The prefix committed once; `scores(continuations)` may then be asked several times."""

    @torch.no_grad()
    def __init__(self, net: CloverForCausalLM, prefix: list[int]) -> None:
        if not prefix:
            raise ValueError("a prefix is needed: the first token is predicted from it")
        self.net, self.dev = net, net.device
        self.base = net.new_cache(1)
        net.prefill(torch.tensor([prefix], device=self.dev), self.base)

    @torch.no_grad()
    def scores(self, continuations: list[list[int]]) -> list[float]:
        """Sum of log p(token) over each continuation's tokens, after the prefix."""
        out: list[float] = []
        for at in range(0, len(continuations), MAX_BATCH):
            out += _score_chunk(self.net, self.base, continuations[at : at + MAX_BATCH], self.dev)
        return out


def continuation_logprobs(
    net: CloverForCausalLM, prefix: list[int], continuations: list[list[int]]
) -> list[float]:
    """Sum of log p(token) over each continuation's tokens, given `prefix` (which must be non-empty)."""
    return PrefixScorer(net, prefix).scores(continuations)


def _score_chunk(net: CloverForCausalLM, base: CloverCache, chunk: list[list[int]], dev) -> list[float]:
    width = max((len(c) for c in chunk), default=0)
    if width == 0:
        return [0.0] * len(chunk)
    ids = torch.zeros(len(chunk), width, dtype=torch.long, device=dev)
    real = torch.zeros(len(chunk), width, dtype=torch.bool, device=dev)
    for i, c in enumerate(chunk):
        ids[i, : len(c)] = torch.tensor(c, dtype=torch.long)
        real[i, : len(c)] = True
    cache = _repeat(base, net, len(chunk))
    h, _ = net._run(ids, None, cache, commit=True)
    logits = torch.cat([cache_first(base, len(chunk)), net.lm_head(h[:, :-1])], dim=1).float()
    logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[..., None])[..., 0]
    return (logp * real).sum(dim=1).tolist()


def cache_first(base: CloverCache, n: int) -> Tensor:
    """The logits that predict the first continuation token, one row per continuation: [n, 1, V]."""
    assert base.next_logits is not None
    return base.next_logits[:, None].repeat(n, 1, 1)


__all__ = ["PrefixScorer", "continuation_logprobs"]
