"""Verified rounds (decode order "verify", model/verify.py): block diffusion drafts, a causal pass
decides. Greedy output must be the autoregressive output, with fewer forwards where drafts agree."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from clover.model.config import tiny
from clover.model.generate import DecodeSettings, generate
from clover.model.modeling import CloverForCausalLM
from clover.model.verify import needs_draft, windows

EOS = 1
PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [3, 4, 5], [9] * 21]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    # float64: a chunked causal pass and one-token steps then agree to the last bit that matters
    return CloverForCausalLM(tiny(eos_token_ids=[EOS])).double().eval()


@pytest.mark.parametrize("block", [2, 4, 8])
def test_verified_greedy_is_the_autoregressive_output(model, block):
    ar = DecodeSettings(block_size=1, max_new_tokens=23, stop_token_ids=[])
    ver = dataclasses.replace(ar, block_size=block, order="verify")
    for prompt in PROMPTS:
        assert generate(model, [prompt], ver).tokens == generate(model, [prompt], ar).tokens
    # batched: each row on its own
    assert generate(model, PROMPTS, ver).tokens == [generate(model, [p], ar).tokens[0] for p in PROMPTS]


def test_fixed_tokens_allowed_sets_and_stops_hold(model):
    fixed = [{0: 42, 5: 43}]
    allowed = [{2: [60, 61], 7: [70]}]
    ar = DecodeSettings(block_size=1, max_new_tokens=12, stop_token_ids=[EOS])
    ver = dataclasses.replace(ar, block_size=4, order="verify")
    want = generate(model, [PROMPTS[0]], ar, fixed=fixed, allowed=allowed)
    got = generate(model, [PROMPTS[0]], ver, fixed=fixed, allowed=allowed)
    assert got.tokens == want.tokens and got.finish_reasons == want.finish_reasons
    out = got.tokens[0]
    assert out[0] == 42 and out[5] == 43 and out[2] in (60, 61) and out[7] == 70


def test_sampling_keeps_tokens_as_left_order_does(model):
    s = DecodeSettings(block_size=4, order="verify", temperature=0.8, seed=3, max_new_tokens=8, stop_token_ids=[])
    left = dataclasses.replace(s, order="left")
    assert generate(model, [PROMPTS[0]], s).tokens == generate(model, [PROMPTS[0]], left).tokens


def test_windows_end_before_the_first_held_mask():
    masked = torch.tensor([[False, True, True, True, True], [False] * 5, [True, False, True, True, True]])
    held = torch.tensor([[False, False, False, True, False], [False] * 5, [False] * 5])
    spans = windows(masked, held)
    assert spans == [(1, 3), None, (0, 5)]
    assert windows(masked, None)[0] == (1, 5)
    assert needs_draft(masked, spans)
    assert not needs_draft(masked, [(1, 2), None, (0, 1)])  # frontiers alone: no draft wanted


def test_the_embedded_model_decodes_the_same_turns_in_fewer_forwards():
    """Through the local backend (tool grammar, grounded values, copy prior, prefix cache), on the
    first turns of a real agent conversation: the same turns as autoregressive decoding, in fewer
    forwards."""
    from benchmarks.oracle_turns import held_out_turns
    from clover.backends.local import LocalCloverModel
    from clover.settings import Settings

    base = Settings(model="embedded", max_tokens=64, temperature=0.0, block_size=1, edit_repairs="off", drafts=0)
    ar = LocalCloverModel(base)
    ver = ar.with_settings(block_size=16, decode_order="verify")
    assert ver.net is ar.net and ver.prefix_cache is not ar.prefix_cache and ar.settings.block_size == 1
    forwards = {"ar": 0.0, "ver": 0.0}
    tokens = 0
    for messages, tools in list(held_out_turns(0, 1))[:3]:
        a, v = ar.complete(messages, tools), ver.complete(messages, tools)
        assert (v.thinking, v.text, [(c.name, c.arguments) for c in v.tool_calls]) == (
            a.thinking, a.text, [(c.name, c.arguments) for c in a.tool_calls])  # fmt: skip
        forwards["ar"] += a.stats["forwards"]
        forwards["ver"] += v.stats["forwards"]
        tokens += v.completion_tokens
    assert forwards["ver"] < 0.75 * forwards["ar"] and tokens / forwards["ver"] > 1.5
