"""Triton kernels against the torch references: under TRITON_INTERPRET=1 on CPU (tests/conftest.py
sets it when there is no CUDA device) and natively on CUDA. Tiny shapes, odd lengths, carried
state, GQA/GVA, fp32/bf16/fp16 (all three run in the interpreter: dots are done in fp32 there)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

import torch.nn.functional as F  # noqa: E402

from clover.kernels import dispatch  # noqa: E402
from clover.kernels.reference.attention import attention as attention_ref  # noqa: E402
from clover.kernels.reference.block_gdn import block_gdn_attention as block_gdn_ref  # noqa: E402
from clover.kernels.reference.delta_rule import chunk_gated_delta_rule as chunk_ref  # noqa: E402
from clover.kernels.reference.delta_rule import recurrent_gated_delta_rule as recurrent_ref  # noqa: E402
from clover.kernels.reference.moe import moe_experts as moe_ref  # noqa: E402
from clover.kernels.triton.attention import attention as attention_tri  # noqa: E402
from clover.kernels.triton.block_gdn import block_gdn_attention as block_gdn_tri  # noqa: E402
from clover.kernels.triton.delta_rule import chunk_gated_delta_rule as chunk_tri  # noqa: E402
from clover.kernels.triton.moe import moe_experts as moe_tri  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
if DEV == "cpu" and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
    pytest.skip("no CUDA device and TRITON_INTERPRET is off", allow_module_level=True)

# fp32 on CUDA goes through tf32 tensor cores; the interpreter is exact fp32
TOL = {torch.float32: 2e-5 if DEV == "cpu" else 1e-2, torch.bfloat16: 5e-2, torch.float16: 1e-2}


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _close(actual, expected, dtype, scale: float = 1.0) -> None:
    err = (actual.float().cpu() - expected.float().cpu()).abs().max().item()
    assert err <= TOL[dtype] * scale * max(1.0, expected.float().abs().max().item()), err


def _dr_inputs(n, t, hk, h, dk, dv, seed=0, dtype=torch.float32):
    g = _gen(seed)
    q = F.normalize(torch.randn(n, t, hk, dk, generator=g), dim=-1) * dk**-0.5
    k = F.normalize(torch.randn(n, t, hk, dk, generator=g), dim=-1)
    v = torch.randn(n, t, h, dv, generator=g)
    decay = -torch.rand(n, t, h, generator=g) * 2
    beta = torch.rand(n, t, h, generator=g)
    s0 = torch.randn(n, h, dk, dv, generator=g)
    return [x.to(DEV, dtype) for x in (q, k, v)] + [x.to(DEV) for x in (decay, beta, s0)]


# ------------------------------------------------------------------------------------ delta rule


@pytest.mark.parametrize(
    "n,t,hk,h,dk,dv,chunk,dtype",
    [
        (2, 37, 2, 4, 8, 6, 16, torch.float32),  # GVA, odd length, dv not a power of two
        (1, 20, 1, 1, 8, 8, 5, torch.float32),  # chunk not a power of two (training block sizes)
        (1, 33, 2, 2, 16, 16, 16, torch.bfloat16),
        (1, 24, 1, 2, 8, 8, 8, torch.float16),
        (1, 21, 1, 2, 8, 40, 16, torch.float32),  # dv over the state pass's 32-wide tiles
    ],
)
def test_delta_rule_matches_reference(n, t, hk, h, dk, dv, chunk, dtype):
    q, k, v, g, beta, s0 = _dr_inputs(n, t, hk, h, dk, dv, dtype=dtype)
    o, s, starts = chunk_tri(q, k, v, g, beta, s0, chunk_size=chunk, return_chunk_states=True)
    o_ref, s_ref, starts_ref = chunk_ref(q, k, v, g, beta, s0, chunk_size=chunk, return_chunk_states=True)
    assert o.dtype == dtype and s.dtype == torch.float32 and starts.shape == starts_ref.shape
    _close(o, o_ref, dtype)
    _close(s, s_ref, dtype)
    _close(starts, starts_ref, dtype)


def test_delta_rule_zero_state_and_carry_equal_recurrent():
    q, k, v, g, beta, _ = _dr_inputs(1, 29, 1, 2, 8, 8, seed=1)
    o_ref, s_ref = recurrent_ref(q, k, v, g, beta)
    o1, s1 = chunk_tri(q[:, :11], k[:, :11], v[:, :11], g[:, :11], beta[:, :11], chunk_size=16)
    o2, s2 = chunk_tri(q[:, 11:], k[:, 11:], v[:, 11:], g[:, 11:], beta[:, 11:], s1, chunk_size=16)
    _close(torch.cat([o1, o2], 1), o_ref, torch.float32)
    _close(s2, s_ref, torch.float32)


def test_delta_rule_varlen_matches_per_sequence():
    lens = [7, 20, 1, 13]
    q, k, v, g, beta, _ = _dr_inputs(1, sum(lens), 1, 2, 8, 8, seed=2)
    s0 = torch.randn(len(lens), 2, 8, 8, generator=_gen(5)).to(DEV)
    cu = torch.tensor([0, 7, 27, 28, 41], dtype=torch.int32)
    o, s, starts = chunk_tri(q, k, v, g, beta, s0, chunk_size=8, return_chunk_states=True, cu_seqlens=cu)
    assert starts.shape[0] == 1 + 3 + 1 + 2
    with_torch = chunk_ref(q, k, v, g, beta, s0, chunk_size=8, return_chunk_states=True, cu_seqlens=cu)
    for i, (a, b) in enumerate(zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True)):
        piece = [x[:, a:b] for x in (q, k, v, g, beta)]
        o_i, s_i = recurrent_ref(*piece, s0[i : i + 1])
        _close(o[:, a:b], o_i, torch.float32)
        _close(s[i : i + 1], s_i, torch.float32)
    for mine, theirs in zip((o, s, starts), with_torch, strict=True):
        _close(mine, theirs, torch.float32)


# ------------------------------------------------------------------------------ GDN block mode


@pytest.mark.parametrize(
    "n,nb,b,h,dk,dv,dtype",
    [
        (2, 3, 5, 4, 8, 6, torch.float32),
        (1, 1, 32, 2, 16, 16, torch.bfloat16),
        (1, 2, 1, 2, 8, 8, torch.float16),
    ],
)
def test_block_gdn_matches_reference(n, nb, b, h, dk, dv, dtype):
    g = _gen(3)
    q = F.normalize(torch.randn(n, nb, b, h, dk, generator=g), dim=-1).to(DEV)
    k = F.normalize(torch.randn(n, nb, b, h, dk, generator=g), dim=-1).to(DEV)
    v = torch.randn(n, nb, b, h, dv, generator=g).to(DEV, dtype)
    state = torch.randn(n, nb, h, dk, dv, generator=g).to(DEV)
    tau, m, c = (torch.randn(h, generator=g).to(DEV) for _ in range(3))
    o = block_gdn_tri(q, k, v, state, tau, m, c)
    assert o.dtype == dtype
    _close(o, block_gdn_ref(q, k, v, state, tau, m, c), dtype)


# ------------------------------------------------------------------------- full-attention block


@pytest.mark.parametrize(
    "n,hq,hkv,tq,tk,d,dtype,splits,masked,split_block,gated",
    [
        (2, 4, 2, 5, 13, 16, torch.float32, None, True, False, False),  # GQA, odd sizes, mask
        (1, 4, 1, 8, 40, 32, torch.bfloat16, 3, False, True, True),  # split keys, block apart, gate
        (2, 2, 2, 3, 20, 8, torch.float16, 2, True, True, True),
    ],
)
def test_attention_matches_reference(n, hq, hkv, tq, tk, d, dtype, splits, masked, split_block, gated):
    g = _gen(4)
    q, k, v = (
        torch.randn(n, h_, t_, d, generator=g).to(DEV, dtype) for h_, t_ in ((hq, tq), (hkv, tk), (hkv, tk))
    )
    mask = torch.rand(n, 1, tq, tk, generator=g) > 0.4
    mask[..., 0] = True
    mask = mask.to(DEV)
    gate = torch.randn(n, tq, hq * d, generator=g).to(DEV, dtype) if gated else None
    expected = attention_ref(q, k, v, mask if masked else torch.ones_like(mask[:1]))
    if gated:
        expected = expected * torch.sigmoid(gate.view(n, tq, hq, d).transpose(1, 2))
    kw = dict(gate=gate, num_splits=splits)
    if split_block:  # the cache as a strided view of a bigger buffer, the block's K/V apart
        buf_k = torch.zeros(n, hkv, tk + 9, d, dtype=dtype, device=DEV)
        buf_v = torch.zeros_like(buf_k)
        buf_k[:, :, : tk - 7], buf_v[:, :, : tk - 7] = k[:, :, : tk - 7], v[:, :, : tk - 7]
        kw.update(k_block=k[:, :, tk - 7 :], v_block=v[:, :, tk - 7 :])
        o = attention_tri(q, buf_k[:, :, : tk - 7], buf_v[:, :, : tk - 7], mask if masked else None, **kw)
    else:
        o = attention_tri(q, k, v, mask if masked else None, **kw)
    assert o.dtype == dtype and o.shape == q.shape
    _close(o, expected, dtype)


# --------------------------------------------------------------------------------------- MoE


@pytest.mark.parametrize(
    "t,hid,inter,e,topk,dtype",
    [(23, 16, 8, 6, 2, torch.float32), (5, 32, 16, 8, 3, torch.bfloat16), (40, 24, 20, 3, 2, torch.float16)],
)
def test_moe_matches_reference(t, hid, inter, e, topk, dtype):
    g = _gen(6)
    x = torch.randn(t, hid, generator=g)
    gate_up = torch.randn(e, 2 * inter, hid, generator=g) * hid**-0.5
    down = torch.randn(e, hid, inter, generator=g) * inter**-0.5
    ids = torch.stack([torch.randperm(e, generator=g)[:topk] for _ in range(t)])
    w = torch.rand(t, topk, generator=g)
    y = moe_tri(x.to(DEV, dtype), ids.to(DEV), w.to(DEV, dtype), gate_up.to(DEV, dtype), down.to(DEV, dtype))
    assert y.dtype == dtype
    _close(y, moe_ref(x, ids, w, gate_up, down), dtype, scale=2.0)


# -------------------------------------------------------------------------------- dispatcher


@pytest.mark.parametrize("op", sorted(dispatch.TRITON_OPS))
def test_reference_and_triton_take_identical_arguments(op):
    import inspect

    ref = dispatch._impl("reference", op)
    tri = dispatch._impl("triton", op)
    assert inspect.signature(ref) == inspect.signature(tri)


def test_delta_rule_states_every_matches_reference():
    q, k, v, g, beta, s0 = _dr_inputs(1, 21, 1, 2, 8, 8, seed=3)
    mine = chunk_tri(q, k, v, g, beta, s0, chunk_size=8, return_chunk_states=True, states_every=4)
    ref = chunk_ref(q, k, v, g, beta, s0, chunk_size=8, return_chunk_states=True, states_every=4)
    for a, b in zip(mine, ref, strict=True):
        _close(a, b, torch.float32)


def test_dispatch_routes(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setenv("CLOVER_KERNELS", "auto")
    assert dispatch.get("moe_experts", cpu) is moe_ref
    assert dispatch.get("moe_experts", torch.device("cuda"), needs_grad=True) is moe_ref
    assert dispatch.get("recurrent_gated_delta_rule", torch.device("cuda")) is recurrent_ref
    monkeypatch.setenv("CLOVER_KERNELS", "triton")
    assert dispatch.get("moe_experts", cpu) is moe_tri
    assert dispatch.get("attention", cpu) is attention_tri
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="CUDA"):
        dispatch.get("block_gdn_attention", cpu)
    monkeypatch.setenv("CLOVER_KERNELS", "torch")
    assert dispatch.get("chunk_gated_delta_rule", torch.device("cuda")) is chunk_ref


def test_dispatch_attention_with_block_keys_torch_and_triton_agree(monkeypatch):
    g = _gen(7)
    q = torch.randn(1, 4, 6, 16, generator=g).to(DEV)
    k, v, kb, vb = (torch.randn(1, 2, t, 16, generator=g).to(DEV) for t in (9, 9, 6, 6))
    gate = torch.randn(1, 6, 64, generator=g).to(DEV)
    outs = []
    for name in ("torch", "triton"):
        monkeypatch.setenv("CLOVER_KERNELS", name)
        outs.append(dispatch.attention(q, k, v, k_block=kb, v_block=vb, gate=gate))
    _close(outs[1], outs[0], torch.float32)


def test_tiny_model_same_logits_with_triton(monkeypatch):
    """The model reaches every Triton op through clover.kernels.dispatch: the committed forward and one
    denoising round give the torch backend's logits."""
    from clover.model.config import tiny
    from clover.model.modeling import CloverForCausalLM

    torch.manual_seed(0)
    model = CloverForCausalLM(tiny()).eval().to(DEV)
    ids = torch.randint(2, 120, (1, 9), generator=_gen(8)).to(DEV)
    block = torch.full((1, 4), model.config.mask_token_id, device=DEV)
    results = []
    for name in ("torch", "triton"):
        monkeypatch.setenv("CLOVER_KERNELS", name)
        with torch.no_grad():
            cache = model.new_cache(1)
            model.commit(ids, cache)
            results.append((cache.next_logits, model.denoise(block, cache)))
    for mine, ref in zip(results[1], results[0], strict=True):
        _close(mine, ref, torch.float32, scale=10.0)


@pytest.mark.slow
def test_kernels_compile_for_sm90():
    """Every kernel compiles to a cubin for sm_90 at the 35B shapes (no GPU needed)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    root = Path(__file__).resolve().parents[1]
    res = subprocess.run(
        [sys.executable, "-m", "clover.kernels.triton.compile_check", "90"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
