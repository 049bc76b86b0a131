"""Quantized checkpoints: GPTQ-Int4, AWQ and block-wise FP8 as published, and quantize-on-load
(int4 / int8), each against its dequantized reference; the int4 / int8 kernels against the codes; bad
checkpoints as one line."""

from __future__ import annotations

import json
import shutil

import pytest

torch = pytest.importorskip("torch")

from benchmarks.ckpt_write import model_tensors, write_shards  # noqa: E402
from benchmarks.quant_ckpt import dequantized_reference, quantization_config, quantize_tensors  # noqa: E402
from clover.kernels import cpu as cpu_kernels  # noqa: E402
from clover.kernels.reference.moe import moe_experts  # noqa: E402
from clover.model.config import tiny  # noqa: E402
from clover.model.decoder.generate import DecodeSettings, generate  # noqa: E402
from clover.model.loading.load import CheckpointError, load_checkpoint, save_checkpoint  # noqa: E402
from clover.model.loading.load_quant import quantizable  # noqa: E402
from clover.model.loading.quant_codes import quantize_int4, quantize_int8  # noqa: E402
from clover.model.loading.quant_formats import (  # noqa: E402
    QuantScheme,
    decode_awq,
    decode_gptq,
    encode_awq,
    encode_gptq,
)
from clover.model.loading.quant_pack import _cpu_layout_ok, int4_fits  # noqa: E402
from clover.model.loading.quantized import PackedWeight, QuantExperts, QuantLinear  # noqa: E402
from clover.model.modeling import CloverForCausalLM  # noqa: E402

# int4 expert stacks on CPU take the numba kernels' row-block layout where numba is installed
INT4_EXPERTS = "int4r" if cpu_kernels.available() else "int4"
IDS = torch.tensor([[5, 9, 3, 17, 2, 44, 8, 11, 90]])
GROUP, BLOCK = 32, (32, 16)  # tiny shapes: hidden 64, expert width 32


@pytest.fixture(autouse=True)
def _float_kernels(monkeypatch):
    """The loader's decoding is checked exactly, on the float int4 kernels; the integer-dot kernel
    (int8 activations, so not exact) has its own tests (tests/test_cpu_native.py)."""
    monkeypatch.setenv("CLOVER_CPU_NATIVE", "off")


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return CloverForCausalLM(tiny()).eval()


def _reference(model, state: dict) -> CloverForCausalLM:
    ref = CloverForCausalLM(model.config).eval()
    ref.load_state_dict(state)
    return ref


def _write_quantized(model, directory, method: str):
    tensors = list(model_tensors(model))
    out = quantize_tensors(tensors, method, GROUP, BLOCK)
    write_shards(out, directory, model.config, max_shard_bytes=200_000)  # several shards
    config = json.loads((directory / "config.json").read_text())
    config["quantization_config"] = quantization_config(method, GROUP, BLOCK)
    (directory / "config.json").write_text(json.dumps(config))
    return dequantized_reference(tensors, method, GROUP, BLOCK)


def _greedy(net, block: int) -> list[int]:
    settings = DecodeSettings(
        block_size=block, max_new_tokens=12, stop_token_ids=[], order="verify" if block > 1 else None
    )
    return generate(net, [IDS[0].tolist()], settings).tokens[0]


# ---------------------------------------------------------------------- kernels and codes


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (benchmarks/gpu_run.sh realsize)")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "shape,group", [((64, 128), 32), ((32, 256), 128), ((48, 64), 64), ((128, 512), 128)]
)
def test_int4_and_int8_kernels_match_their_codes(shape, group, dtype, device):
    if device == "cuda" and dtype == torch.float32:
        pytest.skip("tinygemm takes bf16 activations")
    torch.manual_seed(1)
    w, x = torch.randn(shape), torch.randn(5, shape[1]).to(dtype)
    q = quantize_int4(w, group)
    assert (q.dequantize() - w).abs().max() <= q.scales.max() / 2 + 1e-6  # round to nearest
    tol = dict(rtol=0, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=0.15)
    if int4_fits(*shape, group, device):
        y = QuantLinear(PackedWeight.int4(q, dtype, device))(x.to(device))
        torch.testing.assert_close(y.float().cpu(), x.float() @ q.dequantize().t(), **tol)
    codes, scales = quantize_int8(w)
    y8 = QuantLinear(PackedWeight.int8(codes, scales, dtype, device))(x.to(device))
    torch.testing.assert_close(y8.float().cpu(), x.float() @ (codes.float() * scales[:, None]).t(), **tol)


