"""The routed experts of one MoE layer for a few tokens, in one call (numba): the tokens grouped by
expert, every (expert, block of rows) of gate_up as one task, SwiGLU, then every (expert, block) of
down, and the weighted sum per token. Weights in the row-block int4 layout of kernels/cpu/int4.py,
stacked per expert: gate_up data [E, 2I/R, H/2, R], down data [E, H/R, I/2, R] (and their sm).
Against torch's int4 kernel called twice per expert from Python (model/loading/quantized.py's general path)
this removes ~16 calls and the sort / gather / scatter around them per layer and token. Stacks in
kernels/cpu/native.py's integer-dot layout ("int4v") run the same steps on that kernel
(`_native_moe`): the activations quantized to int8 once per token, then the products per (expert,
run of row blocks)."""

from __future__ import annotations

import functools

import numpy as np
import torch
from numba import njit, prange
from torch import Tensor

from clover.kernels.cpu import torch_threads
from clover.kernels.cpu.int4 import block_dot, group_sums, numpy_of

MAX_TOKENS = 32  # more (a prefill) and the general path's dequantize-then-matmul is the better one


@njit(inline="always")
def _bf16(v):
    """v rounded to the nearest bf16 (ties to even), as float32: what a bf16 model's tensor holds."""
    box = np.empty(1, np.float32)
    box[0] = v
    bits = box.view(np.uint32)
    b = np.int64(bits[0])
    bits[0] = np.uint32((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000)
    return box[0]


@njit(inline="always", fastmath=True)
def _route(x, gate_bits, ids, weights, renorm, to_bf16):
    """The router of SparseMoE (model/layers/moe.py) in place of its torch ops: logits x @ gate.T
    (gate bf16 bits [E, H]), softmax, top k, renormalised; rounded to bf16 where the model's
    tensors would be. Writes ids, weights [T, k]."""
    tokens, hidden = x.shape
    experts, top = gate_bits.shape[0], ids.shape[1]
    logits = np.empty((tokens, experts), np.float32)
    for e in prange(experts):
        bits = np.empty(hidden, np.uint32)
        row = bits.view(np.float32)
        for i in range(hidden):
            bits[i] = np.uint32(gate_bits[e, i]) << 16
        for t in range(tokens):
            acc = np.float32(0.0)
            for i in range(hidden):
                acc += row[i] * x[t, i]
            logits[t, e] = _bf16(acc) if to_bf16 else acc
    for t in range(tokens):
        probs = np.exp(logits[t] - logits[t].max())
        probs /= probs.sum()
        best = np.argsort(-probs, kind="mergesort")[:top]
        total = np.float32(0.0)
        for j in range(top):
            total += probs[best[j]]
        for j in range(top):
            w = probs[best[j]] / total if renorm else probs[best[j]]
            ids[t, j] = best[j]
            weights[t, j] = _bf16(w) if to_bf16 else w


@njit(inline="always")
def _segments(ids):
    """The (token, k) slots sorted by expert, and the runs of one expert in them: (order,
    seg_expert, seg_start, segs); run s is slots seg_start[s]..seg_start[s + 1] of expert seg_expert[s]."""
    slots = ids.size
    flat = ids.reshape(-1)
    order = np.argsort(flat, kind="mergesort")
    seg_expert = np.empty(slots, np.int64)
    seg_start = np.empty(slots + 1, np.int64)
    segs = 0
    for i in range(slots):
        if i == 0 or flat[order[i]] != flat[order[i - 1]]:
            seg_expert[segs] = flat[order[i]]
            seg_start[segs] = i
            segs += 1
    seg_start[segs] = slots
    return order, seg_expert, seg_start, segs


@njit(inline="always", fastmath=True)
def _swiglu(h):
    """h [S, 2I] (gate | up) -> silu(gate) * up [S, I]."""
    slots, inter = h.shape[0], h.shape[1] // 2
    act = np.empty((slots, inter), np.float32)
    for i in range(slots):
        for j in range(inter):
            g = h[i, j]
            act[i, j] = g / (np.float32(1.0) + np.exp(-g)) * h[i, inter + j]
    return act


@njit(inline="always")
def _combine(y, order, weights, out):
    """out [T, H] = each token's experts' outputs y [S, H] (sorted slots) times its routing weights."""
    top = weights.shape[1]
    out[:, :] = 0
    for i in range(y.shape[0]):
        t = order[i] // top
        w = weights[t, order[i] % top]
        for j in range(y.shape[1]):
            out[t, j] += w * y[i, j]


@functools.cache
def _native_moe():
    """`_moe` on the integer-dot kernel (kernels/cpu/native.py), compiled on first use (it calls the
    C library built in this process)."""
    from clover.kernels.cpu import native

    quantize, _, rows = native.kernels()
    chunk = native.TASK_BLOCKS

    @njit(parallel=True, fastmath=True)
    def run(x, ids, weights, route, gate_bits, renorm, to_bf16, gu, dn, sm_f32, sh, sh_on, out):
        """gu, dn: (data, sm, group) of the stacks [E, N/16, K/8, 16, 4] / [E, N/16, K/G, 2, 16]; sh:
        the shared expert (gate_up data, sm, down data, sm: stacks of one; its gate float32 [H]),
        added to `out` with weight sigmoid(gate . x) where `sh_on`."""
        if route:
            _route(x, gate_bits, ids, weights, renorm, to_bf16)
        top = ids.shape[1]
        order, seg_expert, seg_start, segs = _segments(ids)
        xq_t, dx_t, xs_t = quantize(x, gu[2])
        rows_of = order // top
        xq, dx, xs = xq_t[rows_of], dx_t[rows_of], xs_t[rows_of]
        h = np.empty((order.size, gu[0].shape[1] * 16), np.float32)
        hs = np.empty((x.shape[0], sh[0].shape[1] * 16), np.float32)
        per, per_sh = (gu[0].shape[1] + chunk - 1) // chunk, (sh[0].shape[1] + chunk - 1) // chunk
        for task in prange(segs * per + (per_sh if sh_on else 0)):
            if task < segs * per:
                s, c = task // per, task % per
                a, b, e = seg_start[s], seg_start[s + 1], seg_expert[s]
                hi = min(gu[0].shape[1], (c + 1) * chunk)
                rows(gu[0][e], gu[1][e], sm_f32, gu[2], xq[a:b], dx[a:b], xs[a:b], h[a:b], c * chunk, hi)
            else:
                c = task - segs * per
                hi = min(sh[0].shape[1], (c + 1) * chunk)
                rows(sh[0][0], sh[1][0], sm_f32, gu[2], xq_t, dx_t, xs_t, hs, c * chunk, hi)
        aq, adx, axs = quantize(_swiglu(h), dn[2])
        sq, sdx, sxs = quantize(_swiglu(hs), dn[2])
        y = np.empty((order.size, dn[0].shape[1] * 16), np.float32)
        ys = np.empty((x.shape[0], sh[2].shape[1] * 16), np.float32)
        per, per_sh = (dn[0].shape[1] + chunk - 1) // chunk, (sh[2].shape[1] + chunk - 1) // chunk
        for task in prange(segs * per + (per_sh if sh_on else 0)):
            if task < segs * per:
                s, c = task // per, task % per
                a, b, e = seg_start[s], seg_start[s + 1], seg_expert[s]
                hi = min(dn[0].shape[1], (c + 1) * chunk)
                rows(dn[0][e], dn[1][e], sm_f32, dn[2], aq[a:b], adx[a:b], axs[a:b], y[a:b], c * chunk, hi)
            else:
                c = task - segs * per
                hi = min(sh[2].shape[1], (c + 1) * chunk)
                rows(sh[2][0], sh[3][0], sm_f32, dn[2], sq, sdx, sxs, ys, c * chunk, hi)
        _combine(y, order, weights, out)
        if sh_on:
            for t in range(x.shape[0]):
                g = np.float32(0.0)
                for j in range(x.shape[1]):
                    g += sh[4][j] * x[t, j]
                g = np.float32(1.0) / (np.float32(1.0) + np.exp(-g))
                for j in range(x.shape[1]):
                    out[t, j] += g * ys[t, j]

    return run


@njit(parallel=True, fastmath=True, cache=True)
def _moe(x, ids, weights, route, gate_bits, renorm, to_bf16, gu_data, gu_sm, dn_data, dn_sm, out):
    """x [T, H], weights [T, k] float32; ids [T, k] int64; out [T, H] written. With `route`, ids and
    weights are first computed here from the router's weights (`_route`)."""
    if route:
        _route(x, gate_bits, ids, weights, renorm, to_bf16)
    tokens, top = ids.shape
    slots = tokens * top
    order, seg_expert, seg_start, segs = _segments(ids)
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
    act = _swiglu(h)
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
    _combine(y, order, weights, out)


_NO_GATE = np.zeros((1, 1), np.uint16)


def routed_moe(x: Tensor, ids: Tensor, weights: Tensor, gate_up, down) -> Tensor:
    """x [T, H]; ids, weights [T, k]; gate_up / down: PackedWeight stacks of kind "int4r" or "int4v".
    Returns [T, H] in x's dtype."""
    return _run(
        x,
        ids.to(torch.int64).contiguous().numpy(),
        weights.float().contiguous().numpy(),
        None,
        True,
        gate_up,
        down,
    )


def route_and_run(x: Tensor, gate: Tensor, top: int, renorm: bool, gate_up, down, shared=None) -> Tensor:
    """The router (gate bf16 [E, H]: softmax, top `top`, renormalised when `renorm`) and the routed
    experts in one call, and on int4v stacks the shared expert too where `shared` is given
    ((gate_up, down) PackedWeight stacks of one, its gate float32 [H]). Returns [T, H] in x's dtype."""
    ids = np.empty((x.shape[0], top), np.int64)
    weights = np.empty((x.shape[0], top), np.float32)
    bits = gate.view(torch.int16).numpy().view(np.uint16)
    return _run(x, ids, weights, bits, renorm, gate_up, down, shared)


def _shared_arrays(shared) -> tuple:
    """The shared expert ((gate_up, down, gate) of `route_and_run`) as the native call takes it."""
    from clover.kernels.cpu.native import sm_numpy

    gu, dn, gate = shared
    return (gu.data.numpy(), sm_numpy(gu.scale), dn.data.numpy(), sm_numpy(dn.scale), gate.numpy())


def _no_shared(gu: tuple, dn: tuple) -> tuple:
    """Arrays of the right types and no rows, for a layer without a fused shared expert."""
    empty = lambda a: a[:1, :0]  # noqa: E731
    return (empty(gu[0]), empty(gu[1]), empty(dn[0]), empty(dn[1]), np.zeros(0, np.float32))


def _run(
    x: Tensor, ids: np.ndarray, weights: np.ndarray, gate_bits, renorm: bool, gate_up, down, shared=None
) -> Tensor:
    xf = x.float().contiguous().numpy()
    out = np.empty_like(xf)
    route = gate_bits is not None
    with torch_threads():
        if gate_up.kind == "int4v":
            from clover.kernels.cpu.native import sm_numpy

            gu = (gate_up.data.numpy(), sm_numpy(gate_up.scale), gate_up.group_size)
            dn = (down.data.numpy(), sm_numpy(down.scale), down.group_size)
            sm_f32 = int(gate_up.scale.dtype == torch.float32)
            gate = gate_bits if route else _NO_GATE
            sh_on = shared is not None
            sh = _shared_arrays(shared) if sh_on else _no_shared(gu, dn)
            _native_moe()(
                xf,
                ids,
                weights,
                route,
                gate,
                renorm,
                x.dtype == torch.bfloat16,
                gu,
                dn,
                sm_f32,
                sh,
                sh_on,
                out,
            )
            return torch.from_numpy(out).to(x.dtype)
        _moe(
            xf,
            ids,
            weights,
            route,
            gate_bits if route else _NO_GATE,
            renorm,
            x.dtype == torch.bfloat16,
            gate_up.data.numpy(),
            numpy_of(gate_up.scale),
            down.data.numpy(),
            numpy_of(down.scale),
            out,
        )
    return torch.from_numpy(out).to(x.dtype)
