"""One token through a Gated DeltaNet layer on CPU, between its input and output projections, in one
call: the causal conv and its SiLU, the L2-normalised q and k, the gates (beta, log decay), the
delta-rule update of the state (in place) and the gated RMS norm. In torch that is ~60 small ops
per layer and token, whose dispatch costs more than their arithmetic (model/layers/gdn.py keeps the
torch form as the definition; tests/test_cpu_kernels.py holds the two together)."""

from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit, prange
from torch import Tensor

from clover.kernels.cpu import torch_threads
from clover.kernels.cpu.delta_rule import update_and_read


@njit(fastmath=True, inline="always")
def _softplus(x):
    return x if x > 20.0 else math.log1p(math.exp(x))  # torch's threshold 20


@njit(parallel=True, fastmath=True, cache=True)
def _token(pre, z, b, a, tail, conv_w, a_log, dt_bias, norm_w, eps, state, out, new_tail, key_dim, rep):
    """pre [N, C], z [N, H*dv], b, a [N, H], tail [N, C, K-1], conv_w [C, K] (float32); state
    [N, H, dk, dv] updated in place; out [N, H*dv] (normed, gated) and new_tail [N, C, K-1] written."""
    n_seq, channels = pre.shape
    tail_len = tail.shape[2]
    heads, dk, dv = state.shape[1], state.shape[2], state.shape[3]
    y = np.empty((n_seq, channels), np.float32)
    for c in prange(channels):
        for n in range(n_seq):
            acc = conv_w[c, tail_len] * pre[n, c]
            for j in range(tail_len):
                acc += conv_w[c, j] * tail[n, c, j]
            y[n, c] = acc / (np.float32(1.0) + np.exp(-acc))
            for j in range(tail_len - 1):
                new_tail[n, c, j] = tail[n, c, j + 1]
            new_tail[n, c, tail_len - 1] = pre[n, c]
    for task in prange(n_seq * heads):
        n, h = task // heads, task % heads
        kh = h // rep
        q = y[n, kh * dk : (kh + 1) * dk]
        k = y[n, key_dim + kh * dk : key_dim + (kh + 1) * dk]
        v = y[n, 2 * key_dim + h * dv : 2 * key_dim + (h + 1) * dv]
        qq, kk = np.float32(0.0), np.float32(0.0)
        for i in range(dk):
            qq += q[i] * q[i]
            kk += k[i] * k[i]
        q_scale = np.float32(1.0) / np.sqrt(qq + np.float32(1e-6)) / np.sqrt(np.float32(dk))
        k_scale = np.float32(1.0) / np.sqrt(kk + np.float32(1e-6))
        beta = np.float32(1.0) / (np.float32(1.0) + np.exp(-b[n, h]))
        decay = np.exp(-np.exp(a_log[h]) * _softplus(a[n, h] + dt_bias[h]))
        o = np.empty(dv, np.float32)
        update_and_read(state[n, h], k, k_scale, q, q_scale, v, beta, decay, o)
        ms = np.float32(0.0)
        for j in range(dv):
            ms += o[j] * o[j]
        rs = np.float32(1.0) / np.sqrt(ms / dv + eps)
        for j in range(dv):
            zj = z[n, h * dv + j]
            out[n, h * dv + j] = norm_w[j] * o[j] * rs * zj / (np.float32(1.0) + np.exp(-zj))


def _f32(t: Tensor) -> np.ndarray:
    return t.detach().float().contiguous().numpy()


def gdn_token(
    pre: Tensor,
    z: Tensor,
    b: Tensor,
    a: Tensor,
    tail: Tensor,
    conv_w: Tensor,
    a_log: Tensor,
    dt_bias: Tensor,
    norm_w: Tensor,
    eps: float,
    state: Tensor,
    key_dim: int,
    rep: int,
) -> tuple[Tensor, Tensor]:
    """pre [N, C], z [N, H*dv], b, a [N, H] (one token's projections), tail [N, C, K-1], conv_w
    [C, K]; state fp32 contiguous [N, H, dk, dv], updated in place. Returns (out [N, H*dv] in z's
    dtype, the new conv tail in tail's dtype)."""
    out = np.empty(tuple(z.shape), np.float32)
    new_tail = np.empty(tuple(tail.shape), np.float32)
    args = [_f32(t) for t in (pre, z, b, a, tail, conv_w, a_log, dt_bias, norm_w)]
    with torch_threads():
        _token(*args, np.float32(eps), state.numpy(), out, new_tail, key_dim, rep)
    return torch.from_numpy(out).to(z.dtype), torch.from_numpy(new_tail).to(tail.dtype)
