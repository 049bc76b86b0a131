"""One token of the gated delta rule (kernels/reference/delta_rule.py's definition) on CPU, in
place: the state is read twice and written once, where the torch form makes four passes and two
new [H, dk, dv] tensors per layer and token."""

from __future__ import annotations

import numpy as np
import torch
from numba import njit, prange
from torch import Tensor

from clover.kernels.cpu import torch_threads


@njit(inline="always", fastmath=True)
def update_and_read(st, k, k_scale, q, q_scale, v, beta, decay, o):
    """One head, one token, in place: S <- decay S + k (beta (v - (decay S)^T k))^T, then o = S^T q,
    with k and q scaled on the fly. st [dk, dv] float32; o [dv] written. The state is read twice and
    written once."""
    dk, dv = st.shape
    ks = np.zeros(dv, np.float32)  # (decayed S)^T k
    for i in range(dk):
        ki = k[i] * k_scale * decay
        row = st[i]
        for j in range(dv):
            ks[j] += ki * row[j]
    u = np.empty(dv, np.float32)
    for j in range(dv):
        u[j] = beta * (v[j] - ks[j])
    o[:] = 0
    for i in range(dk):
        ki, qi = k[i] * k_scale, q[i] * q_scale
        row = st[i]
        for j in range(dv):
            r = row[j] * decay + ki * u[j]
            row[j] = r
            o[j] += qi * r


@njit(parallel=True, fastmath=True, cache=True)
def _step(q, k, v, g, beta, s, o):
    """q, k [N, H, dk]; v [N, H, dv]; g, beta [N, H]; s [N, H, dk, dv] updated; o [N, H, dv]."""
    n_seq, heads = s.shape[0], s.shape[1]
    one = np.float32(1.0)
    for task in prange(n_seq * heads):
        n, h = task // heads, task % heads
        update_and_read(s[n, h], k[n, h], one, q[n, h], one, v[n, h], beta[n, h], np.exp(g[n, h]), o[n, h])


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
