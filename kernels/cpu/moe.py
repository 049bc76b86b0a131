"""The routed experts of one MoE layer for a few tokens, in one call (numba): the tokens grouped by
expert, every (expert, block of rows) of gate_up as one task, SwiGLU, then every (expert, block) of
down, and the weighted sum per token. Weights in the row-block int4 layout of kernels/cpu/int4.py,
stacked per expert: gate_up data [E, 2I/R, H/2, R], down data [E, H/R, I/2, R] (and their sm).
Against torch's int4 kernel called twice per expert from Python (model/quantized.py's general path)
this removes ~16 calls and the sort / gather / scatter around them per layer and token."""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange
from torch import Tensor

from clover.kernels.cpu import torch_threads
from clover.kernels.cpu.int4 import block_dot, group_sums, numpy_of

MAX_TOKENS = 32  # more (a prefill) and the general path's dequantize-then-matmul is the better one


@njit(parallel=True, fastmath=True, cache=True)
def _moe(x, ids, weights, gu_data, gu_sm, dn_data, dn_sm, out):
    """x [T, H], weights [T, k] float32; ids [T, k] int64; out [T, H] written."""
    tokens, top = ids.shape
    slots = tokens * top
    flat = ids.reshape(-1)
    order = np.argsort(flat, kind="mergesort")
    # segments: runs of one expert in the sorted slots
    seg_expert = np.empty(slots, np.int64)
    seg_start = np.empty(slots + 1, np.int64)
    segs = 0
    for i in range(slots):
        if i == 0 or flat[order[i]] != flat[order[i - 1]]:
            seg_expert[segs] = flat[order[i]]
            seg_start[segs] = i
            segs += 1
    seg_start[segs] = slots
    hidden = x.shape[1]
    xs = np.empty((slots, hidden), np.float32)
    for i in range(slots):
        xs[i] = x[order[i] // top]
    gu_blocks, _, gu_r = gu_data.shape[1], gu_data.shape[2], gu_data.shape[3]
    inter = gu_blocks * gu_r // 2
    xsum = group_sums(xs, gu_sm.shape[2])
    h = np.empty((slots, 2 * inter), np.float32)
    for task in prange(segs * gu_blocks):
        s, blk = task // gu_blocks, task % gu_blocks
        a, b, e = seg_start[s], seg_start[s + 1], seg_expert[s]
        part = np.empty((b - a, gu_r), np.float32)
        scale = np.empty(gu_sm.shape[2] * 2 * gu_r, np.float32)
        block_dot(gu_data[e], gu_sm[e], blk, xs[a:b], xsum[a:b], part, scale)
        h[a:b, blk * gu_r : (blk + 1) * gu_r] = part
    act = np.empty((slots, inter), np.float32)
    for i in range(slots):
        for j in range(inter):
            g = h[i, j]
            act[i, j] = g / (np.float32(1.0) + np.exp(-g)) * h[i, inter + j]
    asum = group_sums(act, dn_sm.shape[2])
    dn_blocks, dn_r = dn_data.shape[1], dn_data.shape[3]
    y = np.empty((slots, hidden), np.float32)
    for task in prange(segs * dn_blocks):
        s, blk = task // dn_blocks, task % dn_blocks
        a, b, e = seg_start[s], seg_start[s + 1], seg_expert[s]
        part = np.empty((b - a, dn_r), np.float32)
        scale = np.empty(dn_sm.shape[2] * 2 * dn_r, np.float32)
        block_dot(dn_data[e], dn_sm[e], blk, act[a:b], asum[a:b], part, scale)
        y[a:b, blk * dn_r : (blk + 1) * dn_r] = part
    out[:, :] = 0
    for i in range(slots):
        t = order[i] // top
        w = weights[t, order[i] % top]
        for j in range(hidden):
            out[t, j] += w * y[i, j]


def routed_moe(x: Tensor, ids: Tensor, weights: Tensor, gate_up, down) -> Tensor:
    """x [T, H]; ids, weights [T, k]; gate_up / down: PackedWeight stacks of kind "int4r".
    Returns [T, H] in x's dtype."""
    xf = x.float().contiguous().numpy()
    out = np.empty_like(xf)
    with torch_threads():
        _moe(
            xf,
            ids.to(torch.int64).contiguous().numpy(),
            weights.float().contiguous().numpy(),
            gate_up.data.numpy(),
            numpy_of(gate_up.scale),
            down.data.numpy(),
            numpy_of(down.scale),
            out,
        )
    return torch.from_numpy(out).to(x.dtype)
