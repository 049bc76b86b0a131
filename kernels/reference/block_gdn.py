"""GDN in block mode (block diffusion): memory readout plus one softmax over the block, plain torch.

For each value head, block queries q̂_i and keys k̂_j (L2-normalised), committed state S, values v_j:
    r_i      = S^T (q̂_i / sqrt(dk))                    memory readout (history only)
    s_ij     = exp(tau) * q̂_i . k̂_j                     every j in the block (bidirectional)
    s_i,mem  = m + c * ln B                             one extra "memory" unit
    p        = softmax over {mem, j in block}
    o_i      = p_i,mem * r_i + sum_j p_ij v_j
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def block_gdn_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    state: Tensor,
    block_logit_scale: Tensor,
    memory_logit: Tensor,
    block_size_calibration: Tensor,
) -> Tensor:
    """q, k [N, nb, B, H, dk] (normalised, unscaled, already expanded to the value heads);
    v [N, nb, B, H, dv]; state [N, nb, H, dk, dv] (the committed state at each block's start);
    the three parameters [H]. Returns o [N, nb, B, H, dv] in v's dtype; arithmetic in fp32."""
    dtype = v.dtype
    q, k, v, state = q.float(), k.float(), v.float(), state.float()
    b, dk = q.shape[2], q.shape[-1]
    readout = torch.einsum("nbihk,nbhkv->nbihv", q * dk**-0.5, state)
    scores = torch.einsum("nbihk,nbjhk->nbhij", q, k) * block_logit_scale.float().exp()[:, None, None]
    mem = (memory_logit.float() + block_size_calibration.float() * math.log(b))[:, None, None]
    scores = torch.cat([mem.expand(*scores.shape[:-1], 1), scores], dim=-1)
    p = scores.softmax(dim=-1)  # [N, nb, H, B, 1 + B]
    o = p[..., 0].transpose(-1, -2)[..., None] * readout
    o = o + torch.einsum("nbhij,nbjhv->nbihv", p[..., 1:], v)
    return o.to(dtype)
