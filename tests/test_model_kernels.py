"""Torch reference ops against their definitions: chunked = recurrent delta rule, block-mode GDN
against a per-position loop, sorted MoE against a per-token loop."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from clover.kernels import dispatch
from clover.kernels.reference.block_gdn import block_gdn_attention
from clover.kernels.reference.delta_rule import chunk_gated_delta_rule, recurrent_gated_delta_rule
from clover.kernels.reference.moe import moe_experts


def _inputs(n, t, hk, h, dk, dv, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(n, t, hk, dk, generator=g), dim=-1) * dk**-0.5
    k = F.normalize(torch.randn(n, t, hk, dk, generator=g), dim=-1)
    v = torch.randn(n, t, h, dv, generator=g)
    decay = -torch.rand(n, t, h, generator=g) * 2
    beta = torch.rand(n, t, h, generator=g)
    s0 = torch.randn(n, h, dk, dv, generator=g)
    return q, k, v, decay, beta, s0


@pytest.mark.parametrize("t,chunk", [(1, 64), (37, 64), (37, 8), (64, 16), (100, 32), (5, 1)])
def test_chunked_equals_recurrent(t, chunk):
    q, k, v, g, beta, s0 = _inputs(2, t, 2, 4, 8, 6)  # GVA: 4 value heads on 2 key heads
    o_ref, s_ref = recurrent_gated_delta_rule(q, k, v, g, beta, s0)
    o, s = chunk_gated_delta_rule(q, k, v, g, beta, s0, chunk_size=chunk)
    torch.testing.assert_close(o, o_ref, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(s, s_ref, atol=2e-5, rtol=1e-5)


def test_carried_state_and_chunk_states():
    q, k, v, g, beta, s0 = _inputs(1, 45, 1, 3, 8, 8, seed=1)
    o_all, s_all, starts = chunk_gated_delta_rule(
        q, k, v, g, beta, s0, chunk_size=16, return_chunk_states=True
    )
    # running in two pieces with the state carried equals one run
    o1, s1 = chunk_gated_delta_rule(q[:, :20], k[:, :20], v[:, :20], g[:, :20], beta[:, :20], s0)
    o2, s2 = chunk_gated_delta_rule(q[:, 20:], k[:, 20:], v[:, 20:], g[:, 20:], beta[:, 20:], s1)
    torch.testing.assert_close(torch.cat([o1, o2], 1), o_all, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(s2, s_all, atol=2e-5, rtol=1e-5)
    # chunk start states are the recurrent states at 0, 16, 32
    assert starts.shape[1] == 3
    for i, t in enumerate((0, 16, 32)):
        _, st = recurrent_gated_delta_rule(q[:, :t], k[:, :t], v[:, :t], g[:, :t], beta[:, :t], s0)
        torch.testing.assert_close(starts[:, i], st, atol=2e-5, rtol=1e-5)


def test_delta_rule_bf16_inputs_keep_fp32_state():
    q, k, v, g, beta, s0 = _inputs(1, 33, 2, 2, 8, 8, seed=2)
    o, s = chunk_gated_delta_rule(q.bfloat16(), k.bfloat16(), v.bfloat16(), g, beta, s0)
    assert o.dtype == torch.bfloat16 and s.dtype == torch.float32
    o_ref, _ = recurrent_gated_delta_rule(q, k, v, g, beta, s0)
    assert (o.float() - o_ref).abs().max() < 0.1


def test_block_gdn_matches_definition():
    gen = torch.Generator().manual_seed(3)
    n, nb, b, h, dk, dv = 2, 3, 5, 4, 8, 6
    q = F.normalize(torch.randn(n, nb, b, h, dk, generator=gen), dim=-1)
    k = F.normalize(torch.randn(n, nb, b, h, dk, generator=gen), dim=-1)
    v = torch.randn(n, nb, b, h, dv, generator=gen)
    s = torch.randn(n, nb, h, dk, dv, generator=gen)
    tau, m, c = (torch.randn(h, generator=gen) for _ in range(3))
    o = block_gdn_attention(q, k, v, s, tau, m, c)
    ref = torch.empty_like(o)
    for a in range(n):
        for blk in range(nb):
            for hh in range(h):
                for i in range(b):
                    r = s[a, blk, hh].T @ (q[a, blk, i, hh] / math.sqrt(dk))
                    scores = [float(m[hh] + c[hh] * math.log(b))]
                    scores += [float(tau[hh].exp() * (q[a, blk, i, hh] @ k[a, blk, j, hh])) for j in range(b)]
                    p = torch.tensor(scores).softmax(0)
                    ref[a, blk, i, hh] = p[0] * r + (p[1:, None] * v[a, blk, :, hh]).sum(0)
    torch.testing.assert_close(o, ref, atol=1e-5, rtol=1e-5)


def test_moe_sorted_equals_per_token():
    gen = torch.Generator().manual_seed(4)
    t, hdim, inter, e, topk = 23, 16, 8, 6, 2
    x = torch.randn(t, hdim, generator=gen)
    gate_up = torch.randn(e, 2 * inter, hdim, generator=gen)
    down = torch.randn(e, hdim, inter, generator=gen)
    ids = torch.stack([torch.randperm(e, generator=gen)[:topk] for _ in range(t)])
    w = torch.rand(t, topk, generator=gen)
    y = moe_experts(x, ids, w, gate_up, down)
    ref = torch.zeros_like(x)
    for i in range(t):
        for j in range(topk):
            gu = gate_up[ids[i, j]] @ x[i]
            ref[i] += w[i, j] * (down[ids[i, j]] @ (F.silu(gu[:inter]) * gu[inter:]))
    torch.testing.assert_close(y, ref, atol=1e-4, rtol=1e-4)


def test_dispatch_env(monkeypatch):
    monkeypatch.setenv("CLOVER_KERNELS", "torch")
    assert dispatch.get("chunk_gated_delta_rule") is chunk_gated_delta_rule
    monkeypatch.setenv("CLOVER_KERNELS", "cuda-magic")
    with pytest.raises(ValueError, match="CLOVER_KERNELS"):
        dispatch.get("moe_experts")


@pytest.mark.parametrize("every", [1, 2, 4, 8, 16, 32])
def test_states_every_matches_chunk_equal_block(every):
    """Block-start states from one 64-token-chunk pass equal those of chunk = block (odd length)."""
    from clover.kernels.reference.delta_rule import chunk_gated_delta_rule

    torch.manual_seed(every)
    n, t, hk, h, d = 2, 77, 2, 4, 8
    q = torch.nn.functional.normalize(torch.randn(n, t, hk, d), dim=-1) * d**-0.5
    k = torch.nn.functional.normalize(torch.randn(n, t, hk, d), dim=-1)
    v, g, beta = torch.randn(n, t, h, d), -torch.rand(n, t, h), torch.rand(n, t, h)
    s0 = torch.randn(n, h, d, d)
    o1, f1, st1 = chunk_gated_delta_rule(q, k, v, g, beta, s0, chunk_size=every, return_chunk_states=True)
    o2, f2, st2 = chunk_gated_delta_rule(
        q, k, v, g, beta, s0, chunk_size=64, return_chunk_states=True, states_every=every
    )
    assert st1.shape == st2.shape
    torch.testing.assert_close(st2, st1, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(o2, o1, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(f2, f1, atol=1e-5, rtol=1e-5)


def test_empty_sequence_keeps_the_state():
    from clover.kernels.reference.delta_rule import chunk_gated_delta_rule

    s0 = torch.randn(1, 4, 8, 8)
    o, s = chunk_gated_delta_rule(
        torch.zeros(1, 0, 2, 8),
        torch.zeros(1, 0, 2, 8),
        torch.zeros(1, 0, 4, 8),
        torch.zeros(1, 0, 4),
        torch.zeros(1, 0, 4),
        s0,
    )
    assert o.shape == (1, 0, 4, 8)
    torch.testing.assert_close(s, s0)
