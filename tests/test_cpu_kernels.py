"""The numba CPU decoding kernels (kernels/cpu/) against the torch definitions they replace, and the
places the model takes them: lm_head / router at B = 1 (model/loading/cpu_linear.py), the one-token delta
rule and a GDN layer's one-token step (in place only when the step commits), the int4 experts in
row blocks and a MoE layer (router included) in one call; the torch one-token MoE path."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("numba")

import torch.nn.functional as F  # noqa: E402

from clover.kernels import cpu  # noqa: E402
from clover.kernels.cpu import delta_rule, gemv  # noqa: E402
from clover.kernels.cpu import int4 as cpu_int4  # noqa: E402
from clover.kernels.reference.delta_rule import recurrent_gated_delta_rule  # noqa: E402
from clover.kernels.reference.moe import moe_experts, routed_experts  # noqa: E402
from clover.model.config import tiny  # noqa: E402
from clover.model.loading.cpu_linear import CpuGemvLinear, use_cpu_kernels  # noqa: E402
from clover.model.loading.load import load_checkpoint, save_checkpoint  # noqa: E402
from clover.model.loading.quant_codes import Int4Codes, quantize_int4  # noqa: E402
from clover.model.loading.quant_formats import encode_gptq  # noqa: E402
from clover.model.loading.quantized import PackedWeight, QuantExperts  # noqa: E402
from clover.model.modeling import CloverForCausalLM  # noqa: E402


@pytest.fixture(autouse=True)
def _numba_kernels(monkeypatch):
    monkeypatch.setenv("CLOVER_CPU_KERNELS", "numba")  # whatever the run's environment chose
    # the float row-block layout (tests/test_cpu_native.py has the integer-dot one)
    monkeypatch.setenv("CLOVER_CPU_NATIVE", "off")


@pytest.mark.parametrize("shape", [(300, 64), (256, 2048), (17, 33)])
def test_bf16_gemv_matches_the_float_product(shape):
    gen = torch.Generator().manual_seed(sum(shape))
    w = torch.randn(*shape, generator=gen).bfloat16()
    x = torch.randn(1, shape[1], generator=gen).bfloat16()
    assert gemv.takes(x, w)
    want = (x.float() @ w.float().t()).bfloat16()
    torch.testing.assert_close(gemv.linear(x, w), want, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(gemv.linear(x[None], w), want[None], rtol=1e-2, atol=1e-2)  # [1, 1, K]


def test_gemv_takes_only_one_bf16_row_of_a_contiguous_matrix():
    w = torch.randn(64, 32).bfloat16()
    assert not gemv.takes(torch.randn(2, 32).bfloat16(), w)  # two rows: torch's mm is better there
    assert not gemv.takes(torch.randn(1, 32), w.float())
    assert not gemv.takes(torch.randn(1, 64).bfloat16(), w.t())


def test_kernels_leave_torch_thread_count_as_it_was():
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        gemv.linear(torch.randn(1, 64).bfloat16(), torch.randn(512, 64).bfloat16())
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_cpu_kernels_switch(monkeypatch):
    monkeypatch.setenv("CLOVER_CPU_KERNELS", "torch")
    assert not cpu.available()
    monkeypatch.setenv("CLOVER_CPU_KERNELS", "numba")
    assert cpu.available()
    monkeypatch.setenv("CLOVER_CPU_KERNELS", "fast")
    with pytest.raises(ValueError, match="CLOVER_CPU_KERNELS='fast'; expected auto, numba or torch"):
        cpu.available()


def test_bf16_checkpoint_takes_the_gemv_for_big_linears_only(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = CloverForCausalLM(tiny(vocab_size=512)).eval()
    save_checkpoint(model, tmp_path)
    net = load_checkpoint(tmp_path, dtype=torch.bfloat16).model
    assert type(net.lm_head) is CpuGemvLinear  # 512 outputs
    assert type(net.model.layers[0].mlp.shared_expert_gate) is torch.nn.Linear  # one output: torch's
    ids = torch.tensor([[5, 9, 3, 17]])
    cache = net.new_cache(1)
    with torch.no_grad():
        net.prefill(ids, cache)
        h = net.peek(torch.tensor([[7]]), cache)
        got = net.lm_head(h)
        want = F.linear(h, net.lm_head.weight)
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
    assert got.argmax(-1).item() == want.argmax(-1).item()
    monkeypatch.setenv("CLOVER_CPU_KERNELS", "torch")
    assert use_cpu_kernels(load_checkpoint(tmp_path, dtype=torch.bfloat16).model) == 0


def _delta_inputs(n: int, heads: int, dk: int, dv: int, seed: int):
    gen = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(n, 1, heads, dk, generator=gen), dim=-1) * dk**-0.5
    k = F.normalize(torch.randn(n, 1, heads, dk, generator=gen), dim=-1)
    v = torch.randn(n, 1, heads, dv, generator=gen)
    g = -torch.rand(n, 1, heads, generator=gen) * 3
    beta = torch.rand(n, 1, heads, generator=gen)
    state = torch.randn(n, heads, dk, dv, generator=gen)
    return q, k, v, g, beta, state


@pytest.mark.parametrize("n,heads,dk,dv", [(1, 4, 16, 16), (2, 3, 8, 24)])
def test_one_token_delta_rule_matches_the_definition_in_place(n, heads, dk, dv):
    q, k, v, g, beta, state = _delta_inputs(n, heads, dk, dv, seed=heads)
    o_ref, s_ref = recurrent_gated_delta_rule(q, k, v, g, beta, state.clone())
    mine = state.clone()
    o, s = delta_rule.step(q, k, v, g, beta, mine)
    assert s is mine  # updated in place: no new [H, dk, dv] tensor per token
    torch.testing.assert_close(o, o_ref, rtol=0, atol=1e-5)
    torch.testing.assert_close(s, s_ref, rtol=0, atol=1e-5)


def _decode(model, monkeypatch, kernels: str, steps=((7,), (11,), (13,))) -> tuple[list, list]:
    monkeypatch.setenv("CLOVER_CPU_KERNELS", kernels)
    cache = model.new_cache(1)
    peeks, states = [], []
    with torch.no_grad():
        model.prefill(torch.tensor([[5, 9, 3, 17, 2, 40, 41, 42, 43, 44]]), cache)  # 10: the chunked form
        for toks in steps:
            before = [c.state.clone() for c in cache.layers if hasattr(c, "state")]
            peeks.append(model.lm_head(model.peek(torch.tensor([list(toks)]), cache)))
            after = [c.state for c in cache.layers if hasattr(c, "state")]
            assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))  # peek commits nothing
            model.commit(torch.tensor([list(toks)]), cache)
        states = [c.state.clone() for c in cache.layers if hasattr(c, "state")]
    return peeks, states


def test_a_few_tokens_per_forward_decode_the_same_with_and_without_the_cpu_kernels(monkeypatch):
    """A verify check's causal forward of 2-8 tokens runs GDN token by token on the kernel."""
    torch.manual_seed(2)
    model = CloverForCausalLM(tiny()).eval()
    steps = ((7, 11, 13), (21, 22), tuple(range(50, 58)))
    fast, fast_states = _decode(model, monkeypatch, "numba", steps)
    slow, slow_states = _decode(model, monkeypatch, "torch", steps)
    for a, b in zip(fast + fast_states, slow + slow_states, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_model_decodes_the_same_with_and_without_the_cpu_kernels(monkeypatch):
    torch.manual_seed(1)
    model = CloverForCausalLM(tiny()).eval()
    fast, fast_states = _decode(model, monkeypatch, "numba")
    slow, slow_states = _decode(model, monkeypatch, "torch")
    for a, b in zip(fast + fast_states, slow + slow_states, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_one_token_moe_path_equals_the_routed_path():
    torch.manual_seed(3)
    e, h, i, k = 16, 64, 32, 4
    qg, qd = quantize_int4(torch.randn(e, 2 * i, h) * 0.1, 32), quantize_int4(torch.randn(e, h, i) * 0.1, 32)
    experts = QuantExperts(
        PackedWeight.int4(qg, torch.float32, "cpu"), PackedWeight.int4(qd, torch.float32, "cpu")
    )
    x, ids, weights = torch.randn(1, h), torch.randperm(e)[:k][None], torch.rand(1, k).softmax(-1)

    def expert(ex: int, xs):
        gate, up = experts.gate_up.mm(xs, ex).chunk(2, dim=-1)
        return experts.down.mm(F.silu(gate) * up, ex)

    torch.testing.assert_close(
        experts(x, ids, weights), routed_experts(x, ids, weights, expert), rtol=0, atol=1e-6
    )


# ---------------------------------------------------------------------- int4 experts (row blocks)


def _row_block_stack(q: Int4Codes, dtype) -> PackedWeight:
    count, rows, cols = q.shape
    stack = PackedWeight.empty_stack("int4", count, rows, cols, q.group_size, dtype, "cpu")
    for e in range(count):
        stack.put(e, Int4Codes(q.codes[e], q.scales[e], q.zeros[e], q.group_size))
    return stack


@pytest.mark.parametrize("rows,cols,group", [(128, 256, 128), (48, 64, 32)])
def test_row_blocks_from_gptq_words_equal_those_from_codes(rows, cols, group):
    q = quantize_int4(torch.randn(rows, cols), group)
    words = encode_gptq(q)["qweight"]
    assert torch.equal(cpu_int4.pack_kwords(words, group), cpu_int4.pack_codes(q.codes, group))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("m", [1, 3, 8, 20])  # 8 and more: dequantized once, then torch's matmul
def test_row_block_matmul_matches_the_dequantized_matrix(dtype, m):
    torch.manual_seed(m)
    q = quantize_int4(torch.randn(2, 64, 256), 64)
    stack = _row_block_stack(q, dtype)
    assert stack.kind == "int4r" and stack.dtype == dtype
    x = torch.randn(m, 256).to(dtype)
    want = x.float() @ q.dequantize()[1].t()
    tol = 1e-4 if dtype == torch.float32 else 3e-2  # bf16: the scales and the output rounded
    torch.testing.assert_close(stack.mm(x, 1).float(), want, rtol=tol, atol=tol * want.abs().max().item())
    full = q.dequantize()
    torch.testing.assert_close(stack.dequantize().float(), full, rtol=tol, atol=tol * full.abs().max().item())


@pytest.mark.parametrize("tokens", [1, 3, 32, 40])  # up to 32 one fused call; 40 the general path
def test_fused_moe_matches_the_reference(tokens):
    torch.manual_seed(tokens)
    e, h, i, k = 16, 64, 32, 4
    qg, qd = quantize_int4(torch.randn(e, 2 * i, h) * 0.1, 32), quantize_int4(torch.randn(e, h, i) * 0.1, 32)
    experts = QuantExperts(_row_block_stack(qg, torch.float32), _row_block_stack(qd, torch.float32))
    x = torch.randn(tokens, h)
    ids = torch.stack([torch.randperm(e)[:k] for _ in range(tokens)])
    ids[:, 0] = 3  # one expert shared by every token: a segment of many rows
    weights = torch.rand(tokens, k).softmax(-1)
    want = moe_experts(x, ids, weights, qg.dequantize(), qd.dequantize())
    torch.testing.assert_close(experts(x, ids, weights), want, rtol=0, atol=1e-5)


def test_router_in_the_moe_kernel_picks_what_torch_picks(tmp_path):
    torch.manual_seed(4)
    save_checkpoint(CloverForCausalLM(tiny()).eval(), tmp_path)
    net = load_checkpoint(tmp_path, quantize="int4", dtype=torch.bfloat16).model
    moe = net.model.layers[0].mlp
    assert moe.experts.gate_up.kind == "int4r"
    x = torch.randn(3, 64).bfloat16()
    with torch.no_grad():
        fused = moe(x)
        moe.experts.forward_routed = lambda *args: None  # the torch router, then the same experts
        routed = moe(x)
    torch.testing.assert_close(fused, routed, rtol=0, atol=2e-2)


def test_unknown_cpu_kernel_choice_is_one_line_at_load(tmp_path, monkeypatch):
    from clover.model.loading.load import CheckpointError

    save_checkpoint(CloverForCausalLM(tiny()).eval(), tmp_path)
    monkeypatch.setenv("CLOVER_CPU_KERNELS", "fast")
    with pytest.raises(CheckpointError, match="^CLOVER_CPU_KERNELS='fast'; expected auto, numba or torch$"):
        load_checkpoint(tmp_path)
