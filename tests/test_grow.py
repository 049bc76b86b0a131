"""Deepening a checkpoint (model/training/grow.py) keeps what it computes: same logits, same decoding."""

from __future__ import annotations

import json

import pytest
import torch

from clover.model.config import tiny
from clover.model.decoder.generate import DecodeSettings, generate
from clover.model.loading.load import load_checkpoint, save_checkpoint
from clover.model.modeling import CloverForCausalLM
from clover.model.training.grow import main


def _trained_like(model: CloverForCausalLM) -> CloverForCausalLM:
    """Random weights everywhere, output projections included (a fresh init zeroes none, but be sure)."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model


def test_the_deeper_model_computes_the_same(tmp_path):
    torch.manual_seed(0)
    small = _trained_like(CloverForCausalLM(tiny()).eval())
    save_checkpoint(small, tmp_path / "small")
    assert main(["--from", str(tmp_path / "small"), "--to", str(tmp_path / "deep")]) == 0
    deep = load_checkpoint(tmp_path / "deep", device="cpu", dtype=torch.float32).model.eval()
    cfg = json.loads((tmp_path / "deep" / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 8
    assert cfg["layer_types"] == ["linear_attention", "full_attention"] * 4  # the pattern is kept
    assert sum(p.numel() for p in deep.parameters()) > 1.5 * sum(p.numel() for p in small.parameters())
    ids = torch.randint(5, 120, (2, 23))
    with torch.no_grad():
        torch.testing.assert_close(deep(ids), small(ids), rtol=0, atol=1e-5)
    s = DecodeSettings(block_size=4, threshold=0.5, max_new_tokens=12, stop_token_ids=[])
    assert generate(deep, [[5, 6, 7, 8, 9]], s).tokens == generate(small, [[5, 6, 7, 8, 9]], s).tokens


def test_bad_input_is_one_line(tmp_path, capsys):
    assert main(["--from", str(tmp_path / "missing"), "--to", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    torch.manual_seed(0)
    save_checkpoint(CloverForCausalLM(tiny()), tmp_path / "small")
    assert main(["--from", str(tmp_path / "small"), "--to", str(tmp_path / "out"), "--period", "3"]) == 1
    assert "do not split" in capsys.readouterr().err


@pytest.mark.parametrize("period", [1, 4])
def test_other_periods(tmp_path, period):
    torch.manual_seed(1)
    small = _trained_like(CloverForCausalLM(tiny()).eval())
    save_checkpoint(small, tmp_path / "small")
    assert (
        main(["--from", str(tmp_path / "small"), "--to", str(tmp_path / "deep"), "--period", str(period)])
        == 0
    )
    deep = load_checkpoint(tmp_path / "deep", device="cpu", dtype=torch.float32).model.eval()
    ids = torch.randint(5, 120, (1, 17))
    with torch.no_grad():
        torch.testing.assert_close(deep(ids), small(ids), rtol=0, atol=1e-5)