@CUDA
@pytest.mark.parametrize("method", ["gptq", "awq", "fp8"])
def test_quantized_checkpoint_on_cuda(tmp_path, method):
    """On a GPU (bf16 activations): int4 where tinygemm takes the shape (columns % 128), else dense."""
    torch.manual_seed(0)
    model = CloverForCausalLM(
        tiny(hidden_size=128, moe_intermediate_size=128, shared_expert_intermediate_size=128)
    ).eval()
    tensors = list(model_tensors(model))
    write_shards(quantize_tensors(tensors, method, 128, (128, 128)), tmp_path, model.config, 1 << 40)
    config = json.loads((tmp_path / "config.json").read_text())
    config["quantization_config"] = quantization_config(method, 128, (128, 128))
    (tmp_path / "config.json").write_text(json.dumps(config))
    net = load_checkpoint(tmp_path, device="cuda").model
    if method != "fp8":
        assert net.model.layers[0].mlp.experts.gate_up.kind == "int4"
    ref = _reference(model, dequantized_reference(tensors, method, 128, (128, 128))).to(
        "cuda", torch.bfloat16
    )
    with torch.no_grad():
        got, want = net(IDS.cuda()).float(), ref(IDS.cuda()).float()
    torch.testing.assert_close(got, want, rtol=0.05, atol=0.05)


@pytest.mark.parametrize("zero_offset", [0, 1])
def test_gptq_and_awq_codes_round_trip(zero_offset):
    q = quantize_int4(torch.randn(48, 96, generator=torch.Generator().manual_seed(2)), 32)
    g = decode_gptq(*encode_gptq(q, zero_offset).values(), QuantScheme("gptq", 32, zero_offset))
    a = decode_awq(*encode_awq(q).values(), QuantScheme("awq", 32))
    for got in (g, a):
        assert torch.equal(got.codes, q.codes) and torch.equal(got.zeros, q.zeros)
        torch.testing.assert_close(got.scales, q.scales.half().float())
    # GPTQ's words go to the CPU kernel's layout without unpacking: the same bytes as from the codes
    assert g.kwords is not None
    from_words, from_codes = (
        PackedWeight.int4(g, torch.float32, "cpu"),
        PackedWeight.int4(a, torch.float32, "cpu"),
    )
    assert torch.equal(from_words.data, from_codes.data)


def test_fast_cpu_packing_is_the_kernels_own_layout():
    """The vectorised packers write what `_convert_weight_to_int4pack_for_cpu` writes (this build's
    layout: blocks of 64 rows); a build with another layout falls back to the op, slowly."""
    if not _cpu_layout_ok():
        pytest.skip("this torch build packs int4 otherwise: the loader uses the op itself")
    from clover.model.loading.quant_pack import _cpu_layout, _cpu_layout_from_kwords

    q = quantize_int4(torch.randn(192, 256, generator=torch.Generator().manual_seed(3)), 128)
    want = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.codes.to(torch.int32), 1)
    words = encode_gptq(q)["qweight"]
    assert torch.equal(_cpu_layout(q.codes), want) and torch.equal(_cpu_layout_from_kwords(words), want)


