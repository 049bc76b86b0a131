"""model/loading/load.py: Clover's own checkpoints round-trip; Qwen3.5-style ones (nested config, prefixed
names, per-expert weights, no block-mode parameters, mtp heads) load and give the same network."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from safetensors.torch import save_file

from clover.model.config import tiny
from clover.model.loading.load import CheckpointError, load_checkpoint, save_checkpoint
from clover.model.modeling import CloverForCausalLM


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return CloverForCausalLM(tiny()).eval()


IDS = torch.tensor([[5, 9, 3, 17, 2, 44, 8]])


def test_round_trip(model, tmp_path):
    save_checkpoint(model, tmp_path)
    net, config, template = load_checkpoint(tmp_path)
    assert config == model.config and template is None
    with torch.no_grad():
        torch.testing.assert_close(net(IDS), model(IDS))


def test_qwen35_layout_loads(model, tmp_path):
    cfg = model.config
    sd = {}
    for name, t in model.state_dict().items():
        if name.endswith(("block_logit_scale", "memory_logit", "block_size_calibration")):
            continue  # an autoregressive base has no block-mode parameters
        if name.endswith("experts.gate_up_proj"):
            base = "model.language_model." + name[len("model.") : -len("gate_up_proj")]
            for i in range(cfg.num_experts):
                gate, up = t[i].chunk(2, dim=0)
                sd[f"{base}{i}.gate_proj.weight"] = gate.clone()
                sd[f"{base}{i}.up_proj.weight"] = up.clone()
            continue
        if name.endswith("experts.down_proj"):
            base = "model.language_model." + name[len("model.") : -len("down_proj")]
            for i in range(cfg.num_experts):
                sd[f"{base}{i}.down_proj.weight"] = t[i].clone()
            continue
        sd[name.replace("model.", "model.language_model.", 1) if name.startswith("model.") else name] = (
            t.clone()
        )
    sd["mtp.fc.weight"] = torch.zeros(2, 2)
    save_file(sd, str(tmp_path / "model.safetensors"))
    text = {k: v for k, v in cfg.to_dict().items() if k not in ("model_type", "architectures", "block_size")}
    text["rope_parameters"] = {"rope_theta": text.pop("rope_theta"), "partial_rotary_factor": 0.5}
    hf = {"model_type": "qwen3_5_moe", "text_config": text, "vision_config": {}}
    (tmp_path / "config.json").write_text(json.dumps(hf))
    (tmp_path / "chat_template.jinja").write_text("{{ messages }}")

    net, config, template = load_checkpoint(tmp_path)
    assert config.block_size == 1 and template == "{{ messages }}"
    with torch.no_grad():
        torch.testing.assert_close(net(IDS), model(IDS))
    gdn = net.model.layers[0].linear_attn
    assert (
        float(gdn.memory_logit.detach().abs().sum()) == 0
        and float(gdn.block_size_calibration.detach().mean()) == 1
    )


def test_bad_checkpoints_are_one_line_errors(model, tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope")
    save_checkpoint(model, tmp_path)
    bigger = tiny(hidden_size=32)
    bigger.save(tmp_path / "config.json")
    with pytest.raises(CheckpointError, match="shape"):
        load_checkpoint(tmp_path)


def test_truncated_file_is_one_line_naming_it(model, tmp_path):
    save_checkpoint(model, tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path)
    assert "model.safetensors" in str(info.value) and "\n" not in str(info.value)


def test_missing_tensor_is_named(model, tmp_path):
    save_checkpoint(model, tmp_path)
    from safetensors.torch import load_file

    tensors = load_file(str(tmp_path / "model.safetensors"))
    dropped = "model.norm.weight"
    del tensors[dropped]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(tmp_path)
    assert dropped in str(info.value) and "\n" not in str(info.value)


# ---------------------------------------------------------------- streaming loader

from benchmarks.ckpt_write import in_layout, model_tensors, write_shards  # noqa: E402
from clover.model.loading.load import default_dtype, split_ba, split_qkvz  # noqa: E402


def _sharded(model, directory, layout, shards=4, dtype=torch.bfloat16):
    tensors = [(n, t.to(dtype)) for n, t in in_layout(model_tensors(model), layout)]
    total = sum(t.numel() * t.element_size() for _, t in tensors)
    files = write_shards(tensors, directory, model.config, max_shard_bytes=total // shards + 1)
    assert len(files) >= shards - 1
    return directory


@pytest.mark.parametrize("layout", ["fused", "per_expert"])
def test_streamed_sharded_bf16_equals_the_model_in_bf16(model, tmp_path, layout):
    # Every tensor, whichever shard and expert layout it came from, is the model's own cast to bf16;
    # and the network computes what the same weights saved as one file compute.
    d = _sharded(model, tmp_path / "sharded", layout)
    loaded = load_checkpoint(d, dtype=torch.bfloat16).model
    got, want = loaded.state_dict(), copy.deepcopy(model).to(torch.bfloat16).state_dict()
    assert got.keys() == want.keys()
    for name, t in want.items():
        assert got[name].dtype == torch.bfloat16 and torch.equal(got[name], t), name
    save_checkpoint(model, tmp_path / "one")
    single = load_checkpoint(tmp_path / "one", dtype=torch.bfloat16).model
    with torch.no_grad():
        torch.testing.assert_close(loaded(IDS), single(IDS))


def test_default_dtype_by_device_and_size():
    from clover.model.config import clover_35b_a3b

    assert default_dtype(tiny(), "cpu") == torch.float32
    assert default_dtype(clover_35b_a3b(), "cpu") == torch.bfloat16  # 34.7B: fp32 would need 139 GB
    assert default_dtype(tiny(), "cuda:0") == torch.bfloat16


def _write_config(directory, **changes):
    cfg = json.loads((directory / "config.json").read_text())
    cfg.update(changes)
    (directory / "config.json").write_text(json.dumps(cfg))


@pytest.mark.parametrize(
    "rope, message",
    [
        ({"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}, "rope type 'yarn' is not supported"),
        ({"type": "linear", "factor": 2.0}, "rope type 'linear' is not supported"),
        ({"rope_type": "default", "factor": 2.0}, "scaling factor 2.0 is not supported"),
    ],
)
def test_unsupported_rope_is_one_line(model, tmp_path, rope, message):
    save_checkpoint(model, tmp_path)
    _write_config(tmp_path, rope_scaling=rope)
    with pytest.raises(CheckpointError, match=message) as info:
        load_checkpoint(tmp_path)
    assert "\n" not in str(info.value)


def test_mrope_sections_are_plain_rope_for_text(model, tmp_path):
    save_checkpoint(model, tmp_path)
    _write_config(
        tmp_path,
        rope_parameters={
            "rope_type": "default",
            "mrope_section": [2, 1, 1],
            "mrope_interleaved": True,
            "rope_theta": 10_000.0,
        },
    )
    net = load_checkpoint(tmp_path).model
    with torch.no_grad():
        torch.testing.assert_close(net(IDS), model(IDS))


def test_unknown_tensor_is_one_line(model, tmp_path):
    save_checkpoint(model, tmp_path)
    from safetensors.torch import load_file

    tensors = load_file(str(tmp_path / "model.safetensors"))
    tensors["model.layers.0.mlp.adapter.weight"] = torch.zeros(2, 2)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(
        CheckpointError, match="1 tensor.* does not know, e.g. model.layers.0.mlp.adapter.weight"
    ):
        load_checkpoint(tmp_path)


def test_text_config_precedence():
    from clover.model.config import CloverConfig

    hf = {
        "model_type": "qwen3_5_moe",
        "dtype": "bfloat16",
        "tie_word_embeddings": False,
        "hidden_size": 999,  # an outer architecture key: the text config's value wins
        "text_config": {**tiny().to_dict(), "dtype": "float32", "tie_word_embeddings": True},
    }
    for key in ("model_type", "architectures", "torch_dtype"):
        del hf["text_config"][key]
    cfg = CloverConfig.from_dict(hf)
    assert cfg.hidden_size == tiny().hidden_size
    assert cfg.torch_dtype == "bfloat16" and cfg.tie_word_embeddings is False


def test_dense_qwen3_next_layers_are_refused(model, tmp_path):
    save_checkpoint(model, tmp_path)
    _write_config(tmp_path, mlp_only_layers=[0])
    with pytest.raises(CheckpointError, match="dense MLP layers"):
        load_checkpoint(tmp_path)


def _hf_qwen3_next_ordering(mixed_qkvz, mixed_ba, nk, nv, dk, dv):
    """transformers' Qwen3NextGatedDeltaNet.fix_query_key_value_ordering, restated for the test."""
    r = nv // nk
    qkvz = mixed_qkvz.view(*mixed_qkvz.shape[:-1], nk, 2 * dk + 2 * r * dv)
    ba = mixed_ba.view(*mixed_ba.shape[:-1], nk, 2 * r)
    q, k, v, z = torch.split(qkvz, [dk, dk, r * dv, r * dv], dim=-1)
    b, a = torch.split(ba, [r, r], dim=-1)
    lead = mixed_qkvz.shape[:-1]
    return (
        q.reshape(*lead, -1),
        k.reshape(*lead, -1),
        v.reshape(*lead, -1),
        z.reshape(*lead, -1),
        b.reshape(*lead, nv),
        a.reshape(*lead, nv),
    )


