"""Fused routed experts in Triton (contract of kernels/reference/moe.py), plus the same computation on
`torch._grouped_mm` for comparison.

1. Align (torch, on the device, no host sync): the T*k (token, expert) slots are sorted by expert and
   each expert's run padded to a multiple of BM; every BM-row block then belongs to one expert.
2. `_gate_up`: per (block, I tile) the gate and up tiles of x @ gate_up[e]^T, fused silu(gate) * up.
3. `_down`: per (block, H tile) act @ down[e]^T, times the slot's routing weight, written to the
   slot's row; the k rows of a token are summed in torch (deterministic, no atomics).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import Tensor

from clover.kernels.triton._common import dot_f32, interpreting


def align(topk_ids: Tensor, num_experts: int, bm: int) -> tuple[Tensor, Tensor, Tensor]:
    """-> sorted slot ids padded per expert (sentinel T*k) [L], expert of each BM block [L/BM], and
    the padded length actually used [1]. L is the worst case, so nothing is read back to the host."""
    flat = topk_ids.reshape(-1)
    s = flat.numel()
    counts = torch.bincount(flat, minlength=num_experts)
    padded = (counts + bm - 1) // bm * bm
    ends = padded.cumsum(0)
    order = flat.argsort(stable=True)
    e_sorted = flat[order]
    rank = torch.arange(s, device=flat.device) - (counts.cumsum(0) - counts)[e_sorted]
    length = triton.cdiv(s + min(num_experts, s) * (bm - 1), bm) * bm
    ids = torch.full((length,), s, dtype=torch.int32, device=flat.device)
    ids[(ends - padded)[e_sorted] + rank] = order.to(torch.int32)
    starts = torch.arange(0, length, bm, device=flat.device)
    block_expert = torch.searchsorted(ends, starts, right=True).clamp_(max=num_experts - 1).to(torch.int32)
    return ids, block_expert, ends[-1:].to(torch.int32)


@triton.jit
def _gate_up(
    x_ptr,
    w_ptr,
    act_ptr,
    ids_ptr,
    eid_ptr,
    total_ptr,
    S,
    HID,
    INTER,
    TOPK: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    F32: tl.constexpr,
):
    pm, pn = tl.program_id(0), tl.program_id(1)
    if pm * BM >= tl.load(total_ptr):
        return
    e = tl.load(eid_ptr + pm).to(tl.int64)
    rm = pm * BM + tl.arange(0, BM)
    slot = tl.load(ids_ptr + rm)
    valid = slot < S
    tok = (slot // TOPK).to(tl.int64)
    rn = pn * BN + tl.arange(0, BN)
    nmask = rn < INTER
    rk = tl.arange(0, BK)
    wbase = w_ptr + e * 2 * INTER * HID
    acc_g = tl.zeros([BM, BN], tl.float32)
    acc_u = tl.zeros([BM, BN], tl.float32)
    for k0 in range(0, HID, BK):
        kk = k0 + rk
        kmask = kk < HID
        a = tl.load(x_ptr + tok[:, None] * HID + kk[None, :], mask=valid[:, None] & kmask[None, :], other=0.0)
        wmask = kmask[:, None] & nmask[None, :]
        wg = tl.load(wbase + rn[None, :].to(tl.int64) * HID + kk[:, None], mask=wmask, other=0.0)
        wu = tl.load(wbase + (INTER + rn[None, :]).to(tl.int64) * HID + kk[:, None], mask=wmask, other=0.0)
        if F32:
            a, wg, wu = a.to(tl.float32), wg.to(tl.float32), wu.to(tl.float32)
        acc_g = tl.dot(a, wg, acc_g)
        acc_u = tl.dot(a, wu, acc_u)
    act = acc_g * tl.sigmoid(acc_g) * acc_u
    amask = valid[:, None] & nmask[None, :]
    tl.store(
        act_ptr + rm[:, None].to(tl.int64) * INTER + rn[None, :], act.to(act_ptr.dtype.element_ty), mask=amask
    )


@triton.jit
def _down(
    act_ptr,
    w_ptr,
    out_ptr,
    ids_ptr,
    eid_ptr,
    total_ptr,
    wt_ptr,
    S,
    HID,
    INTER,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    F32: tl.constexpr,
):
    pm, pn = tl.program_id(0), tl.program_id(1)
    if pm * BM >= tl.load(total_ptr):
        return
    e = tl.load(eid_ptr + pm).to(tl.int64)
    rm = pm * BM + tl.arange(0, BM)
    slot = tl.load(ids_ptr + rm)
    valid = slot < S
    rn = pn * BN + tl.arange(0, BN)
    nmask = rn < HID
    rk = tl.arange(0, BK)
    wbase = w_ptr + e * HID * INTER
    acc = tl.zeros([BM, BN], tl.float32)
    for k0 in range(0, INTER, BK):
        kk = k0 + rk
        kmask = kk < INTER
        a = tl.load(
            act_ptr + rm[:, None].to(tl.int64) * INTER + kk[None, :],
            mask=valid[:, None] & kmask[None, :],
            other=0.0,
        )
        wd = tl.load(
            wbase + rn[None, :].to(tl.int64) * INTER + kk[:, None],
            mask=kmask[:, None] & nmask[None, :],
            other=0.0,
        )
        if F32:
            a, wd = a.to(tl.float32), wd.to(tl.float32)
        acc = tl.dot(a, wd, acc)
    acc = acc * tl.load(wt_ptr + slot, mask=valid, other=0.0).to(tl.float32)[:, None]
    omask = valid[:, None] & nmask[None, :]
    tl.store(
        out_ptr + slot[:, None].to(tl.int64) * HID + rn[None, :], acc.to(out_ptr.dtype.element_ty), mask=omask
    )


def _block_m(slots: int, experts: int) -> int:
    per = slots / max(experts, 1)
    return 16 if per <= 8 else (32 if per <= 32 else 64)


def moe_experts(x: Tensor, topk_ids: Tensor, topk_weights: Tensor, gate_up: Tensor, down: Tensor) -> Tensor:
    """x [T, H]; topk_ids, topk_weights [T, k]; gate_up [E, 2I, H]; down [E, H, I]. -> [T, H]."""
    t, k = topk_ids.shape
    e, two_i, hid = gate_up.shape
    inter = two_i // 2
    if t == 0:
        return torch.zeros_like(x)
    s = t * k
    bm = _block_m(s, e)
    ids, block_expert, total = align(topk_ids, e, bm)
    x, gate_up, down = x.contiguous(), gate_up.contiguous(), down.contiguous()
    wts = topk_weights.reshape(-1).contiguous()
    act = torch.empty(ids.numel(), inter, device=x.device, dtype=x.dtype)
    out = torch.empty(s, hid, device=x.device, dtype=x.dtype)
    bn, bk = (64, 64) if not interpreting() else (32, 32)
    f32 = dot_f32(x, gate_up)
    nblocks = block_expert.numel()
    _gate_up[(nblocks, triton.cdiv(inter, bn))](
        x, gate_up, act, ids, block_expert, total, s, hid, inter, TOPK=k, BM=bm, BN=bn, BK=bk, F32=f32
    )
    _down[(nblocks, triton.cdiv(hid, bn))](
        act, down, out, ids, block_expert, total, wts, s, hid, inter, BM=bm, BN=bn, BK=bk, F32=f32
    )
    return out.view(t, k, hid).sum(1, dtype=torch.float32).to(x.dtype)


def moe_experts_grouped_mm(
    x: Tensor, topk_ids: Tensor, topk_weights: Tensor, gate_up: Tensor, down: Tensor
) -> Tensor:
    """The same op on torch._grouped_mm (CUDA, bf16, sm90+): sorted tokens, two grouped GEMMs."""
    t, k = topk_ids.shape
    flat = topk_ids.reshape(-1)
    order = flat.argsort(stable=True)
    token_of = order // k
    offs = torch.bincount(flat, minlength=gate_up.shape[0]).cumsum(0).to(torch.int32)
    xs = x[token_of]
    h = torch._grouped_mm(xs, gate_up.transpose(1, 2), offs=offs)
    gate, up = h.chunk(2, dim=-1)
    ys = torch._grouped_mm((F.silu(gate) * up).contiguous(), down.transpose(1, 2), offs=offs)
    ys = ys * topk_weights.reshape(-1)[order, None].to(ys.dtype)
    return torch.zeros_like(x).index_add_(0, token_of, ys)
