"""Qwen3-Next's fused GDN projections and ours: `in_proj_qkvz` / `in_proj_ba` rows grouped per key
head, against Clover's (and Qwen3.5's) separate `in_proj_qkv`, `in_proj_z`, `in_proj_b`, `in_proj_a`.
The loader splits them (model/loading/load.py); the vLLM weight export fuses them (engines/weights.py)."""

from __future__ import annotations

import torch
from torch import Tensor

from clover.model.config import CloverConfig


def split_qkvz(qkvz: Tensor, config: CloverConfig) -> tuple[Tensor, Tensor]:
    """Qwen3-Next's in_proj_qkvz rows -> (in_proj_qkv, in_proj_z) rows. Qwen3-Next groups the rows
    per key head g: [q_g (dk), k_g (dk), v_g (r*dv), z_g (r*dv)] with r = value heads per key head
    (transformers' `fix_query_key_value_ordering`); ours are [all q | all k | all v] and [all z], value
    head g*r+j in both."""
    nk, dk, dv = config.linear_num_key_heads, config.linear_key_head_dim, config.linear_value_head_dim
    rv = config.linear_num_value_heads // nk * dv
    q, k, v, z = qkvz.view(nk, 2 * dk + 2 * rv, -1).split([dk, dk, rv, rv], dim=1)
    qkv = torch.cat([q.reshape(nk * dk, -1), k.reshape(nk * dk, -1), v.reshape(nk * rv, -1)])
    return qkv, z.reshape(nk * rv, -1)


def split_ba(ba: Tensor, config: CloverConfig) -> tuple[Tensor, Tensor]:
    """Qwen3-Next's in_proj_ba rows [b_g (r), a_g (r)] per key head g -> (in_proj_b, in_proj_a)."""
    nk = config.linear_num_key_heads
    r = config.linear_num_value_heads // nk
    b, a = ba.view(nk, 2 * r, -1).split([r, r], dim=1)
    return b.reshape(nk * r, -1), a.reshape(nk * r, -1)


def fuse_qkvz(qkv: Tensor, z: Tensor, config: CloverConfig) -> Tensor:
    """The inverse of `split_qkvz`: (in_proj_qkv, in_proj_z) rows -> Qwen3-Next's in_proj_qkvz."""
    nk, dk, dv = config.linear_num_key_heads, config.linear_key_head_dim, config.linear_value_head_dim
    rv = config.linear_num_value_heads // nk * dv
    q, k, v = qkv.split([nk * dk, nk * dk, nk * rv])
    parts = [q.reshape(nk, dk, -1), k.reshape(nk, dk, -1), v.reshape(nk, rv, -1), z.reshape(nk, rv, -1)]
    return torch.cat(parts, dim=1).reshape(-1, qkv.shape[-1])


def fuse_ba(b: Tensor, a: Tensor, config: CloverConfig) -> Tensor:
    """The inverse of `split_ba`: (in_proj_b, in_proj_a) rows -> Qwen3-Next's in_proj_ba."""
    nk = config.linear_num_key_heads
    return torch.cat([b.reshape(nk, -1, b.shape[-1]), a.reshape(nk, -1, a.shape[-1])], dim=1).reshape(
        -1, b.shape[-1]
    )