@pytest.mark.parametrize("width", [1, 2, 4, 8, 16, 32])
def test_quantized_experts_read_only_touched_experts_and_match_dense(width):
    torch.manual_seed(width)
    e, h, i, k = 16, 64, 32, 4
    gate_up, down = torch.randn(e, 2 * i, h) * 0.1, torch.randn(e, h, i) * 0.1
    qg, qd = quantize_int4(gate_up, 32), quantize_int4(down, 32)
    experts = QuantExperts(
        PackedWeight.int4(qg, torch.float32, "cpu"), PackedWeight.int4(qd, torch.float32, "cpu")
    )
    x = torch.randn(width, h)
    ids = torch.stack([torch.randperm(e)[:k] for _ in range(width)])
    weights = torch.rand(width, k).softmax(-1)
    seen = []
    original = experts.gate_up.mm
    experts.gate_up.mm = lambda xs, ex=None: seen.append(ex) or original(xs, ex)
    got = experts(x, ids, weights)
    assert sorted(seen) == sorted(set(ids.flatten().tolist()))  # each touched expert once, no other
    want = moe_experts(x, ids, weights, qg.dequantize(), qd.dequantize())
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


# ---------------------------------------------------------------------- published formats


@pytest.mark.parametrize("method", ["gptq", "awq", "fp8"])
def test_quantized_checkpoint_matches_its_dequantized_reference(model, tmp_path, method):
    state = _write_quantized(model, tmp_path, method)
    net = load_checkpoint(tmp_path).model
    layer = net.model.layers[0]
    if method == "fp8":  # no int4 / int8 kernel for fp8 on CPU: dequantized block by block, dense
        assert isinstance(layer.linear_attn.in_proj_qkv, torch.nn.Linear)
    else:  # runs on the int4 kernel, as stored
        assert isinstance(layer.linear_attn.in_proj_qkv, QuantLinear) and isinstance(
            layer.mlp.experts, QuantExperts
        )
        assert (
            layer.mlp.experts.gate_up.kind == INT4_EXPERTS
            and layer.mlp.shared_expert.down_proj.qweight.kind == "int4"
        )
        assert isinstance(net.lm_head, torch.nn.Linear)  # lm_head stays bf16, as published
    ref = _reference(model, state)
    with torch.no_grad():
        torch.testing.assert_close(net(IDS), ref(IDS), rtol=0, atol=2e-5)
    assert _greedy(net, 1) == _greedy(ref, 1) and _greedy(net, 4) == _greedy(ref, 4)


def test_fp8_per_expert_layout_loads_like_fused(model, tmp_path):
    """Qwen3-FP8 names: mlp.experts.I.gate_proj.weight (+ weight_scale_inv) under model.language_model."""
    from benchmarks.quant_ckpt import hf_name
    from clover.model.loading.quant_formats import encode_fp8

    tensors = dict(quantize_tensors(model_tensors(model), "fp8", GROUP, BLOCK))
    out, ref_state = {}, dict(dequantized_reference(model_tensors(model), "fp8", GROUP, BLOCK))
    for name, t in tensors.items():
        if name.endswith("_scale_inv") and ".experts." in name:
            continue
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            dense = model.state_dict()[name]
            base = hf_name(name).rsplit(".", 1)[0]
            parts = ("gate_proj", "up_proj") if name.endswith("gate_up_proj") else ("down_proj",)
            deq = []
            for i in range(dense.shape[0]):
                for part, piece in zip(parts, dense[i].chunk(len(parts)), strict=True):
                    w, s = encode_fp8(piece, BLOCK)
                    out[f"{base}.{i}.{part}.weight"], out[f"{base}.{i}.{part}.weight_scale_inv"] = w, s
                    deq.append(
                        w.float()
                        * s.repeat_interleave(BLOCK[0], 0)[: w.shape[0]].repeat_interleave(BLOCK[1], 1)[
                            :, : w.shape[1]
                        ]
                    )
            ref_state[name] = torch.stack(
                [torch.cat(deq[j : j + len(parts)]) for j in range(0, len(deq), len(parts))]
            )
            continue
        out[hf_name(name)] = t
    write_shards(out.items(), tmp_path, model.config, max_shard_bytes=1 << 40)
    config = json.loads((tmp_path / "config.json").read_text())
    config["quantization_config"] = quantization_config("fp8", block=BLOCK)
    (tmp_path / "config.json").write_text(json.dumps(config))
    net = load_checkpoint(tmp_path).model
    with torch.no_grad():
        torch.testing.assert_close(net(IDS), _reference(model, ref_state)(IDS), rtol=0, atol=2e-5)


