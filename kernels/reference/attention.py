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
    if k.shape[1] != q.shape[1]:
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if gate is not None:
        n, hq, tq, d = q.shape
        o = o * torch.sigmoid(gate.view(n, tq, hq, d).transpose(1, 2))
    return o
