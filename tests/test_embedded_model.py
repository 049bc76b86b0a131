"""The shipped tiny Clover (model/weights/): loads, fits the size budget, and reproduces its
recorded greedy output at B = 1 and B = 32 (re-record with `python -m tests.embedded_reference`)."""

from __future__ import annotations

import json

import pytest

from tests.embedded_reference import RECORD, WEIGHTS, reference_tokens

pytest.importorskip("torch")


def test_weights_are_shipped_within_budget():
    for name in ("config.json", "model.safetensors", "tokenizer.json", "MODEL_CARD.md"):
        assert (WEIGHTS / name).is_file(), name
    total = sum(p.stat().st_size for p in WEIGHTS.iterdir() if p.is_file())
    assert total <= 30 * 1024 * 1024


def test_greedy_generation_matches_the_recording():
    got = reference_tokens()
    assert got == json.loads(RECORD.read_text())
    assert got["B16-verify"] == got["B1"]  # verified rounds decode the autoregressive output


def test_embedded_is_the_default_model():
    from clover.backends import make_model
    from clover.settings import Settings

    model = make_model(Settings(max_tokens=8))
    turn = model.complete([{"role": "user", "content": "hi"}], [])
    assert turn.completion_tokens > 0 and turn.stats["forwards"] >= 1


def test_the_embedded_model_declines_the_step_limit_wrap_up():
    # its wrap-ups were its tool calls written out as text (17 of 18 in earlier weights' bench runs):
    # no reply is better than that, so its config.json turns the agent's wrap-up turn off
    from clover.backends import make_model
    from clover.settings import Settings

    assert json.loads((WEIGHTS / "config.json").read_text())["wrap_up"] is False
    assert make_model(Settings(max_tokens=8)).wrap_up is False