def _fuse_qwen3_next(gdn, cfg):
    """Our four GDN projections -> Qwen3-Next's in_proj_qkvz / in_proj_ba (rows grouped per key head)."""
    nk, dk = cfg.linear_num_key_heads, cfg.linear_key_head_dim
    rv = cfg.linear_num_value_heads // nk * cfg.linear_value_head_dim
    r = cfg.linear_num_value_heads // nk
    w = gdn.in_proj_qkv.weight.detach()
    q, k, v = w.split([nk * dk, nk * dk, nk * rv])
    z = gdn.in_proj_z.weight.detach()
    rows = [
        torch.cat(
            [
                q[g * dk : (g + 1) * dk],
                k[g * dk : (g + 1) * dk],
                v[g * rv : (g + 1) * rv],
                z[g * rv : (g + 1) * rv],
            ]
        )
        for g in range(nk)
    ]
    b, a = gdn.in_proj_b.weight.detach(), gdn.in_proj_a.weight.detach()
    ba = [torch.cat([b[g * r : (g + 1) * r], a[g * r : (g + 1) * r]]) for g in range(nk)]
    return torch.cat(rows), torch.cat(ba)


def test_qwen3_next_fused_projections_load(model, tmp_path):
    cfg = model.config
    sd = {n: t.clone() for n, t in model.state_dict().items()}
    for i, layer in enumerate(model.model.layers):
        if not hasattr(layer, "linear_attn"):
            continue
        qkvz, ba = _fuse_qwen3_next(layer.linear_attn, cfg)
        p = f"model.layers.{i}.linear_attn."
        for leaf in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a"):
            del sd[p + leaf + ".weight"]
        sd[p + "in_proj_qkvz.weight"], sd[p + "in_proj_ba.weight"] = qkvz, ba
        # transformers' reading of the fused activations gives exactly our projections
        x = torch.randn(3, cfg.hidden_size)
        hq, hk, hv, hz, hb, ha = _hf_qwen3_next_ordering(
            x @ qkvz.T,
            x @ ba.T,
            cfg.linear_num_key_heads,
            cfg.linear_num_value_heads,
            cfg.linear_key_head_dim,
            cfg.linear_value_head_dim,
        )
        gdn = layer.linear_attn
        with torch.no_grad():
            torch.testing.assert_close(torch.cat([hq, hk, hv], -1), gdn.in_proj_qkv(x))
            torch.testing.assert_close(hz, gdn.in_proj_z(x))
            torch.testing.assert_close(
                torch.stack([hb, ha]), torch.stack([gdn.in_proj_b(x), gdn.in_proj_a(x)])
            )
        qkv2, z2 = split_qkvz(qkvz, cfg)
        b2, a2 = split_ba(ba, cfg)
        assert torch.equal(qkv2, gdn.in_proj_qkv.weight) and torch.equal(z2, gdn.in_proj_z.weight)
        assert torch.equal(b2, gdn.in_proj_b.weight) and torch.equal(a2, gdn.in_proj_a.weight)
    save_file(sd, str(tmp_path / "model.safetensors"))
    cfg.save(tmp_path / "config.json")
    net = load_checkpoint(tmp_path).model
    with torch.no_grad():
        torch.testing.assert_close(net(IDS), model(IDS))


