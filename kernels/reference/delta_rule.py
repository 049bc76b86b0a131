"""Gated delta rule in plain torch: the recurrent form (the definition) and the chunked WY/UT form.

Shapes: q, k [N, T, Hk, dk]; v [N, T, H, dv]; g, beta [N, T, H] with H a multiple of Hk (GVA: value
head h reads key head h // (H // Hk)). q and k arrive already L2-normalised, q already scaled by
dk^-1/2. g is the log decay (<= 0). The state S [N, H, dk, dv] is fp32; so is all arithmetic.

    S <- exp(g_t) * S
    S <- S + k_t (beta_t (v_t - S^T k_t))^T
    o_t = S^T q_t
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def _expand_heads(x: Tensor, heads: int) -> Tensor:
    return x if x.shape[2] == heads else x.repeat_interleave(heads // x.shape[2], dim=2)


def _prepare(q, k, v, g, beta, initial_state):
    n, t, h, dv = v.shape
    q, k = _expand_heads(q, h).float(), _expand_heads(k, h).float()
    s0 = initial_state.float() if initial_state is not None else q.new_zeros(n, h, q.shape[-1], dv)
    return q, k, v.float(), g.float(), beta.float(), s0


def recurrent_gated_delta_rule(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, initial_state: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """One token at a time. Returns (o [N, T, H, dv] in v's dtype, final state fp32)."""
    dtype = v.dtype
    q, k, v, g, beta, s = _prepare(q, k, v, g, beta, initial_state)
    out = []
    for t in range(v.shape[1]):
        s = s * g[:, t, :, None, None].exp()
        u = beta[:, t, :, None] * (v[:, t] - torch.einsum("nhkv,nhk->nhv", s, k[:, t]))
        s = s + k[:, t, :, :, None] * u[:, :, None, :]
        out.append(torch.einsum("nhkv,nhk->nhv", s, q[:, t]))
    o = torch.stack(out, dim=1) if out else v.new_zeros(v.shape)
    return o.to(dtype), s


# One function: the chunked WY/UT algorithm is read whole against the formulas of its docstring.
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
    """Chunk-parallel form, equal to `recurrent_gated_delta_rule`.

    Inside a chunk of C tokens with inclusive cumulative log decay G and start state S0, the
    corrections u_j = beta_j (v_j - S_{j}'^T k_j) solve the unit lower-triangular system
    (I + A) u = beta*v - beta*exp(G)*(K S0), A_jl = beta_j exp(G_j - G_l) k_j.k_l for l < j
    (the WY/UT transform). Then O = exp(G)*(Q S0) + (causal exp(G_i - G_j) Q K^T) u and
    S_C = exp(G_C) S0 + (exp(G_C - G) K)^T u. Only the hand-off of S between chunks is sequential.

    With return_chunk_states, also returns the state at the start of every chunk [N, T/C, H, dk, dv]
    (block diffusion training reads the committed state at each block start from it).
    `states_every` = E (dividing chunk_size) returns the state every E tokens instead, still from
    one chunk-sized pass: S at offset p inside a chunk is exp(G_{p-1}) S0 + sum_{l<p} exp(G_{p-1} - G_l)
    k_l u_l^T. Training with small blocks needs this: chunk = block = 1 would loop over every token.

    With `cu_seqlens` ([S+1] int, N must be 1) the S sequences packed along T run independently (one
    after the other here): initial_state and the final state are [S, H, dk, dv] and the start states
    [total sub-chunks, H, dk, dv], each sequence's in order (as the Triton kernel returns them).
    """
    if cu_seqlens is not None:
        return _varlen(
            q, k, v, g, beta, initial_state, chunk_size, return_chunk_states, states_every, cu_seqlens
        )
    every = states_every or chunk_size
    if chunk_size % every:
        raise ValueError(f"states_every={every} must divide chunk_size={chunk_size}")
    dtype = v.dtype
    q, k, v, g, beta, s = _prepare(q, k, v, g, beta, initial_state)
    n, t, h, dk = k.shape
    c = chunk_size
    if t == 0:  # nothing to do; keep the output shapes
        o = v.new_zeros(n, 0, h, v.shape[-1]).to(dtype)
        return (o, s, s.new_zeros(n, 0, *s.shape[1:])) if return_chunk_states else (o, s)
    pad = (-t) % c
    if pad:  # zero k, beta and g leave the state untouched
        q, k, v = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v))
        g, beta = (F.pad(x, (0, 0, 0, pad)) for x in (g, beta))
    nc = (t + pad) // c
    # [N, H, nc, C, d] / [N, H, nc, C]
    q, k, v = (x.transpose(1, 2).reshape(n, h, nc, c, -1) for x in (q, k, v))
    g, beta = (x.transpose(1, 2).reshape(n, h, nc, c) for x in (g, beta))

    G = g.cumsum(-1)
    causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    decay = (G[..., :, None] - G[..., None, :]).masked_fill(~causal, float("-inf")).exp()  # [.., C, C]
    strict = torch.ones(c, c, dtype=torch.bool, device=q.device).tril(-1)
    eye = torch.eye(c, dtype=q.dtype, device=q.device)
    a = (beta[..., None] * decay * (k @ k.transpose(-1, -2))).masked_fill(~strict, 0.0) + eye
    w = torch.linalg.solve_triangular(a, (beta * G.exp())[..., None] * k, upper=False, unitriangular=True)
    u0 = torch.linalg.solve_triangular(a, beta[..., None] * v, upper=False, unitriangular=True)
    qk = (q @ k.transpose(-1, -2)) * decay
    g_last = G[..., -1:]

    if every != c:  # decay from each token l to each sub-start p (p = 0, E, 2E, ...), l < p only
        sub = torch.arange(0, c, every, device=q.device)
        g_before = torch.cat([torch.zeros_like(G[..., :1]), G], dim=-1)[..., sub]  # G_{p-1}, 0 at p = 0
        before = torch.arange(c, device=q.device)[None, :] < sub[:, None]  # [P, C]
        sub_decay = (g_before[..., :, None] - G[..., None, :]).masked_fill(~before, float("-inf")).exp()

    outs, starts = [], []
    for i in range(nc):
        u = u0[:, :, i] - w[:, :, i] @ s
        if every == c:
            starts.append(s)
        else:  # [N, H, P, dk, dv]
            kd_sub = sub_decay[:, :, i, :, :, None] * k[:, :, i, None]  # [N, H, P, C, dk]
            starts.append(
                g_before[:, :, i, :, None, None].exp() * s[:, :, None]
                + kd_sub.transpose(-1, -2) @ u[:, :, None]
            )
        o = (q[:, :, i] * G[:, :, i, :, None].exp()) @ s + qk[:, :, i] @ u
        outs.append(o)
        kd = k[:, :, i] * (g_last[:, :, i] - G[:, :, i]).exp()[..., None]
        s = s * g_last[:, :, i, :, None].exp() + kd.transpose(-1, -2) @ u
    o = torch.stack(outs, dim=2).reshape(n, h, nc * c, -1)[:, :, :t].transpose(1, 2).to(dtype)
    if return_chunk_states:
        if every == c:
            return o, s, torch.stack(starts, dim=1)
        st = torch.stack(starts, dim=2)  # [N, H, nc, P, dk, dv] -> [N, T/E, H, dk, dv]
        st = st.flatten(2, 3)[:, :, : -(-t // every)].transpose(1, 2)
        return o, s, st
    return o, s


def _varlen(q, k, v, g, beta, h0, chunk_size, return_chunk_states, states_every, cu_seqlens):
    if v.shape[0] != 1:
        raise ValueError("cu_seqlens needs packed inputs with N = 1")
    bounds = cu_seqlens.tolist()
    outs, finals, starts = [], [], []
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        o, s, st = chunk_gated_delta_rule(
            *(x[:, a:b] for x in (q, k, v, g, beta)),
            None if h0 is None else h0[i : i + 1],
            chunk_size,
            True,
            states_every,
        )
        outs.append(o)
        finals.append(s)
        starts.append(st[0])
    o, final = torch.cat(outs, dim=1), torch.cat(finals)
    return (o, final, torch.cat(starts)) if return_chunk_states else (o, final)
