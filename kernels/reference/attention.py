"""Masked softmax attention in plain torch (SDPA), with grouped-query heads.

q [N, Hq, Tq, d], k / v [N, Hkv, Tk, d], mask [N or 1, 1, Tq, Tk] bool (True = may attend).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    if k.shape[1] != q.shape[1]:
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
