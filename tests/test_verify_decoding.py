"""Verified rounds (decode order "verify", model/decoder/verify.py): block diffusion drafts, a causal pass
decides. Greedy output must be the autoregressive output, with fewer forwards where drafts agree."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from clover.model.config import tiny
from clover.model.decoder.generate import DecodeSettings, generate
from clover.model.decoder.verify import needs_draft, speculate, windows
from clover.model.modeling import CloverForCausalLM

EOS = 1
PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [3, 4, 5], [9] * 21]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    # float64: a chunked causal pass and one-token steps then agree to the last bit that matters
    return CloverForCausalLM(tiny(eos_token_ids=[EOS])).double().eval()


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("block", [2, 4, 8])
def test_verified_greedy_is_the_autoregressive_output(model, block, fused):
    ar = DecodeSettings(block_size=1, max_new_tokens=23, stop_token_ids=[])
    ver = dataclasses.replace(ar, block_size=block, order="verify", fused_rounds=fused)
    for prompt in PROMPTS:
        assert generate(model, [prompt], ver).tokens == generate(model, [prompt], ar).tokens
    # batched: each row on its own
    assert generate(model, PROMPTS, ver).tokens == [generate(model, [p], ar).tokens[0] for p in PROMPTS]


@pytest.mark.parametrize("fused", [False, True])
def test_fixed_tokens_allowed_sets_and_stops_hold(model, fused):
    fixed = [{0: 42, 5: 43}]
    allowed = [{2: [60, 61], 7: [70]}]
    ar = DecodeSettings(block_size=1, max_new_tokens=12, stop_token_ids=[EOS])
    ver = dataclasses.replace(ar, block_size=4, order="verify", fused_rounds=fused)
    want = generate(model, [PROMPTS[0]], ar, fixed=fixed, allowed=allowed)
    got = generate(model, [PROMPTS[0]], ver, fixed=fixed, allowed=allowed)
    assert got.tokens == want.tokens and got.finish_reasons == want.finish_reasons
    out = got.tokens[0]
    assert out[0] == 42 and out[5] == 43 and out[2] in (60, 61) and out[7] == 70


def test_sampling_keeps_tokens_as_left_order_does(model):
    s = DecodeSettings(
        block_size=4, order="verify", temperature=0.8, seed=3, max_new_tokens=8, stop_token_ids=[]
    )
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


def test_one_forward_checks_a_draft_and_denoises_a_block_as_two_would(model):
    """peek_and_denoise: the noisy block sees the cache and itself, not the tokens being checked."""
    torch.manual_seed(1)
    prompt = torch.randint(5, 60, (2, 8))
    cache = model.new_cache(2)
    model.prefill(prompt, cache)
    draft = torch.randint(5, 60, (2, 4))
    guess = draft.clone()
    guess[:, 2:] = model.config.mask_token_id
    need = guess == model.config.mask_token_id
    hidden, logits = model.peek_and_denoise(draft[:, :3], guess, cache, need=need)
    assert torch.allclose(hidden, model.peek(draft[:, :3], cache), atol=1e-9)
    assert torch.allclose(logits, model.denoise(guess, cache, need=need), atol=1e-9)
    assert cache.pos == 8  # nothing committed
    with pytest.raises(ValueError, match="peek_and_denoise"):
        model.peek_and_denoise(draft, guess[:, :1], cache)


def test_a_guess_places_the_drafts_confident_run_and_skips_a_finished_block():
    block = torch.tensor([[7, 3, 3, 3, 3]])
    masked = block == 3
    draft = torch.tensor([[0, 11, 12, 13, 14]])
    score = torch.tensor([[1.0, 0.99, 0.95, 0.4, 0.99]])
    spec, given = speculate(block, masked, draft, score, [(1, 5)], sure=0.9)
    assert spec.tolist() == [[7, 11, 12, 3, 3]] and given.tolist() == [[False, True, True, False, False]]
    spec, given = speculate(block, masked, draft, score, [(1, 5)], sure=0.3)
    assert spec is None and given[0, 1:].all()  # every mask guessed: no next round to draft for


def test_the_embedded_model_decodes_the_same_turns_in_fewer_forwards():
    """Through the local backend (tool grammar, grounded values, copy prior, prefix cache), on the
    first turns of a real agent conversation: the same turns as autoregressive decoding, in fewer
    forwards."""
    from benchmarks.oracle_turns import held_out_turns
    from clover.backends.local import LocalCloverModel
    from clover.settings import Settings

    base = Settings(
        model="embedded", max_tokens=64, temperature=0.0, block_size=1, edit_repairs="off", drafts=0
    )
    ar = LocalCloverModel(base)
    ver = ar.with_settings(block_size=16, decode_order="verify")
    fused = ver.with_settings(fused_rounds=True)
    assert ver.net is ar.net and ver.prefix_cache is not ar.prefix_cache and ar.settings.block_size == 1
    forwards = {"ar": 0.0, "ver": 0.0, "fused": 0.0}
    tokens = 0
    for messages, tools in list(held_out_turns(0, 1))[:3]:
        a, v, f = ar.complete(messages, tools), ver.complete(messages, tools), fused.complete(messages, tools)
        for other in (v, f):
            assert (other.thinking, other.text, [(c.name, c.arguments) for c in other.tool_calls]) == (
                a.thinking,
                a.text,
                [(c.name, c.arguments) for c in a.tool_calls],
            )
        forwards["ar"] += a.stats["forwards"]
        forwards["ver"] += v.stats["forwards"]
        forwards["fused"] += f.stats["forwards"]
        tokens += v.completion_tokens
    assert forwards["ver"] < 0.75 * forwards["ar"] and tokens / forwards["ver"] > 1.5
    assert forwards["fused"] < 0.95 * forwards["ver"]  # one forward per round after a block's first
