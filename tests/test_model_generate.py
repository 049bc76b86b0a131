"""The block-diffusion decoder on a tiny random Clover: AR equivalence, progress, stops, constraints."""

from __future__ import annotations

import pytest
import torch

from clover.model.config import tiny
from clover.model.decoder.generate import DecodeSettings, generate
from clover.model.modeling import CloverForCausalLM

EOS = 1


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return CloverForCausalLM(tiny(eos_token_ids=[EOS])).eval()


PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [3, 4, 5]]


def _ar_greedy(model, prompt, n, banned):
    ids = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids]))[0, -1]
            logits[banned] = float("-inf")
            ids.append(int(logits.argmax()))
    return ids[len(prompt) :]


def test_block_size_one_greedy_equals_ar_greedy(model):
    s = DecodeSettings(block_size=1, max_new_tokens=10, stop_token_ids=[])
    res = generate(model, PROMPTS, s)
    for prompt, got in zip(PROMPTS, res.tokens, strict=True):
        assert got == _ar_greedy(model, prompt, 10, [model.config.mask_token_id])
    assert res.stats["rounds_per_block"] == 1.0


@pytest.mark.parametrize("policy", ["threshold", "margin", "entropy", "fixed-k"])
def test_batch_equals_one_by_one(model, policy):
    s = DecodeSettings(block_size=4, policy=policy, threshold=0.05, k=2, max_new_tokens=9, stop_token_ids=[])
    prompts = [*PROMPTS, [7] * 9]
    res = generate(model, prompts, s)
    assert res.tokens == [generate(model, [p], s).tokens[0] for p in prompts]
    assert all(len(t) == 9 for t in res.tokens) and res.finish_reasons == ["length"] * 3


def test_threshold_always_progresses(model):
    events = []
    s = DecodeSettings(block_size=4, threshold=1.01, max_new_tokens=12, stop_token_ids=[])  # never reached
    res = generate(model, [PROMPTS[0]], s, on_round=events.append)
    assert len(res.tokens[0]) == 12
    # exactly one position per round: masks left drop by one each round
    for a, b in zip(events, events[1:], strict=False):
        if a.block == b.block:
            assert b.tokens[0].count(None) == a.tokens[0].count(None) - 1
    assert events[-1].tokens[0].count(None) == 0
    assert res.stats["forwards"] == len(events) and res.stats["tokens_per_forward"] > 0


def test_mask_token_never_emitted(model):
    biased = CloverForCausalLM(model.config).eval()
    biased.load_state_dict(model.state_dict())
    with torch.no_grad():
        biased.lm_head.weight[model.config.mask_token_id] = 5 * biased.model.norm.weight.new_ones(64)
    for temp in (0.0, 1.0):
        s = DecodeSettings(block_size=4, temperature=temp, seed=0, max_new_tokens=16, stop_token_ids=[])
        res = generate(biased, PROMPTS, s)
        assert all(model.config.mask_token_id not in t for t in res.tokens)


def test_eos_ends_the_block_and_the_sequence(model):
    events = []
    s = DecodeSettings(block_size=4, max_new_tokens=40, threshold=1.01)
    res = generate(model, [PROMPTS[0]], s, fixed=[{6: EOS}], on_round=events.append)
    assert res.tokens[0][-1] == EOS and len(res.tokens[0]) == 7 and res.finish_reasons == ["stop"]
    # prompt of 7 with B = 4: block 0 holds the 3-token tail and offset 0; block 2 holds offsets 5-8,
    # the EOS at its position 1. Positions 2-3 are filled at once, so that block takes one round.
    assert res.stats["blocks"] == 3
    last = [e for e in events if e.block == 2]
    assert len(last) == 1 and last[0].tokens == [res.tokens[0][5:7]]
    # a stop token forced at a block's first position needs no round at all
    events.clear()
    res = generate(model, [PROMPTS[0]], s, fixed=[{5: EOS}], on_round=events.append)
    assert len(res.tokens[0]) == 6 and res.stats["blocks"] == 3 and {e.block for e in events} == {0, 1}
    # an allowed-token mask that only permits EOS makes the model choose it itself
    res = generate(model, [PROMPTS[0]], s, allowed=[{2: [EOS]}])
    assert res.tokens[0][2] == EOS and len(res.tokens[0]) == 3


def test_fixed_tokens_and_allowed_sets_hold(model):
    fixed = [{0: 50, 6: 60}]
    allowed = [{2: [10, 11], 3: [12], 9: [20, 21, 22]}]
    for temp in (0.0, 1.5):
        s = DecodeSettings(block_size=4, temperature=temp, seed=1, max_new_tokens=12, stop_token_ids=[])
        out = generate(model, [PROMPTS[1]], s, fixed=fixed, allowed=allowed).tokens[0]
        assert (
            out[0] == 50 and out[6] == 60 and out[2] in (10, 11) and out[3] == 12 and out[9] in (20, 21, 22)
        )


