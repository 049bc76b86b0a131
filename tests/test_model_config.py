"""CloverConfig: round-trip, presets, Qwen3.5-style HF configs, and the 35B shape on the meta device."""

from __future__ import annotations

import json

import pytest

from clover.model.config import FULL_ATTENTION, LINEAR_ATTENTION, CloverConfig, clover_35b_a3b, preset, tiny


def test_round_trip(tmp_path):
    cfg = tiny(block_size=8, eos_token_ids=[1, 2])
    cfg.save(tmp_path)
    back = CloverConfig.load(tmp_path / "config.json")
    assert back == cfg
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "clover"
    assert CloverConfig.from_dict(cfg.to_dict()) == cfg


def test_35b_preset_shape():
    cfg = preset("clover-35b-a3b")
    assert cfg.layer_types.count(FULL_ATTENTION) == 10 and cfg.layer_types.count(LINEAR_ATTENTION) == 30
    assert cfg.layer_types[3] == FULL_ATTENTION and cfg.layer_types[0] == LINEAR_ATTENTION
    assert cfg.rotary_dim == 64 and cfg.block_size == 32
    with pytest.raises(ValueError, match="unknown preset"):
        preset("nope")


def test_qwen35_nested_config_accepted():
    hf = {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "model_type": "qwen3_5_moe",
        "text_config": {
            "model_type": "qwen3_5_moe_text",
            "vocab_size": 248320,
            "hidden_size": 2048,
            "num_hidden_layers": 8,
            "layer_types": ["linear_attention"] * 3
            + ["full_attention"]
            + ["linear_attention"] * 3
            + ["full_attention"],
            "num_attention_heads": 16,
            "num_key_value_heads": 2,
            "head_dim": 256,
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 32,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "linear_conv_kernel_dim": 4,
            "num_experts": 256,
            "num_experts_per_tok": 8,
            "moe_intermediate_size": 512,
            "shared_expert_intermediate_size": 512,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000000,
                "partial_rotary_factor": 0.25,
            },
            "eos_token_id": 248044,
            "some_unknown_key": True,
        },
        "vision_config": {"depth": 27},
        "tie_word_embeddings": False,
    }
    cfg = CloverConfig.from_dict(hf)
    assert cfg.num_hidden_layers == 8 and cfg.layer_types[3] == FULL_ATTENTION
    assert cfg.rope_theta == 1e7 and cfg.partial_rotary_factor == 0.25
    assert cfg.block_size == 1  # an autoregressive checkpoint decodes token by token
    assert cfg.eos_token_ids == [248044]


def test_interval_and_flat_rope_theta():
    cfg = CloverConfig.from_dict(
        {"model_type": "qwen3_next", "num_hidden_layers": 6, "full_attention_interval": 3, "rope_theta": 5e6}
    )
    assert cfg.layer_types == ["linear_attention", "linear_attention", "full_attention"] * 2
    assert cfg.rope_theta == 5e6


def test_bad_config_is_one_line_error(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        CloverConfig.load(tmp_path)
    with pytest.raises(ValueError, match="layer_types"):
        CloverConfig(num_hidden_layers=2, layer_types=["full_attention"])
    with pytest.raises(ValueError, match="early_answer_redos must be 0"):
        CloverConfig(early_answer_redos=-1)


@pytest.mark.parametrize(
    "field, value",
    [
        ("wrap_up", "false"),
        ("edit_repairs", 1),
        ("block_size", "16"),
        ("hidden_size", True),
        ("rms_norm_eps", "1e-6"),
        ("eos_token_ids", [1, "2"]),
        ("layer_types", "linear_attention"),
        ("pad_token_id", 1.5),
        ("early_answer_redos", "1"),
        ("grounded_spans", "yes"),
        ("answer_quotes", ["clover", 1]),
    ],
)
def test_a_value_of_the_wrong_type_is_refused(tmp_path, field, value):
    good = tiny().to_dict()
    (tmp_path / "config.json").write_text(json.dumps({**good, field: value}))
    with pytest.raises(ValueError, match=f"config field {field} must be"):
        CloverConfig.load(tmp_path)
    # numbers may be written without a fraction; null is a valid pad token
    assert CloverConfig.from_dict({**good, "rms_norm_eps": 0, "pad_token_id": None}).rms_norm_eps == 0


def test_decode_block_size_is_the_default_decoder_within_the_trained_blocks(tmp_path):
    assert CloverConfig(block_size=16).default_block() == 16  # 0: the trained block size
    cfg = CloverConfig(block_size=16, decode_block_size=1)
    assert cfg.default_block() == 1 and cfg.block_size == 16  # diffusion still there on request
    cfg.save(tmp_path)
    assert CloverConfig.load(tmp_path).default_block() == 1
    with pytest.raises(ValueError, match="decode_block_size"):
        CloverConfig(block_size=16, decode_block_size=32)


def test_35b_param_counts_on_meta_device():
    torch = pytest.importorskip("torch")
    from clover.model.modeling import CloverForCausalLM

    cfg = clover_35b_a3b()
    with torch.device("meta"):
        model = CloverForCausalLM(cfg)
    total = sum(p.numel() for p in model.parameters())
    expert = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    embed = model.model.embed_tokens.weight.numel()
    active = total - expert + expert * cfg.num_experts_per_tok // cfg.num_experts - embed + cfg.hidden_size
    assert abs(total - 35e9) / 35e9 < 0.05, total
    assert abs(active - 3e9) / 3e9 < 0.15, active
    assert cfg.param_counts() == {"total": total, "active": active}
