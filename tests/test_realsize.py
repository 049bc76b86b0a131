"""Real size: the full-size checkpoint writer and the random builds at the test preset's
dimensions, the cost curve's accounting, the default decode width of a big MoE, and the two scripts
the lead and the first GPU run (benchmarks/realsize.sh, benchmarks/gpu_run.sh --dry-run) end to end."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from benchmarks.cost_curve import COMPONENTS, Depth, cost_curve, layer_traffic  # noqa: E402
from benchmarks.write_realsize import random_model, realsize_config, write  # noqa: E402
from clover.model.config import clover_35b_a3b, tiny  # noqa: E402
from clover.model.decoder.decode_width import EXPECTED_TPF, choose_width, experts_touched, traffic_ratio  # noqa: E402
from clover.model.decoder.generate import DecodeSettings, generate  # noqa: E402
from clover.model.loading.load import load_checkpoint  # noqa: E402
from clover.model.loading.quantized import QuantExperts, QuantLinear  # noqa: E402
from tests.clihelp import ROOT  # noqa: E402


def test_realsize_writer_at_tiny_shapes_loads_as_int4_and_decodes(tmp_path):
    info = write(tmp_path, layers=4, method="gptq", group_size=32, shape="tiny")
    raw = json.loads((tmp_path / "config.json").read_text())
    assert raw["quantization_config"]["quant_method"] == "gptq" and (tmp_path / "tokenizer.json").is_file()
    assert info["bytes"] > 0
    net = load_checkpoint(tmp_path).model
    layer = net.model.layers[3]
    assert isinstance(layer.self_attn.q_proj, QuantLinear) and isinstance(layer.mlp.experts, QuantExperts)
    out = generate(net, [[5, 6, 7, 8, 9]], DecodeSettings(block_size=1, max_new_tokens=3, stop_token_ids=[]))
    assert len(out.tokens[0]) == 3


def test_realsize_config_is_the_35b_shape_cut_to_depth():
    cfg = realsize_config(8)
    full = clover_35b_a3b()
    assert (cfg.hidden_size, cfg.num_experts, cfg.vocab_size) == (
        full.hidden_size,
        full.num_experts,
        full.vocab_size,
    )
    assert cfg.layer_types == full.layer_types[:8]


@pytest.mark.parametrize("form", ["int4", "bf16"])
def test_random_model_and_cost_curve_accounting(form):
    model = random_model(realsize_config(4, "tiny"), form, "cpu")
    assert isinstance(model.model.layers[0].mlp.experts, QuantExperts) == (form == "int4")
    depth = Depth(model, 40)
    assert depth.layers([1.0] * 4) == pytest.approx(40)  # 30 GDN + 10 attention from 2 + 2
    rows = cost_curve(model, list(range(5, 21)), [1, 2], repeats=1, depth=depth, log=lambda s: None)
    assert [(r["kind"], r["width"]) for r in rows] == [("causal", 1), ("causal", 2), ("denoise", 2)]
    for r in rows:
        assert set(r["parts_full"]) == set(COMPONENTS)
        assert r["seconds_full"] == pytest.approx(sum(r["parts_full"].values()))
        assert 1 <= r["experts_touched"] <= model.config.num_experts
    assert rows[0]["break_even_tpf"] == pytest.approx(1.0)
    k = model.config.num_experts_per_tok
    assert layer_traffic(model.model.layers[0], 2 * k) > layer_traffic(model.model.layers[0], k)


def test_depth_needs_every_layer_type():
    model = random_model(realsize_config(1, "tiny"), "bf16", "cpu")  # one GDN layer, no attention
    with pytest.raises(ValueError, match="full_attention"):
        Depth(model, 40)


def test_default_width_of_a_big_moe_is_b1_and_small_models_keep_theirs():
    big = clover_35b_a3b()
    assert experts_touched(big, 1) == pytest.approx(8) and experts_touched(big, 32) == pytest.approx(
        163, abs=1
    )
    ratios = [traffic_ratio(big, w) for w in (1, 2, 4, 8, 16, 32)]
    assert ratios[0] == pytest.approx(1) and ratios == sorted(ratios)
    assert all(EXPECTED_TPF[w] < traffic_ratio(big, w) for w in EXPECTED_TPF)  # no width pays
    choice = choose_width(big)
    assert choice.width == 1 and "big MoE" in choice.reason
    small = tiny(block_size=8)
    assert choose_width(small).width == 8  # the checkpoint's own
    assert choose_width(tiny(block_size=1)).width == 1  # an autoregressive checkpoint stays AR


@pytest.mark.slow
def test_gpu_run_dry_run_on_cpu(tmp_path):
    env = {
        "OUT": str(tmp_path),
        "PYTHON": sys.executable,
        "OMP_NUM_THREADS": "1",
        "CLOVER_REALSIZE_DIR": str(tmp_path / "ckpt"),
    }
    proc = subprocess.run(
        ["bash", "benchmarks/gpu_run.sh", "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**_env(tmp_path), **env},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "realsize section: 0 step(s) failed" in proc.stdout
    figures = json.loads((tmp_path / "gpu_figures.json").read_text())["realsize"]
    assert [r["summary"]["format"] for r in figures] == ["gptq", "random int4", "random bf16"]


@pytest.mark.slow
def test_realsize_script_end_to_end_on_a_reduced_checkpoint(tmp_path):
    d = tmp_path / "ckpt"
    env = {"TINY": "1", "LAYERS": "4", "THREADS": "1", "PYTHON": sys.executable}
    proc = subprocess.run(
        ["bash", "benchmarks/realsize.sh", str(d)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**_env(tmp_path), **env},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "closing table" in proc.stdout and "| gptq |" in proc.stdout
    assert (tmp_path / "ckpt.results" / "chat.txt").read_text().strip()  # clover chat decoded a reply
    summary = json.loads((tmp_path / "ckpt.results" / "realsize.json").read_text())["realsize"][0]["summary"]
    assert summary["full_layers"] == 40 and summary["layers"] == 4 and summary["tok_s_b1"] > 0


def _env(tmp) -> dict[str, str]:
    from tests.clihelp import isolated_env

    return {**isolated_env(tmp), "PYTHONPATH": str(ROOT)}
