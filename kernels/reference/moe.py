"""Routed experts in plain torch: tokens sorted by expert, one matmul pair per non-empty expert.

Weights are fused the way the model stores them: gate_up [E, 2I, H] (gate rows first, then up rows)
and down [E, H, I]. Each token goes to its top-k experts; outputs are weighted and summed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def moe_experts(x: Tensor, topk_ids: Tensor, topk_weights: Tensor, gate_up: Tensor, down: Tensor) -> Tensor:
    """x [T, H]; topk_ids, topk_weights [T, k]. Returns [T, H] in x's dtype."""
    t, k = topk_ids.shape
    flat_ids = topk_ids.reshape(-1)
    order = flat_ids.argsort(stable=True)
    token_of = order // k  # which token each sorted slot came from
    counts = torch.bincount(flat_ids, minlength=gate_up.shape[0]).tolist()
    xs = x[token_of]
    outs = []
    start = 0
    for e, n in enumerate(counts):  # a loop over experts, never over tokens
        if n == 0:
            continue
        h = xs[start : start + n] @ gate_up[e].t()
        gate, up = h.chunk(2, dim=-1)
        outs.append((F.silu(gate) * up) @ down[e].t())
        start += n
    ys = torch.cat(outs) if outs else xs.new_zeros(0, x.shape[-1])
    ys = ys * topk_weights.reshape(-1)[order, None].to(ys.dtype)
    return torch.zeros_like(x).index_add_(0, token_of, ys)
