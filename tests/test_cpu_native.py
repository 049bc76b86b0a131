"""The integer-dot int4 kernel (kernels/cpu/native.py, int4_dot.c): its products against the same
arithmetic written out in torch (int8 activations per 32 columns, exact integer sums), against the
float product, in a MoE layer's one call, in a loaded model; and the fallback to the float layout
when it cannot be built or is turned off."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("numba")

import torch.nn.functional as F  # noqa: E402

from clover.kernels.cpu import native  # noqa: E402
from clover.kernels.reference.moe import moe_experts, routed_experts  # noqa: E402
from clover.model.config import tiny  # noqa: E402
from clover.model.loading.load import CheckpointError, load_checkpoint, save_checkpoint  # noqa: E402
from clover.model.loading.quant_codes import Int4Codes, quantize_int4  # noqa: E402
from clover.model.loading.quant_formats import encode_gptq  # noqa: E402
from clover.model.loading.quantized import PackedWeight, QuantExperts  # noqa: E402
from clover.model.modeling import CloverForCausalLM  # noqa: E402

needs_kernel = pytest.mark.skipif(
    not native.available(), reason="no C compiler or no AVX-512 VNNI here: the float kernels run"
)


@pytest.fixture(autouse=True)
def _kernels_on(monkeypatch):
    monkeypatch.setenv("CLOVER_CPU_KERNELS", "numba")
    monkeypatch.delenv("CLOVER_CPU_NATIVE", raising=False)


def _emulated(x: torch.Tensor, q: Int4Codes, dtype: torch.dtype) -> torch.Tensor:
    """What the kernel computes, in float64: x rounded to int8 per 32 columns (scale amax / 127),
    exact integer sums with the codes, scaled; the minimum's term on x's own group sums."""
    n, k = q.codes.shape
    g = q.group_size
    d = x.view(-1, k // 32, 32).abs().amax(-1) / 127
    xq = torch.round(x.view(-1, k // 32, 32) / torch.where(d > 0, d, 1)[..., None])
    s, mn = q.scales, -q.zeros * q.scales
    if dtype == torch.bfloat16:  # the layout keeps scale and minimum in bf16 for bf16 models
        s, mn = s.bfloat16().float(), mn.bfloat16().float()
    ints = torch.einsum("mbj,nbj->mnb", xq.double(), q.codes.double().view(n, k // 32, 32))
    per_block = s.double().repeat_interleave(g // 32, dim=1)  # [N, K/32]
    dot = (ints * per_block[None] * d.double()[:, None, :]).sum(-1)
    return dot + x.double().view(-1, k // g, g).sum(-1) @ mn.double().t()


@needs_kernel
@pytest.mark.parametrize("sm_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "n,k,group,m",
    [
        (16, 64, 32, 1),
        (64, 256, 128, 2),
        (48, 256, 64, 3),
        (32, 512, 256, 4),
        (16, 128, 128, 9),
        (32, 128, 32, 300),
    ],
)
def test_kernel_equals_the_int8_arithmetic_written_out(n, k, group, m, sm_dtype):
    gen = torch.Generator().manual_seed(n + k + m)
    q = quantize_int4(torch.randn(n, k, generator=gen), group)
    x = torch.randn(m, k, generator=gen)
    x[0, :32] = 0  # an all-zero block of activations: scale 0, no division by it
    sm = native.pack_scales(q.scales, q.zeros, sm_dtype)
    want = _emulated(x, q, sm_dtype).float()
    for data in (native.pack_codes(q.codes), native.pack_kwords(encode_gptq(q)["qweight"])):
        got = native.matmul(x, data, sm, group)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * want.abs().max().item())


def test_layout_from_gptq_words_equals_the_layout_from_codes():
    q = quantize_int4(torch.randn(48, 256), 128)
    assert torch.equal(native.pack_kwords(encode_gptq(q)["qweight"]), native.pack_codes(q.codes))


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_product_is_the_float_product_up_to_the_activations_rounding(dtype):
    torch.manual_seed(0)
    q = quantize_int4(torch.randn(2, 64, 256), 64)
    stack = PackedWeight.empty_stack("int4", 2, 64, 256, 64, dtype, "cpu")
    for e in range(2):
        stack.put(e, Int4Codes(q.codes[e], q.scales[e], q.zeros[e], 64))
    assert stack.kind == "int4v" and stack.dtype == dtype
    x = torch.randn(5, 256).to(dtype)
    want = x.float() @ q.dequantize()[1].t()
    # int8 activations per 32 columns: ~0.4% of a block's largest value per element
    torch.testing.assert_close(stack.mm(x, 1).float(), want, rtol=0, atol=0.03 * want.abs().max().item())
    single = PackedWeight.int4(Int4Codes(q.codes[1], q.scales[1], q.zeros[1], 64), dtype, "cpu")
    assert single.kind == "int4v"
    torch.testing.assert_close(single.mm(x), stack.mm(x, 1), rtol=0, atol=0)


@needs_kernel
@pytest.mark.parametrize("tokens", [1, 4, 32, 40])  # up to 32 one call; 40 the general path
def test_moe_layer_in_one_call_matches_the_reference(tokens):
    torch.manual_seed(tokens)
    e, h, i, k = 16, 64, 32, 4
    qg, qd = quantize_int4(torch.randn(e, 2 * i, h) * 0.1, 32), quantize_int4(torch.randn(e, h, i) * 0.1, 32)

    def stack(q):
        s = PackedWeight.empty_stack("int4", *q.shape, 32, torch.float32, "cpu")
        for ex in range(q.shape[0]):
            s.put(ex, Int4Codes(q.codes[ex], q.scales[ex], q.zeros[ex], 32))
        return s

    experts = QuantExperts(stack(qg), stack(qd))
    assert experts.gate_up.kind == "int4v"
    x = torch.randn(tokens, h)
    ids = torch.stack([torch.randperm(e)[:k] for _ in range(tokens)])
    ids[:, 0] = 3  # one expert shared by every token: a run of many rows
    weights = torch.rand(tokens, k).softmax(-1)
    got = experts(x, ids, weights)

    def expert(ex: int, xs):  # the same products one matrix at a time: the same arithmetic
        gate, up = experts.gate_up.mm(xs, ex).chunk(2, dim=-1)
        return experts.down.mm(F.silu(gate) * up, ex)

    same = routed_experts(x, ids, weights, expert)
    torch.testing.assert_close(got, same, rtol=0, atol=1e-5 * same.abs().max().item())
    # against the float experts: two int8 roundings (the input, the SwiGLU's output)
    want = moe_experts(x, ids, weights, qg.dequantize(), qd.dequantize())
    torch.testing.assert_close(got, want, rtol=0, atol=0.05 * want.abs().max().item())


@needs_kernel
def test_loaded_model_runs_its_int4_matrices_on_the_kernel(monkeypatch):
    from benchmarks.write_realsize import embedded_dir

    net = load_checkpoint(embedded_dir(), quantize="int4", dtype=torch.float32).model
    moe = net.model.layers[0].mlp
    assert moe.experts.gate_up.kind == "int4v"
    assert moe.shared_expert.gate_proj.qweight.kind == "int4v"
    monkeypatch.setenv("CLOVER_CPU_NATIVE", "off")  # the same int4 weights on the float kernels
    ref_net = load_checkpoint(embedded_dir(), quantize="int4", dtype=torch.float32).model
    assert ref_net.model.layers[0].mlp.experts.gate_up.kind == "int4r"
    ids = torch.randint(0, net.config.vocab_size, (1, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got, ref = net(ids).float(), ref_net(ids).float()
    # the trained embedded model: the activations' int8 rounding moves its logits by ~9% on average
    # (measured) and keeps 95% of the argmaxes (a random tiny model is chaotic: a routing flip)
    assert (got - ref).abs().mean() < 0.15 * ref.abs().mean()
    assert (got.argmax(-1) == ref.argmax(-1)).float().mean() >= 0.9


def test_turned_off_the_loader_keeps_the_float_layout(monkeypatch):
    monkeypatch.setenv("CLOVER_CPU_NATIVE", "off")
    assert not native.available()
    stack = PackedWeight.empty_stack("int4", 2, 64, 256, 64, torch.bfloat16, "cpu")
    assert stack.kind == "int4r"


def test_without_a_compiler_the_loader_keeps_the_float_layout(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("CLOVER_CACHE_DIR", str(tmp_path / "cache"))
    native._library.cache_clear()
    try:
        assert not native.available() and native.simd() == 0
        q = quantize_int4(torch.randn(64, 256), 64)
        stack = PackedWeight.empty_stack("int4", 1, 64, 256, 64, torch.float32, "cpu")
        assert stack.kind == "int4r"
        stack.put(0, q)
        x = torch.randn(3, 256)
        torch.testing.assert_close(stack.mm(x, 0), x @ q.dequantize().t(), rtol=1e-4, atol=1e-3)
    finally:
        native._library.cache_clear()


def test_a_failing_compiler_builds_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", "false")  # exits 1 without writing the library
    monkeypatch.setenv("CLOVER_CACHE_DIR", str(tmp_path / "cache"))
    native._library.cache_clear()
    try:
        assert not native.available()
        assert not list((tmp_path / "cache").rglob("*.so"))
    finally:
        native._library.cache_clear()


def test_unknown_native_choice_is_one_line_at_load(tmp_path, monkeypatch):
    save_checkpoint(CloverForCausalLM(tiny()).eval(), tmp_path)
    monkeypatch.setenv("CLOVER_CPU_NATIVE", "yes")
    with pytest.raises(CheckpointError, match="^CLOVER_CPU_NATIVE='yes'; expected auto or off$"):
        load_checkpoint(tmp_path, quantize="int4")


needs_bf16 = pytest.mark.skipif(not native.bf16_available(), reason="no AVX-512 BF16 here")


@needs_bf16
@pytest.mark.parametrize("n,k", [(300, 64), (17, 2048), (256, 96)])
@pytest.mark.parametrize("m", [1, 2, 4, 5, 6])  # from 5 rows of x two weight rows at a time
def test_bf16_kernel_matches_the_float_product(n, k, m):
    gen = torch.Generator().manual_seed(n + k + m)
    w = torch.randn(n, k, generator=gen).bfloat16()
    x = torch.randn(m, k, generator=gen).bfloat16()
    assert native.bf16_takes(x, w)
    want = (x.float() @ w.float().t()).bfloat16()
    torch.testing.assert_close(native.bf16_linear(x, w), want, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(native.bf16_linear(x[None], w), want[None], rtol=1e-2, atol=1e-2)


def test_bf16_kernel_takes_only_what_it_can_run():
    w = torch.randn(64, 64).bfloat16()
    assert not native.bf16_takes(torch.randn(7, 64).bfloat16(), w)  # torch's mm is as fast there
    assert not native.bf16_takes(torch.randn(1, 64), w.float())
    assert not native.bf16_takes(torch.randn(1, 48).bfloat16(), torch.randn(64, 48).bfloat16())  # K % 32


@needs_bf16
def test_lm_head_at_verify_widths_takes_the_bf16_kernel(monkeypatch):
    from clover.model.loading.cpu_linear import CpuGemvLinear

    layer = torch.nn.Linear(64, 512, bias=False).bfloat16()
    layer.__class__ = CpuGemvLinear
    x = torch.randn(1, 4, 64).bfloat16()
    calls = []
    monkeypatch.setattr(
        native, "bf16_linear", lambda *args: calls.append(1) or torch.nn.functional.linear(*args)
    )
    with torch.no_grad():
        layer(x)
    assert calls == [1]


@needs_kernel
def test_shared_expert_in_the_moe_call_matches_the_layer_without_it(tmp_path):
    from clover.model.loading.cpu_fusion import fuse_shared_experts

    torch.manual_seed(5)
    save_checkpoint(CloverForCausalLM(tiny()).eval(), tmp_path)
    net = load_checkpoint(tmp_path, quantize="int4", dtype=torch.bfloat16).model
    moe = net.model.layers[0].mlp
    assert moe.experts.shared is not None  # joined at load
    x = torch.randn(3, 64).bfloat16()
    with torch.no_grad():
        joined = moe(x)
        shared = moe.experts.shared
        moe.experts.shared = None  # the routed call, then the shared expert's own modules
        apart = moe(x)
        moe.experts.shared = shared
    torch.testing.assert_close(joined.float(), apart.float(), rtol=0, atol=3e-2 * apart.abs().max().item())
    # the shared expert's modules read the joined stacks' bytes (one copy of the weights)
    gp = moe.shared_expert.gate_proj.qweight
    assert gp.data.data_ptr() == shared[0].data.data_ptr()
    assert fuse_shared_experts(net) == len(net.model.layers)  # again: idempotent in effect
