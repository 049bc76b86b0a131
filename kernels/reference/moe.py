"""Routed experts in plain torch: tokens sorted by expert, one matmul pair per expert some token was
routed to (the others' weights are never read: at decode widths 1-32 a 256-expert layer touches
8-170 of them).

Weights are fused the way the model stores them: gate_up [E, 2I, H] (gate rows first, then up rows)
and down [E, H, I]. Each token goes to its top-k experts; outputs are weighted and summed.
`routed_experts` is the routing alone, for any per-expert computation (model/loading/quantized.py runs its
int4 / int8 kernels through it).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor


def routed_experts(
    x: Tensor, topk_ids: Tensor, topk_weights: Tensor, expert: Callable[[int, Tensor], Tensor]
) -> Tensor:
    """x [T, H]; topk_ids, topk_weights [T, k]; expert(e, rows [n, H]) -> [n, H]. Returns [T, H] in
    x's dtype: sum over a token's experts of weight * expert(e, token)."""
    k = topk_ids.shape[1]
    flat_ids = topk_ids.reshape(-1)
    order = flat_ids.argsort(stable=True)
    token_of = order // k  # which token each sorted slot came from
    touched, counts = torch.unique_consecutive(flat_ids[order], return_counts=True)
    xs = x[token_of]
    outs = []
    start = 0
    for e, n in zip(touched.tolist(), counts.tolist(), strict=True):  # a loop over touched experts
        outs.append(expert(e, xs[start : start + n]).to(x.dtype))
        start += n
    ys = torch.cat(outs) if outs else xs.new_zeros(0, x.shape[-1])
    ys = ys * topk_weights.reshape(-1)[order, None].to(ys.dtype)
    return torch.zeros_like(x).index_add_(0, token_of, ys)


def moe_experts(x: Tensor, topk_ids: Tensor, topk_weights: Tensor, gate_up: Tensor, down: Tensor) -> Tensor:
    """x [T, H]; topk_ids, topk_weights [T, k]. Returns [T, H] in x's dtype."""

    def expert(e: int, xs: Tensor) -> Tensor:
        gate, up = (xs @ gate_up[e].t()).chunk(2, dim=-1)
        return (F.silu(gate) * up) @ down[e].t()

    return routed_experts(x, topk_ids, topk_weights, expert)
