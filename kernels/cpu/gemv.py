"""A dense bf16 matrix times the few rows of x a decoding step has (lm_head's 1 GB at B = 1), at
close to memory bandwidth: each weight row is widened to float32 once (bf16 is the high half of a
float32) and dotted with every row of x while it is in L1. torch's bf16 `mm` reaches ~15-23 GB/s
here on the same matrix, this ~32 (benchmarks/cpu_kernels.py)."""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange
from torch import Tensor

from clover.kernels.cpu import torch_threads

MAX_ROWS = 1  # rows of x this path takes: at 2-4 its per-row dots lose to torch (measured)
ROWS_PER_TASK = 64


@njit(inline="always", fastmath=True)
def _dot(a, b, k):
    acc = np.float32(0.0)
    for i in range(k):
        acc += a[i] * b[i]
    return acc


@njit(parallel=True, fastmath=True, cache=True)
def _gemv_bf16(w, x, out):
    """out [M, N] = x [M, K] float32 @ w.T, w [N, K] bf16 bits (uint16)."""
    n_rows, k = w.shape
    m_rows = x.shape[0]
    for task in prange((n_rows + ROWS_PER_TASK - 1) // ROWS_PER_TASK):
        bits = np.empty(k, np.uint32)
        row_f = bits.view(np.float32)
        for n in range(task * ROWS_PER_TASK, min(n_rows, (task + 1) * ROWS_PER_TASK)):
            row = w[n]
            for i in range(k):
                bits[i] = np.uint32(row[i]) << 16
            for m in range(m_rows):
                out[m, n] = _dot(row_f, x[m], k)


def takes(x: Tensor, weight: Tensor) -> bool:
    """Can `linear(x, weight)` run here? (CPU, bf16 contiguous weight, at most MAX_ROWS rows)."""
    rows = x.numel() // x.shape[-1] if x.dim() else 0
    return (
        weight.device.type == "cpu"
        and weight.dtype == torch.bfloat16
        and weight.dim() == 2
        and weight.is_contiguous()
        and 0 < rows <= MAX_ROWS
    )


def linear(x: Tensor, weight: Tensor) -> Tensor:
    """x [..., K] @ weight.T in x's dtype (weight bf16 [N, K])."""
    flat = x.reshape(-1, x.shape[-1]).float().contiguous()
    out = np.empty((flat.shape[0], weight.shape[0]), np.float32)
    with torch_threads():
        _gemv_bf16(weight.view(torch.int16).numpy().view(np.uint16), flat.numpy(), out)
    return torch.from_numpy(out).to(x.dtype).view(*x.shape[:-1], weight.shape[0])
