"""One token of the gated delta rule (kernels/reference/delta_rule.py's definition) on CPU, in
place: the state is read twice and written once, where the torch form makes four passes and two
new [H, dk, dv] tensors per layer and token."""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange
from torch import Tensor

from clover.kernels.cpu import torch_threads


@njit(parallel=True, fastmath=True, cache=True)
def _step(q, k, v, g, beta, s, o):
    """q, k [N, H, dk]; v [N, H, dv]; g, beta [N, H]; s [N, H, dk, dv] updated; o [N, H, dv]."""
    n_seq, heads, dk, dv = s.shape
    for task in prange(n_seq * heads):
        n, h = task // heads, task % heads
        st = s[n, h]
        decay = np.exp(g[n, h])
        ks = np.zeros(dv, np.float32)  # (decayed S)^T k
        for i in range(dk):
            ki = k[n, h, i] * decay
            row = st[i]
            for j in range(dv):
                ks[j] += ki * row[j]
        u = np.empty(dv, np.float32)
        for j in range(dv):
            u[j] = beta[n, h] * (v[n, h, j] - ks[j])
        out = o[n, h]
        out[:] = 0
        for i in range(dk):
            ki, qi = k[n, h, i], q[n, h, i]
            row = st[i]
            for j in range(dv):
                r = row[j] * decay + ki * u[j]
                row[j] = r
                out[j] += qi * r


def step(q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
    """Inputs as `recurrent_gated_delta_rule` takes them with T = 1 (q, k already one per value head).
    Returns (o [N, 1, H, dv] in v's dtype, the state fp32), the state updated in place when it is a
    contiguous fp32 tensor (a copy otherwise)."""
    s = state if state.dtype == torch.float32 and state.is_contiguous() else state.float().contiguous()
    f32 = [t[:, 0].float().contiguous() for t in (q, k, v, g, beta)]
    o = np.empty(f32[2].shape, np.float32)
    with torch_threads():
        _step(*(t.numpy() for t in f32), s.numpy(), o)
    return torch.from_numpy(o)[:, None].to(v.dtype), s