def test_sampling_is_seeded_and_top_k_one_is_greedy(model):
    s = DecodeSettings(block_size=4, temperature=1.0, seed=3, max_new_tokens=8, stop_token_ids=[])
    assert generate(model, PROMPTS, s).tokens == generate(model, PROMPTS, s).tokens
    greedy = DecodeSettings(block_size=4, max_new_tokens=8, stop_token_ids=[], policy="fixed-k", k=1)
    top1 = DecodeSettings(
        block_size=4, temperature=0.7, top_k=1, seed=5, max_new_tokens=8, stop_token_ids=[], policy="fixed-k"
    )
    assert generate(model, PROMPTS, top1).tokens == generate(model, PROMPTS, greedy).tokens


def test_bad_settings_are_clear_errors(model):
    with pytest.raises(ValueError, match="unknown policy"):
        DecodeSettings(policy="yolo")
    with pytest.raises(ValueError, match="at least one token"):
        generate(model, [[]])


class _FromScratch:
    """The decoder's model interface without a cache: every round recomputes the whole history
    with the training forward (blocks tile the sequence, as in generate's prompt rule)."""

    def __init__(self, net: CloverForCausalLM, block: int) -> None:
        self.net, self.block, self.history = net, block, None

    def __getattr__(self, name):
        return getattr(self.net, name)

    def prefill(self, ids, cache, pad=None):
        self.history = ids

    def commit(self, ids, cache):
        self.history = torch.cat([self.history, ids], dim=1)

    def denoise(self, block, cache, need=None):  # every position's logits, `need` or not
        seq = torch.cat([self.history, block], dim=1)
        with torch.no_grad():
            return self.net.forward_train(seq, seq, self.block)[:, -block.shape[1] :]

    def commit_and_denoise(self, done, block, cache, need=None):
        self.commit(done, cache)
        return self.denoise(block, cache)


@pytest.mark.parametrize("block", [1, 4])
def test_cached_decoding_equals_recomputation(model, block):
    s = DecodeSettings(block_size=block, threshold=0.02, max_new_tokens=11, stop_token_ids=[])
    for prompt in PROMPTS:
        cached = generate(model, [prompt], s)
        scratch = generate(_FromScratch(model, block), [prompt], s)
        assert cached.tokens == scratch.tokens
        assert cached.stats["rounds_per_block"] == scratch.stats["rounds_per_block"]


def test_near_tied_scores_pick_the_leftmost_position():
    # entropies of two nearly flat distributions, equal up to the last bits a batch changes: the
    # pick must not depend on that noise (test_batch_equals_one_by_one[entropy] flipped on it)
    from clover.model.decoder.decode_policy import select

    s = DecodeSettings(policy="entropy", threshold=0.05)
    masked = torch.tensor([[False, True, True, True]])
    noisy = torch.tensor([[-4.8324, -4.831484, -4.830260276, -4.830259799]])
    assert select(noisy, masked, s).tolist() == [[False, False, True, False]]
    clear = torch.tensor([[-4.8324, -4.831484, -4.830260, -4.820]])  # a real difference still wins
    assert select(clear, masked, s).tolist() == [[False, False, False, True]]


def test_left_order_accepts_only_the_passing_run_from_the_leftmost_mask():
    from clover.model.decoder.decode_policy import select

    masked = torch.tensor([[False, True, True, True, True, True]])
    score = torch.tensor([[0.0, 0.95, 0.97, 0.5, 0.99, 0.99]])
    anywhere = DecodeSettings(threshold=0.9)
    left = DecodeSettings(threshold=0.9, order="left")
    assert select(score, masked, anywhere).tolist() == [[False, True, True, False, True, True]]
    assert select(score, masked, left).tolist() == [[False, True, True, False, False, False]]
    # the leftmost mask is always taken (progress), even below the threshold
    low = torch.tensor([[0.0, 0.2, 0.99, 0.99, 0.99, 0.99]])
    assert select(low, masked, left).tolist() == [[False, True, False, False, False, False]]
    # a position held back (frozen) by a constraint ends the run; the first free one still moves
    held = torch.tensor([[False, False, True, False, False, False]])
    free = masked & ~held
    assert select(score, free, left, held).tolist() == [[False, True, False, False, False, False]]
    held_first = torch.tensor([[False, True, False, False, False, False]])
    assert select(score, masked & ~held_first, left, held_first).tolist() == [
        [False, False, True, False, False, False]
    ]
    with pytest.raises(ValueError, match="order"):
        DecodeSettings(order="random")


@pytest.mark.parametrize("threshold", [0.0, 0.02, 1.01])
def test_left_order_reveals_each_block_left_to_right(model, threshold):
    # every round's revealed positions extend the known prefix of the block: never a gap
    s = DecodeSettings(block_size=8, threshold=threshold, order="left", max_new_tokens=16, stop_token_ids=[])
    known_counts: list[int] = []

    def on_round(ev):
        row = ev.tokens[0]
        known = [t is not None for t in row]
        assert known == sorted(known, reverse=True)  # True... then False...
        known_counts.append(sum(known))

    res = generate(model, [PROMPTS[0]], s, on_round=on_round)
    assert len(res.tokens[0]) == 16
    if threshold == 0.0:  # everything passes: one round per block
        assert res.stats["rounds_per_block"] == 1.0
    if threshold > 1.0:  # nothing passes: one token per round, like AR
        assert res.stats["rounds_per_block"] * res.stats["blocks"] == 16