def _rtn_reference(model, mode: str, source: dict | None = None) -> dict:
    """What quantize-on-load must compute: each quantizable matrix rounded to nearest (int4 in the
    largest group of 128, 64, 32 that divides its columns; int8 per row), the rest as is."""
    out = {}
    for name, t in (source or model.state_dict()).items():
        if not quantizable(name, model):
            out[name] = t
        elif mode == "int4":
            out[name] = quantize_int4(t, next(g for g in (128, 64, 32) if t.shape[-1] % g == 0)).dequantize()
        else:
            codes, scales = quantize_int8(t)
            out[name] = codes.float() * scales[..., None]
    return out


@pytest.mark.parametrize("mode", ["int4", "int8"])
@pytest.mark.parametrize("stored", [torch.float32, torch.bfloat16])
def test_quantize_on_load_matches_round_to_nearest(model, tmp_path, mode, stored):
    tensors = [(n, t.to(stored)) for n, t in model_tensors(model)]
    write_shards(tensors, tmp_path, model.config, max_shard_bytes=200_000)
    net = load_checkpoint(tmp_path, quantize=mode).model
    layer = net.model.layers[1]
    assert isinstance(layer.self_attn.q_proj, QuantLinear) and layer.self_attn.q_proj.qweight.kind == mode
    assert layer.mlp.experts.down.kind == (INT4_EXPERTS if mode == "int4" else mode)
    assert isinstance(net.lm_head, QuantLinear)
    assert isinstance(layer.mlp.gate, torch.nn.Linear)  # the router stays dense
    ref = _reference(model, _rtn_reference(model, mode, {n: t.float() for n, t in tensors}))
    with torch.no_grad():
        torch.testing.assert_close(net(IDS), ref(IDS), rtol=0, atol=2e-5)
    assert _greedy(net, 1) == _greedy(ref, 1)


def test_fp8_checkpoint_quantized_to_int4_on_load(model, tmp_path):
    state = _write_quantized(model, tmp_path, "fp8")
    net = load_checkpoint(tmp_path, quantize="int4").model
    assert net.model.layers[0].mlp.experts.gate_up.kind == INT4_EXPERTS
    ref = _reference(model, _rtn_reference(model, "int4", state))
    with torch.no_grad():
        torch.testing.assert_close(net(IDS), ref(IDS), rtol=0, atol=2e-5)


def test_gptq_is_not_requantized_by_quantize_int8(model, tmp_path):
    state = _write_quantized(model, tmp_path, "gptq")
    net = load_checkpoint(tmp_path, quantize="int8").model
    assert net.model.layers[0].mlp.experts.gate_up.kind == INT4_EXPERTS  # as stored, not requantized
    assert net.lm_head.qweight.kind == "int8"  # the floating-point rest is quantized on load
    ref = _reference(
        model,
        {
            n: (_rtn_reference(model, "int8", state)[n] if n == "lm_head.weight" else t)
            for n, t in state.items()
        },
    )
    with torch.no_grad():
        torch.testing.assert_close(net(IDS), ref(IDS), rtol=0, atol=2e-5)


def test_bf16_quantized_model_decodes_both_orders(model, tmp_path):
    save_checkpoint(model, tmp_path)
    net = load_checkpoint(tmp_path, quantize="int4", dtype=torch.bfloat16).model
    assert net.dtype == torch.bfloat16
    assert len(_greedy(net, 1)) == 12 and len(_greedy(net, 4)) == 12


# ---------------------------------------------------------------------- bad checkpoints: one line


def _one_line(exc: pytest.ExceptionInfo, *words: str) -> None:
    message = str(exc.value)
    assert "\n" not in message and all(w in message for w in words), message


