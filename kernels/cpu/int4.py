"""int4 weight-only products on CPU for the routed experts (numba): the layout, one block of rows
times a few rows of x, and the matrix back in float for many rows.

Layout ("row blocks"), made once at load: a matrix [N, K] in blocks of R rows; in each group of G
columns, byte j (j < G/2) of a row holds column j in its low nibble and column G/2 + j in its high
one, and the bytes of a block's R rows for one j are adjacent:
    data  uint8 [N/R, K/2, R]
    sm    [N/R, K/G, 2, R]: scale s and minimum m per row and group, w = q * s + m
          (bf16 bits as int16 for bf16 activations, float32 for float32 ones).
One pass over a block reads its bytes in order with R accumulators; a group's dot product is
s * sum(q x) + m * sum(x). A byte b becomes its two codes as floats without integer ops (which numba
widens to 64 bits): hi = floor(b / 16), lo = b - 16 hi, and lo x + hi y = b x + hi (y - 16 x).

Per matrix this is as fast as torch's `_weight_int4pack_mm_for_cpu` at one row (benchmarks/
cpu_kernels.py); what it buys is one call for a whole MoE layer (kernels/cpu/moe.py) instead of two
kernel calls and their Python per expert.
"""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange
from numba.core import types
from numba.extending import overload
from torch import Tensor

from clover.kernels.cpu import torch_threads

BLOCK_ROWS = (64, 16)  # R: the first that divides N
MANY_ROWS = 8  # from this many rows of x, the matrix is dequantized once and torch multiplies


def block_rows(n: int) -> int:
    return next((r for r in BLOCK_ROWS if n % r == 0), 0)


# ---------------------------------------------------------------------- packing (torch, at load)


