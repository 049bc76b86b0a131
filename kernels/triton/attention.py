"""Block attention for the full-attention layers, in Triton (contract of kernels/reference/attention.py
plus options the decode path wants).

Queries of a block attend over the KV cache and the block itself with an online softmax. GQA: one
program owns BM rows of the flattened (query head in the group, position) axis of one KV head, so
each K/V tile is read once for all the query heads sharing it. Decode shapes have few such programs,
so the key axis is also split (flash-decoding) and the partial results merged in torch.

Options: `k_block`/`v_block` are the block's own K/V, read after the cache (no torch.cat of the
whole cache per layer); `mask` [N or 1, 1, Tq, Tk] bool (True = may attend) or None (all visible:
a decode round sees everything committed plus its whole block); `gate` [N, Tq, Hq*d] fuses the
sigmoid output gate (o * sigmoid(gate), still returned as [N, Hq, Tq, d]).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from clover.kernels.triton._common import dot_f32, interpreting, pow2


# One function: a Triton kernel body is one program; split, it would add launches and hide the tiling.
@triton.jit
def _attn(
    q_ptr,
    k_ptr,
    v_ptr,
    k2_ptr,
    v2_ptr,
    m_ptr,
    g_ptr,
    o_ptr,
    ml_ptr,
    skn,
    skh,
    skt,
    svn,
    svh,
    svt,
    s2kn,
    s2kh,
    s2kt,
    s2vn,
    s2vh,
    s2vt,
    smn,
    smt,
    T1,
    T2,
    TQ,
    NQ,
    split_len,
    scale,
    HQ: tl.constexpr,
    HKV: tl.constexpr,
    D: tl.constexpr,
    BD: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    HAS_MASK: tl.constexpr,
    HAS_K2: tl.constexpr,
    HAS_GATE: tl.constexpr,
    SPLIT: tl.constexpr,
    F32: tl.constexpr,
):
    pid_m, pid_nh, sp = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    grp: tl.constexpr = HQ // HKV
    n, hkv = pid_nh // HKV, pid_nh % HKV
    r = pid_m * BM + tl.arange(0, BM)
    rvalid = r < grp * TQ
    t = r % TQ
    head = hkv * grp + r // TQ
    rd = tl.arange(0, BD)
    dmask = rd[None, :] < D
    qrow = ((n * HQ + head).to(tl.int64) * TQ + t) * D
    q = tl.load(q_ptr + qrow[:, None] + rd[None, :], mask=rvalid[:, None] & dmask, other=0.0)
    if F32:
        q = q.to(tl.float32)
    q = q * scale
    rn = tl.arange(0, BN)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, BD], tl.float32)
    lo = sp * split_len
    hi = tl.minimum(lo + split_len, T1 + T2)
    kbase = n.to(tl.int64) * skn + hkv * skh
    vbase = n.to(tl.int64) * svn + hkv * svh
    for start in range(lo, hi, BN):
        c = start + rn
        in1 = c < T1
        kt = tl.load(k_ptr + kbase + c[:, None] * skt + rd[None, :], mask=in1[:, None] & dmask, other=0.0)
        vt = tl.load(v_ptr + vbase + c[:, None] * svt + rd[None, :], mask=in1[:, None] & dmask, other=0.0)
        if HAS_K2:
            in2 = (c >= T1) & (c < hi)
            c2 = c - T1
            kt += tl.load(
                k2_ptr + n.to(tl.int64) * s2kn + hkv * s2kh + c2[:, None] * s2kt + rd[None, :],
                mask=in2[:, None] & dmask,
                other=0.0,
            )
            vt += tl.load(
                v2_ptr + n.to(tl.int64) * s2vn + hkv * s2vh + c2[:, None] * s2vt + rd[None, :],
                mask=in2[:, None] & dmask,
                other=0.0,
            )
        if F32:
            kt, vt = kt.to(tl.float32), vt.to(tl.float32)
        s = tl.dot(q.to(kt.dtype), tl.trans(kt))
        ok = rvalid[:, None] & (c < hi)[None, :]
        if HAS_MASK:
            mk = tl.load(m_ptr + n.to(tl.int64) * smn + t[:, None] * smt + c[None, :], mask=ok, other=0)
            ok = ok & (mk != 0)
        s = tl.where(ok, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt)
        m_i = m_new
    omask = rvalid[:, None] & dmask
    if SPLIT:  # partial (unnormalised) result of this key range; merged by the caller
        base = sp.to(tl.int64) * NQ * HQ * TQ  # split sp's slice of [splits, N, HQ, TQ, ...]
        tl.store(o_ptr + (base * D + qrow)[:, None] + rd[None, :], acc, mask=omask)
        mrow = base + (n * HQ + head).to(tl.int64) * TQ + t
        tl.store(ml_ptr + mrow * 2, m_i, mask=rvalid)
        tl.store(ml_ptr + mrow * 2 + 1, l_i, mask=rvalid)
    else:
        o = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]  # padding rows: no 0/0
        if HAS_GATE:  # gate [N, TQ, HQ*D]: element (n, t, head*D + d)
            gt = tl.load(
                g_ptr + ((n.to(tl.int64) * TQ + t) * HQ + head)[:, None] * D + rd[None, :],
                mask=omask,
                other=0.0,
            )
            o = o * tl.sigmoid(gt.to(tl.float32))
        tl.store(o_ptr + qrow[:, None] + rd[None, :], o.to(o_ptr.dtype.element_ty), mask=omask)


def _tiles(d: int) -> tuple[int, int, int]:
    """(BM, BN, num_warps) for head dim d; the interpreter prefers few, large programs."""
    if interpreting():
        return 32, 32, 4
    return (64, 32, 8) if d > 128 else (64, 64, 4)


def _splits(programs: int, cols: int, bn: int, partial_per_split: float, kv_bytes: float) -> int:
    """Key-axis splits: enough programs for two waves, at least 4 tiles each, and fp32 partial
    results (written and read back) under half the K/V bytes."""
    if interpreting() or not torch.cuda.is_available():
        return 1
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    by_bytes = int(0.5 * kv_bytes / max(partial_per_split, 1.0))
    return max(1, min(2 * sms // max(programs, 1), triton.cdiv(cols, 4 * bn), by_bytes))


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
    """q [N, Hq, Tq, d]; k, v [N, Hkv, Tk, d] (strided views of a cache are fine); optional k_block,
    v_block [N, Hkv, Tb, d] appended after k. Scale d^-1/2. Returns [N, Hq, Tq, d] in q's dtype."""
    n, hq, tq, d = q.shape
    hkv = k.shape[1]
    if hq % hkv:
        raise ValueError(f"query heads ({hq}) must be a multiple of kv heads ({hkv})")
    k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (k, v))
    k2 = k if k_block is None else (k_block if k_block.stride(-1) == 1 else k_block.contiguous())
    v2 = v if v_block is None else (v_block if v_block.stride(-1) == 1 else v_block.contiguous())
    t1, t2 = k.shape[2], 0 if k_block is None else k_block.shape[2]
    q = q.contiguous()
    bm, bn, warps = _tiles(d)
    grid_m = triton.cdiv((hq // hkv) * tq, bm)
    kv_bytes = 2 * n * hkv * (t1 + t2) * d * k.element_size()
    ns = num_splits or _splits(grid_m * n * hkv, t1 + t2, bn, 2 * n * hq * tq * (d + 2) * 4, kv_bytes)
    split_len = triton.cdiv(triton.cdiv(t1 + t2, ns), bn) * bn
    ns = max(1, triton.cdiv(t1 + t2, split_len))
    smn = smt = 0
    if mask is not None:
        mask, smn, smt = _mask_operand(mask, tq, t1 + t2)
    if gate is not None:
        gate = gate.contiguous()
    out, ml = _outputs(q, ns)
    _attn[(grid_m, n * hkv, ns)](
        q,
        k,
        v,
        k2,
        v2,
        mask if mask is not None else q,
        gate if gate is not None else q,
        out,
        ml,
        k.stride(0),
        k.stride(1),
        k.stride(2),
        v.stride(0),
        v.stride(1),
        v.stride(2),
        k2.stride(0),
        k2.stride(1),
        k2.stride(2),
        v2.stride(0),
        v2.stride(1),
        v2.stride(2),
        smn,
        smt,
        t1,
        t2,
        tq,
        n,
        split_len,
        d**-0.5,
        HQ=hq,
        HKV=hkv,
        D=d,
        BD=pow2(d),
        BM=bm,
        BN=bn,
        HAS_MASK=mask is not None,
        HAS_K2=k_block is not None,
        HAS_GATE=gate is not None,
        SPLIT=ns > 1,
        F32=dot_f32(q, k),
        num_warps=warps,
    )
    return out if ns == 1 else _merge_splits(out, ml, gate, q.dtype)


def _outputs(q: Tensor, splits: int) -> tuple[Tensor, Tensor]:
    """Where the kernel writes: the output itself (and q as an unused running max and sum), or with
    several key splits each split's fp32 partial output and its running max and sum."""
    if splits == 1:
        return torch.empty_like(q), q
    n, hq, tq, d = q.shape
    out = torch.empty(splits, n, hq, tq, d, device=q.device, dtype=torch.float32)
    return out, torch.empty(splits, n, hq, tq, 2, device=q.device, dtype=torch.float32)


def _mask_operand(mask: Tensor, tq: int, cols: int) -> tuple[Tensor, int, int]:
    """The mask as the kernel reads it: [M, 1, tq, cols] bytes with its batch and row strides (a
    batch stride of 0 when one mask serves every sequence), unit stride along the keys."""
    mask = mask.expand(mask.shape[0], 1, tq, cols).view(torch.uint8)
    smn = mask.stride(0) if mask.shape[0] > 1 else 0
    smt = mask.stride(2)
    if mask.stride(3) != 1:
        mask, smn, smt = mask.contiguous(), (tq * cols if mask.shape[0] > 1 else 0), cols
    return mask, smn, smt


def _merge_splits(out: Tensor, ml: Tensor, gate: Tensor | None, dtype: torch.dtype) -> Tensor:
    """The key-axis splits' fp32 partial outputs [S, N, Hq, Tq, d] merged by their running max and
    sum ([..., 0] and [..., 1] of `ml`), then the output gate: [N, Hq, Tq, d] in `dtype`."""
    _, n, hq, tq, d = out.shape
    m, l_ = ml[..., 0], ml[..., 1]
    top = m.max(0).values
    wts = torch.exp(m - top)
    o = (wts[..., None] * out).sum(0) / (wts * l_).sum(0)[..., None]
    if gate is not None:
        o = o * torch.sigmoid(gate.view(n, tq, hq, d).transpose(1, 2).float())
    return o.to(dtype)