def test_integer_weights_are_refused_not_cast(model, tmp_path):
    from safetensors.torch import load_file, save_file

    save_checkpoint(model, tmp_path)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    tensors["model.norm.weight"] = torch.zeros_like(tensors["model.norm.weight"], dtype=torch.int32)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path)
    _one_line(info, "model.norm.weight", "int32", "quantization_config")


def test_quantized_tensors_without_quantization_config(model, tmp_path):
    _write_quantized(model, tmp_path, "gptq")
    config = json.loads((tmp_path / "config.json").read_text())
    del config["quantization_config"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path)
    _one_line(info, "qweight", "no quantization_config")


@pytest.mark.parametrize(
    "qc,words",
    [
        ({"quant_method": "gptq", "bits": 8, "group_size": 32}, ("8 bits",)),
        ({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True}, ("act-order",)),
        ({"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemv"}, ("gemv",)),
        ({"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": [32, 16]}, ("static",)),
        ({"quant_method": "fp8", "activation_scheme": "dynamic"}, ("weight_block_size",)),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, ("bitsandbytes",)),
        ("int4", ("JSON object",)),
    ],
)
def test_unrunnable_quantization_configs(model, tmp_path, qc, words):
    save_checkpoint(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "quantization_config": qc}))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path)
    _one_line(info, "quantization_config", *words)


def test_gptq_act_order_g_idx_is_refused(model, tmp_path):
    _write_quantized(model, tmp_path, "gptq")
    from safetensors.torch import load_file, save_file

    for shard in tmp_path.glob("*.safetensors"):
        tensors = load_file(str(shard))
        for name in tensors:
            if name.endswith("g_idx"):
                tensors[name] = tensors[name].flip(0).contiguous()  # act-order: groups out of order
        save_file(tensors, str(shard))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path)
    _one_line(info, "act-order")


def test_unknown_torch_dtype(model, tmp_path):
    save_checkpoint(model, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "torch_dtype": "bfloat17"}))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path)
    _one_line(info, "torch_dtype", "bfloat17")


def test_quantize_mode_must_be_known(model, tmp_path):
    save_checkpoint(model, tmp_path)
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path, quantize="int3")
    _one_line(info, "int3")


def _small_vocab_checkpoint(tmp_path):
    """The tiny test checkpoint's 300-token tokenizer beside a model with 100 embedding rows."""
    from tests.tiny_checkpoint import tiny_checkpoint_dir

    d = tmp_path / "ckpt"
    shutil.copytree(tiny_checkpoint_dir(), d)
    config = json.loads((d / "config.json").read_text())
    fields = {
        k: config[k] for k in ("mask_token_id", "eos_token_ids", "pad_token_id", "max_position_embeddings")
    }
    torch.manual_seed(0)
    save_checkpoint(CloverForCausalLM(tiny(vocab_size=100, **fields)).eval(), d)
    return d


def test_tokenizer_beyond_vocab_size_is_a_one_line_model_error(tmp_path):
    from clover.backends.local import LocalCloverModel
    from clover.core.stops import ModelError
    from clover.settings import Settings

    d = _small_vocab_checkpoint(tmp_path)
    with pytest.raises(ModelError) as info:
        LocalCloverModel(Settings(model=str(d)))
    _one_line(info, "tokenizer.json", "ids up to 29", "vocab_size 100")


@pytest.mark.slow
def test_tokenizer_beyond_vocab_size_is_one_line_exit_2(tmp_path):
    """A tokenizer with ids the embedding has no row for: before, an IndexError at the first such
    token mid-conversation; now one line and exit 2 from `clover chat -p` before anything runs."""
    from tests.clihelp import isolated_env, run_clover

    d, repo = _small_vocab_checkpoint(tmp_path), tmp_path / "repo"
    repo.mkdir()
    proc = run_clover(
        "chat",
        "--model",
        str(d),
        "-p",
        "hi",
        "--repo",
        str(repo),
        cwd=repo,
        env={**isolated_env(tmp_path), "OMP_NUM_THREADS": "1"},
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "beyond the model's vocab_size" in lines[0] and "Traceback" not in proc.stderr