def pack_codes(codes: Tensor, group: int) -> Tensor:
    """codes [N, K] in 0..15 (any strides) -> data uint8 [N/R, K/2, R]."""
    n, k = codes.shape
    r, h = block_rows(n), group // 2
    c = codes.to(torch.uint8).reshape(n // r, r, k // group, 2, h)
    byte = c[:, :, :, 0] | (c[:, :, :, 1] << 4)  # [N/R, R, K/G, G/2]
    return byte.permute(0, 2, 3, 1).reshape(n // r, k // 2, r).contiguous()


def pack_kwords(kwords: Tensor, group: int) -> Tensor:
    """The same bytes from GPTQ's words (int32 [K/8, N], nibble j of word i = column 8i + j of a row),
    a nibble plane at a time: column 8i + j's partner 8i + j + G/2 is nibble j too."""
    k8, n = kwords.shape
    r, h8 = block_rows(n), group // 16
    kw = kwords.contiguous().view(k8 // (2 * h8), 2, h8, n)  # [K/G, lo|hi, G/16, N]
    out = torch.empty(k8 // (2 * h8), h8, 8, n, dtype=torch.uint8)
    for j in range(8):
        plane = torch.bitwise_and(torch.bitwise_right_shift(kw, 4 * j), 15).to(torch.uint8)
        out[:, :, j] = plane[:, 0] | (plane[:, 1] << 4)
    return out.view(-1, n // r, r).permute(1, 0, 2).contiguous()  # [K/2, N] -> [N/R, K/2, R]


def pack_scales(scales: Tensor, zeros: Tensor, dtype: torch.dtype) -> Tensor:
    """scales, integer zeros [N, K/G] -> sm [N/R, K/G, 2, R] (int16 bf16 bits, or float32)."""
    n, groups = scales.shape
    r = block_rows(n)
    sm = torch.stack([scales, -zeros * scales], dim=1)  # [N, 2, K/G]
    sm = sm.view(n // r, r, 2, groups).permute(0, 3, 2, 1).contiguous()
    return sm.to(torch.bfloat16).view(torch.int16) if dtype == torch.bfloat16 else sm.float()


def numpy_of(t: Tensor) -> np.ndarray:
    return t.view(torch.uint16).numpy() if t.dtype == torch.int16 else t.numpy()


# ---------------------------------------------------------------------- kernels


def _widen(src, dst):
    """sm values -> float32 `dst` (bf16 bits are a float32's high half); typed by numba below."""
    raise NotImplementedError


@overload(_widen, inline="always")
def _widen_typed(src, dst):
    if src.dtype == types.uint16:

        def from_bits(src, dst):
            bits = dst.view(np.uint32)
            for i in range(src.size):
                bits[i] = np.uint32(src[i]) << 16

        return from_bits

    def copy(src, dst):
        for i in range(src.size):
            dst[i] = src[i]

    return copy


@njit(inline="always", fastmath=True)
def block_dot(data, sm, blk, x, xsum, out, scale):
    """out[m, :R] = rows blk*R.. of the matrix (data, sm) times x[m], for each row m of x (fp32
    [M, K]); xsum [M, K/G] x's group sums; scale [K/G * 2 * R] scratch."""
    r_rows = data.shape[2]
    groups = sm.shape[1]
    half = data.shape[1] // groups
    _widen(sm[blk].reshape(-1), scale)
    for m in range(x.shape[0]):
        o = out[m]
        o[:] = 0
        for g in range(groups):
            base, col, s0 = g * half, g * 2 * half, g * 2 * r_rows
            xs = xsum[m, g]
            for r in range(r_rows):
                o[r] += scale[s0 + r_rows + r] * xs
            for j in range(0, half, 4):
                c0, c1 = data[blk, base + j], data[blk, base + j + 1]
                c2, c3 = data[blk, base + j + 2], data[blk, base + j + 3]
                x0, x1, x2, x3 = x[m, col + j], x[m, col + j + 1], x[m, col + j + 2], x[m, col + j + 3]
                y0 = x[m, col + half + j] - np.float32(16) * x0
                y1 = x[m, col + half + j + 1] - np.float32(16) * x1
                y2 = x[m, col + half + j + 2] - np.float32(16) * x2
                y3 = x[m, col + half + j + 3] - np.float32(16) * x3
                for r in range(r_rows):
                    a, b, c, d = np.float32(c0[r]), np.float32(c1[r]), np.float32(c2[r]), np.float32(c3[r])
                    ah = np.floor(a * np.float32(0.0625))
                    bh = np.floor(b * np.float32(0.0625))
                    ch = np.floor(c * np.float32(0.0625))
                    dh = np.floor(d * np.float32(0.0625))
                    dot = (a * x0 + ah * y0 + b * x1 + bh * y1) + (c * x2 + ch * y2 + d * x3 + dh * y3)
                    o[r] += scale[s0 + r] * dot


@njit(fastmath=True)
def group_sums(x, groups):
    out = np.zeros((x.shape[0], groups), np.float32)
    size = x.shape[1] // groups
    for m in range(x.shape[0]):
        for g in range(groups):
            s = np.float32(0.0)
            for i in range(g * size, (g + 1) * size):
                s += x[m, i]
            out[m, g] = s
    return out


@njit(parallel=True, fastmath=True, cache=True)
def _matmul(data, sm, x, out):
    """out [M, N] = x [M, K] @ W.T; a block of R rows per task."""
    blocks, _, r_rows = data.shape
    xsum = group_sums(x, sm.shape[1])
    for blk in prange(blocks):
        part = np.empty((x.shape[0], r_rows), np.float32)
        scale = np.empty(sm.shape[1] * 2 * r_rows, np.float32)
        block_dot(data, sm, blk, x, xsum, part, scale)
        out[:, blk * r_rows : (blk + 1) * r_rows] = part


@njit(parallel=True, fastmath=True, cache=True)
def _dequantize_blocks(data, sm, out):
    """out [N/R, K, R] float32: the matrix block by block, each block's values in the order its bytes
    lie (contiguous writes), for a batched torch matmul over the blocks."""
    blocks, _, r_rows = data.shape
    groups = sm.shape[1]
    half = data.shape[1] // groups
    for blk in prange(blocks):
        scale = np.empty(groups * 2 * r_rows, np.float32)
        _widen(sm[blk].reshape(-1), scale)
        dst = out[blk]
        for g in range(groups):
            s0 = g * 2 * r_rows
            for j in range(half):
                codes = data[blk, g * half + j]
                lo_row, hi_row = dst[g * 2 * half + j], dst[g * 2 * half + half + j]
                for r in range(r_rows):
                    a = np.float32(codes[r])
                    h = np.floor(a * np.float32(0.0625))
                    s, mn = scale[s0 + r], scale[s0 + r_rows + r]
                    lo_row[r] = (a - np.float32(16) * h) * s + mn
                    hi_row[r] = h * s + mn


_scratch: dict[tuple, np.ndarray | Tensor] = {}  # the last shapes' buffers, reused: no fresh 8 MB per call


def _buffer(key: tuple, make):
    buf = _scratch.get(key)
    if buf is None:
        buf = _scratch[key] = make()
    return buf


def _dequantized_product(x: Tensor, data: Tensor, sm: Tensor) -> Tensor:
    """x @ W.T through W.T [K, N] dequantized into buffers the next call overwrites (so the whole
    product runs under the kernel lock)."""
    blocks, half2, r_rows = data.shape
    with torch_threads():
        blocked = _buffer(
            ("blocks", blocks, half2, r_rows), lambda: np.empty((blocks, half2 * 2, r_rows), np.float32)
        )
        _dequantize_blocks(data.numpy(), numpy_of(sm), blocked)
        w_t = _buffer(
            ("w_t", half2 * 2, blocks * r_rows, x.dtype),
            lambda: torch.empty(half2 * 2, blocks * r_rows, dtype=x.dtype),
        )
        w_t.view(half2 * 2, blocks, r_rows).copy_(torch.from_numpy(blocked).permute(1, 0, 2))
        return x @ w_t


def matmul(x: Tensor, data: Tensor, sm: Tensor) -> Tensor:
    """x [M, K] (any float dtype) @ W.T -> [M, N], float32 (or x's dtype from MANY_ROWS rows: a
    prefill's share of an expert, where the matrix is dequantized once and torch multiplies)."""
    blocks, half2, r_rows = data.shape
    if x.shape[0] >= MANY_ROWS:
        return _dequantized_product(x, data, sm)
    xf = x.float().contiguous().numpy()
    out = np.empty((xf.shape[0], blocks * r_rows), np.float32)
    with torch_threads():
        _matmul(data.numpy(), numpy_of(sm), xf, out)
    return torch.from_numpy(out)
