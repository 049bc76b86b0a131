"""Chunked gated delta rule, forward, in Triton (same contract as kernels/reference/delta_rule.py).

Three launches over a packed token axis (varlen sequences or N equal rows, same code):
1. `_prep`   per (chunk, value head): inclusive cumulative log decay G, the UT transform
             T = (I + A)^-1 with A_jl = beta_j exp(G_j - G_l) k_j.k_l (l < j) by forward
             substitution in registers, then w = T (beta exp(G) k) and u0 = T (beta v).
2. `_state`  per (sequence, value head, dv tile): the only sequential part. S stays in registers
             (fp32); per chunk it stores S (the chunk's start state), u = u0 - w S, and advances
             S <- exp(G_C) S + (exp(G_C - G) k)^T u.
3. `_output` per (chunk, value head, dv tile): o = exp(G) (q S) + (causal exp(G_i - G_j) q k^T) u.
GVA: value head h reads key head h // (H // Hk); q and k are never expanded in memory.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from clover.kernels.triton._common import pow2

STATE_BV = 32  # N * H * dv / 32 programs: 128 for one 35B-shaped sequence on a 132-SM H200
STATE_STAGES = 2  # 3 stages would need ~197 KB of shared memory at dk = dv = 128 (A100 has 163 KB)


@triton.jit
def _prep(
    k_ptr,
    v_ptr,
    g_ptr,
    beta_ptr,
    cu_ptr,
    cidx_ptr,
    w_ptr,
    u_ptr,
    gc_ptr,
    H: tl.constexpr,
    HK: tl.constexpr,
    DK: tl.constexpr,
    DV: tl.constexpr,
    C: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    ic, h = tl.program_id(0), tl.program_id(1)
    seq, cj = tl.load(cidx_ptr + ic * 2), tl.load(cidx_ptr + ic * 2 + 1)
    eos = tl.load(cu_ptr + seq + 1)
    t0 = tl.load(cu_ptr + seq) + cj * C
    rt = tl.arange(0, BC)
    tok = (t0 + rt).to(tl.int64)
    valid = (rt < C) & (t0 + rt < eos)
    hk = h // (H // HK)
    rk = tl.arange(0, BK)
    kb = tl.load(
        k_ptr + tok[:, None] * (HK * DK) + hk * DK + rk[None, :],
        mask=valid[:, None] & (rk[None, :] < DK),
        other=0.0,
    ).to(tl.float32)
    gg = tl.load(g_ptr + tok * H + h, mask=valid, other=0.0).to(tl.float32)
    bb = tl.load(beta_ptr + tok * H + h, mask=valid, other=0.0).to(tl.float32)
    G = tl.cumsum(gg, 0)
    tl.store(gc_ptr + tok * H + h, G, mask=valid)

    strict = rt[:, None] > rt[None, :]
    decay = tl.exp(tl.where(strict, G[:, None] - G[None, :], 0.0))
    a = tl.where(strict, bb[:, None] * decay * tl.dot(kb, tl.trans(kb)), 0.0)
    # T = (I + A)^-1, A strictly lower: row i of T is e_i - sum_{l<i} A_il T_l
    tm = tl.where(rt[:, None] == rt[None, :], 1.0, 0.0)
    for i in range(1, BC):
        a_row = tl.sum(tl.where(rt[:, None] == i, a, 0.0), 0)
        tm = tl.where(rt[:, None] == i, tm - tl.sum(a_row[:, None] * tm, 0)[None, :], tm)

    w = tl.dot(tm, kb * (bb * tl.exp(G))[:, None])
    tl.store(
        w_ptr + tok[:, None] * (H * DK) + h * DK + rk[None, :], w, mask=valid[:, None] & (rk[None, :] < DK)
    )
    rv = tl.arange(0, BV)
    for v0 in range(0, DV, BV):
        cols = v0 + rv
        m2 = valid[:, None] & (cols[None, :] < DV)
        vb = tl.load(v_ptr + tok[:, None] * (H * DV) + h * DV + cols[None, :], mask=m2, other=0.0)
        u0 = tl.dot(tm, vb.to(tl.float32) * bb[:, None])
        tl.store(u_ptr + tok[:, None] * (H * DV) + h * DV + cols[None, :], u0, mask=m2)


@triton.jit
def _state(
    k_ptr,
    w_ptr,
    u_ptr,
    gc_ptr,
    h0_ptr,
    ht_ptr,
    hs_ptr,
    cu_ptr,
    coff_ptr,
    H: tl.constexpr,
    HK: tl.constexpr,
    DK: tl.constexpr,
    DV: tl.constexpr,
    C: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    HAS_H0: tl.constexpr,
):
    seq, h, iv = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    bos, eos = tl.load(cu_ptr + seq), tl.load(cu_ptr + seq + 1)
    coff = tl.load(coff_ptr + seq)
    hk = h // (H // HK)
    rt, rk, rv = tl.arange(0, BC), tl.arange(0, BK), iv * BV + tl.arange(0, BV)
    smask = (rk[:, None] < DK) & (rv[None, :] < DV)
    soff = rk[:, None] * DV + rv[None, :]
    base = (seq * H + h).to(tl.int64) * (DK * DV)
    if HAS_H0:
        s = tl.load(h0_ptr + base + soff, mask=smask, other=0.0).to(tl.float32)
    else:
        s = tl.zeros([BK, BV], dtype=tl.float32)
    for cj in range(0, tl.cdiv(eos - bos, C)):
        t0 = bos + cj * C
        tl.store(hs_ptr + ((coff + cj).to(tl.int64) * H + h) * (DK * DV) + soff, s, mask=smask)
        tok = (t0 + rt).to(tl.int64)
        valid = (rt < C) & (t0 + rt < eos)
        kmask = valid[:, None] & (rk[None, :] < DK)
        umask = valid[:, None] & (rv[None, :] < DV)
        w = tl.load(w_ptr + tok[:, None] * (H * DK) + h * DK + rk[None, :], mask=kmask, other=0.0)
        uoff = tok[:, None] * (H * DV) + h * DV + rv[None, :]
        u = tl.load(u_ptr + uoff, mask=umask, other=0.0) - tl.dot(w, s)
        tl.store(u_ptr + uoff, u, mask=umask)
        G = tl.load(gc_ptr + tok * H + h, mask=valid, other=0.0)
        g_last = tl.load(gc_ptr + (tl.minimum(t0 + C, eos) - 1).to(tl.int64) * H + h)
        kb = tl.load(k_ptr + tok[:, None] * (HK * DK) + hk * DK + rk[None, :], mask=kmask, other=0.0)
        kd = tl.where(kmask, kb.to(tl.float32) * tl.exp(g_last - G)[:, None], 0.0)
        s = s * tl.exp(g_last) + tl.dot(tl.trans(kd), u)
    tl.store(ht_ptr + base + soff, s, mask=smask)


@triton.jit
def _output(
    q_ptr,
    k_ptr,
    u_ptr,
    gc_ptr,
    hs_ptr,
    o_ptr,
    cu_ptr,
    cidx_ptr,
    H: tl.constexpr,
    HK: tl.constexpr,
    DK: tl.constexpr,
    DV: tl.constexpr,
    C: tl.constexpr,
    BC: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    ic, h, iv = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    seq, cj = tl.load(cidx_ptr + ic * 2), tl.load(cidx_ptr + ic * 2 + 1)
    eos = tl.load(cu_ptr + seq + 1)
    t0 = tl.load(cu_ptr + seq) + cj * C
    hk = h // (H // HK)
    rt, rk, rv = tl.arange(0, BC), tl.arange(0, BK), iv * BV + tl.arange(0, BV)
    tok = (t0 + rt).to(tl.int64)
    valid = (rt < C) & (t0 + rt < eos)
    kmask = valid[:, None] & (rk[None, :] < DK)
    umask = valid[:, None] & (rv[None, :] < DV)
    qb = tl.load(q_ptr + tok[:, None] * (HK * DK) + hk * DK + rk[None, :], mask=kmask, other=0.0)
    kb = tl.load(k_ptr + tok[:, None] * (HK * DK) + hk * DK + rk[None, :], mask=kmask, other=0.0)
    qb, kb = qb.to(tl.float32), kb.to(tl.float32)
    G = tl.load(gc_ptr + tok * H + h, mask=valid, other=0.0)
    s = tl.load(
        hs_ptr + (ic.to(tl.int64) * H + h) * (DK * DV) + rk[:, None] * DV + rv[None, :],
        mask=(rk[:, None] < DK) & (rv[None, :] < DV),
        other=0.0,
    )
    u = tl.load(u_ptr + tok[:, None] * (H * DV) + h * DV + rv[None, :], mask=umask, other=0.0)
    causal = (rt[:, None] >= rt[None, :]) & valid[:, None]  # rows past the end would overflow exp
    qk = tl.where(
        causal, tl.dot(qb, tl.trans(kb)) * tl.exp(tl.where(causal, G[:, None] - G[None, :], 0.0)), 0.0
    )
    o = tl.dot(qb * tl.exp(G)[:, None], s) + tl.dot(qk, u)
    tl.store(o_ptr + tok[:, None] * (H * DV) + h * DV + rv[None, :], o.to(o_ptr.dtype.element_ty), mask=umask)


def chunk_gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    g: Tensor,
    beta: Tensor,
    initial_state: Tensor | None = None,
    chunk_size: int = 64,
    return_chunk_states: bool = False,
    states_every: int | None = None,
    cu_seqlens: Tensor | None = None,
) -> tuple[Tensor, Tensor] | tuple[Tensor, Tensor, Tensor]:
    """Same arguments and results as the torch reference. With `cu_seqlens` ([S+1] int, N must be 1)
    the S sequences packed along T run independently: initial_state and the final state are
    [S, H, dk, dv] and the chunk start states [total chunks, H, dk, dv] (each sequence's chunks in
    order; a sequence of length L has ceil(L / chunk_size)). `states_every` = E: the kernel runs
    with chunks of E tokens, so the start states come every E tokens (same results)."""
    if states_every is not None:
        if chunk_size % states_every:
            raise ValueError(f"states_every={states_every} must divide chunk_size={chunk_size}")
        chunk_size = states_every
    n, t, h, dv = v.shape
    hk, dk = k.shape[2], k.shape[3]
    if h % hk:
        raise ValueError(f"value heads ({h}) must be a multiple of key heads ({hk})")
    c = int(chunk_size)
    dev = v.device
    cu, cidx, coff, nseq, nchunks = _chunk_table(n, t, c, cu_seqlens, dev)
    qf, kf, vf = (x.reshape(n * t, x.shape[2], x.shape[3]).contiguous() for x in (q, k, v))
    gf, bf = (x.reshape(n * t, h).contiguous() for x in (g, beta))
    tot = n * t
    w = torch.empty(tot, h, dk, device=dev, dtype=torch.float32)
    u = torch.empty(tot, h, dv, device=dev, dtype=torch.float32)
    gc = torch.empty(tot, h, device=dev, dtype=torch.float32)
    hs = torch.empty(nchunks, h, dk, dv, device=dev, dtype=torch.float32)
    ht = torch.empty(nseq, h, dk, dv, device=dev, dtype=torch.float32)
    o = torch.empty(tot, h, dv, device=dev, dtype=v.dtype)
    h0 = initial_state.float().contiguous() if initial_state is not None else ht
    bc, bk, bv = pow2(c), pow2(dk), min(pow2(dv), 64)
    meta = dict(H=h, HK=hk, DK=dk, DV=dv, C=c, BC=bc, BK=bk)
    if nchunks:
        _prep[(nchunks, h)](kf, vf, gf, bf, cu, cidx, w, u, gc, BV=bv, **meta)
        bvs = min(bv, STATE_BV)  # the sequential pass: more, narrower programs fill the SMs
        _state[(nseq, h, triton.cdiv(dv, bvs))](
            kf,
            w,
            u,
            gc,
            h0,
            ht,
            hs,
            cu,
            coff,
            BV=bvs,
            HAS_H0=initial_state is not None,
            num_stages=STATE_STAGES,
            **meta,
        )
        _output[(nchunks, h, triton.cdiv(dv, bv))](qf, kf, u, gc, hs, o, cu, cidx, BV=bv, **meta)
    elif initial_state is not None:
        ht.copy_(h0)
    else:
        ht.zero_()
    o = o.view(n, t, h, dv)
    if not return_chunk_states:
        return o, ht
    starts = hs if cu_seqlens is not None else hs.view(n, nchunks // max(n, 1), h, dk, dv)
    return o, ht, starts


def _chunk_table(
    n: int, t: int, c: int, cu_seqlens: Tensor | None, dev: torch.device
) -> tuple[Tensor, Tensor, Tensor, int, int]:
    """Where the kernels' chunks lie: the sequences' bounds along the packed T (`cu`, [S+1]), each
    chunk's (sequence, chunk in it) (`cidx`, [chunks, 2]), each sequence's first chunk (`coff`),
    and the counts of sequences and chunks. Without `cu_seqlens` the N rows are the sequences."""
    if cu_seqlens is None:
        lens = [t] * n
        cu = torch.arange(n + 1, device=dev, dtype=torch.int32) * t
    else:
        if n != 1:
            raise ValueError("cu_seqlens needs packed inputs with N = 1")
        cu = cu_seqlens.to(device=dev, dtype=torch.int32)
        bounds = cu.tolist()
        lens = [b - a for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    per = [-(-length // c) for length in lens]
    cidx = torch.tensor([(s, j) for s, p in enumerate(per) for j in range(p)], dtype=torch.int32).reshape(
        -1, 2
    )
    coff = torch.tensor([0] + per[:-1], dtype=torch.int32).cumsum(0, dtype=torch.int32)
    return cu, cidx.to(dev), coff.to(dev), len(lens), sum(per)
