"""GDN block mode in one Triton kernel (same contract as kernels/reference/block_gdn.py).

One program per (block, value head, dv tile): it loads the block's q, k (B x dk) and the committed
state tile S (dk x BV), forms the B x B scores and the memory unit's logit m + c ln B in registers,
takes one softmax over {mem, block} and writes only o. Nothing of size [B, B] touches memory.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from clover.kernels.triton._common import dot_f32, pow2


@triton.jit
def _block_gdn(
    q_ptr,
    k_ptr,
    v_ptr,
    s_ptr,
    tau_ptr,
    mem_ptr,
    cal_ptr,
    o_ptr,
    ln_b,
    q_scale,
    H: tl.constexpr,
    B: tl.constexpr,
    DK: tl.constexpr,
    DV: tl.constexpr,
    BB: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    F32: tl.constexpr,
):
    blk, h, iv = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    ri, rk, rv = tl.arange(0, BB), tl.arange(0, BK), iv * BV + tl.arange(0, BV)
    rows = blk.to(tl.int64) * B + ri  # token index in the flattened [blocks * B] axis
    rmask = ri < B
    kmask = rmask[:, None] & (rk[None, :] < DK)
    vmask = rmask[:, None] & (rv[None, :] < DV)
    qb = tl.load(q_ptr + rows[:, None] * (H * DK) + h * DK + rk[None, :], mask=kmask, other=0.0).to(
        tl.float32
    )
    kb = tl.load(k_ptr + rows[:, None] * (H * DK) + h * DK + rk[None, :], mask=kmask, other=0.0).to(
        tl.float32
    )
    vb = tl.load(v_ptr + rows[:, None] * (H * DV) + h * DV + rv[None, :], mask=vmask, other=0.0)
    st = tl.load(
        s_ptr + (blk.to(tl.int64) * H + h) * (DK * DV) + rk[:, None] * DV + rv[None, :],
        mask=(rk[:, None] < DK) & (rv[None, :] < DV),
        other=0.0,
    ).to(tl.float32)
    scale = tl.exp(tl.load(tau_ptr + h).to(tl.float32))
    mem = tl.load(mem_ptr + h).to(tl.float32) + tl.load(cal_ptr + h).to(tl.float32) * ln_b
    s = tl.where(ri[None, :] < B, tl.dot(qb, tl.trans(kb)) * scale, float("-inf"))
    mx = tl.maximum(tl.max(s, 1), mem)
    p = tl.exp(s - mx[:, None])
    p_mem = tl.exp(mem - mx)
    den = tl.sum(p, 1) + p_mem
    readout = tl.dot(qb * q_scale, st)
    if F32:
        pv = tl.dot(p, vb.to(tl.float32))
    else:
        pv = tl.dot(p.to(vb.dtype), vb)
    o = (p_mem[:, None] * readout + pv) / den[:, None]
    tl.store(
        o_ptr + rows[:, None] * (H * DV) + h * DV + rv[None, :], o.to(o_ptr.dtype.element_ty), mask=vmask
    )


def block_gdn_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    state: Tensor,
    block_logit_scale: Tensor,
    memory_logit: Tensor,
    block_size_calibration: Tensor,
) -> Tensor:
    """q, k [N, nb, B, H, dk]; v [N, nb, B, H, dv]; state [N, nb, H, dk, dv]; parameters [H].
    Returns o [N, nb, B, H, dv] in v's dtype (softmax and readout in fp32)."""
    n, nb, b, h, dk = q.shape
    dv = v.shape[-1]
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    state = state.contiguous()
    params = [
        p.detach().float().contiguous() for p in (block_logit_scale, memory_logit, block_size_calibration)
    ]
    o = torch.empty(n, nb, b, h, dv, device=v.device, dtype=v.dtype)
    if o.numel() == 0:
        return o
    bv = min(pow2(dv), 64)
    _block_gdn[(n * nb, h, triton.cdiv(dv, bv))](
        q,
        k,
        v,
        state,
        *params,
        o,
        math.log(b),
        dk**-0.5,
        H=h,
        B=b,
        DK=dk,
        DV=dv,
        BB=pow2(b),
        BK=pow2(dk),
        BV=bv,
        F32=dot_f32(v),
    )
    return o
