"""Masked softmax attention in plain torch (SDPA), with grouped-query heads; the arguments of
kernels/triton/attention.py.

q [N, Hq, Tq, d], k / v [N, Hkv, Tk, d], mask [N or 1, 1, Tq, Tk (+ Tb)] bool (True = may attend;
None = everything visible); k_block / v_block [N, Hkv, Tb, d] are appended after k / v; gate
[N, Tq, Hq*d] is the sigmoid output gate. num_splits tunes the Triton kernel's split over the keys
and does not change the result: ignored here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

FEW_QUERIES = 8  # decoding on CPU: up to this many queries, the grouped product below


def _few_queries(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax attention for a few queries on CPU, each key head read once for its group of query
    heads: SDPA's CPU kernels cost ~8 ms per layer for one query against 2,048 keys (plus the
    keys copied once per query head), this ~0.5 ms (benchmarks/cpu_kernels.py)."""
    n, hq, tq, d = q.shape
    hk = k.shape[1]
    group = hq // hk
    qg = q.reshape(n, hk, group * tq, d).float()  # query head h reads key head h // group
    scores = qg @ k.float().transpose(-1, -2) * d**-0.5  # [N, Hk, group*Tq, Tk]
    if mask is not None:
        rows = mask.shape[0]
        m = mask[:, :, None].expand(rows, 1, group, tq, mask.shape[-1]).reshape(rows, 1, group * tq, -1)
        scores = scores.masked_fill(~m, float("-inf"))
    o = scores.softmax(-1) @ v.float()
    return o.view(n, hq, tq, d).to(q.dtype)


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    k_block: Tensor | None = None,
    v_block: Tensor | None = None,
    gate: Tensor | None = None,
    num_splits: int | None = None,
) -> Tensor:
    if k_block is not None:
        k, v = torch.cat([k, k_block], dim=2), torch.cat([v, v_block], dim=2)
    if q.device.type == "cpu" and q.shape[2] <= FEW_QUERIES:
        o = _few_queries(q, k, v, mask)
    else:
        if k.shape[1] != q.shape[1]:
            rep = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if gate is not None:
        n, hq, tq, d = q.shape
        o = o * torch.sigmoid(gate.view(n, tq, hq, d).transpose(1, 2))
    return o
