"""model/load.py: Clover's own checkpoints round-trip; Qwen3.5-style ones (nested config, prefixed
names, per-expert weights, no block-mode parameters, mtp heads) load and give the same network."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from clover.model.config import tiny
from clover.model.load import CheckpointError, load_checkpoint, save_checkpoint
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