def test_device_map_plan_and_load(model, tmp_path):
    from clover.model.config import clover_35b_a3b
    from clover.model.loading.placement import device_for, plan_device_map

    with torch.device("meta"):
        big = CloverForCausalLM(clover_35b_a3b())
    plan = plan_device_map(big, ["cuda:0", "cuda:1", "cuda:2", "cuda:3"])
    layers = [plan[f"model.layers.{i}"] for i in range(40)]
    assert layers == sorted(layers) and set(layers) == {"cuda:0", "cuda:1", "cuda:2", "cuda:3"}
    counts = [layers.count(f"cuda:{k}") for k in range(4)]
    assert max(counts) - min(counts) <= 2, counts  # the embeddings weigh ~ half a layer each
    assert plan["model.embed_tokens"] == "cuda:0" and plan["lm_head"] == plan["model.norm"] == "cuda:3"
    assert device_for("model.layers.12.mlp.gate.weight", plan, "cpu") == plan["model.layers.12"]
    assert (
        device_for("model.layers.1.mlp.gate.weight", {"model.layers.1": "a", "model.layers.12": "b"}, "c")
        == "a"
    )
    assert plan_device_map(big, ["cpu"])["model.layers.39"] == "cpu"

    # every layer on its own "device" (all cpu here): hooks, placement and the cache still agree
    save_checkpoint(model, tmp_path)
    small_plan = plan_device_map(model, ["cpu", "cpu"])
    net = load_checkpoint(tmp_path, device_map=small_plan).model
    with torch.no_grad():
        torch.testing.assert_close(net(IDS), model(IDS))
        cache_a, cache_b = net.new_cache(), model.new_cache()
        net.prefill(IDS, cache_a)
        model.prefill(IDS, cache_b)
        torch.testing.assert_close(net.denoise(IDS[:, :4], cache_a), model.denoise(IDS[:, :4], cache_b))
    with pytest.raises(CheckpointError, match="device_map"):
        load_checkpoint(tmp_path, device_map="balanced")
