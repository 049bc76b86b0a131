"""The decoder's runaway-repetition stop (model/decoder/repetition.py) on a tiny Clover."""

from __future__ import annotations

import random

import pytest
import torch

from clover.model.config import tiny
from clover.model.decoder.generate import DecodeSettings, generate
from clover.model.decoder.repetition import (
    RepetitionStop,
    cut_runaway,
    first_runaway,
    is_runaway,
    repeated_tail,
)
from clover.model.modeling import CloverForCausalLM


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return CloverForCausalLM(tiny(eos_token_ids=[1])).eval()


def _forced(pattern: list[int], n: int) -> dict[int, int]:
    """Generated-token offset -> token: the pattern repeated over the first n offsets."""
    return {k: pattern[k % len(pattern)] for k in range(n)}


@pytest.mark.parametrize("block_size", [1, 8])
def test_a_looping_generation_stops_with_reason_repetition(model, block_size):
    # The same 3-gram forced over and over: the decoder must stop long before the budget.
    s = DecodeSettings(block_size=block_size, max_new_tokens=400, stop_token_ids=[])
    res = generate(model, [[5, 6, 7, 8]], s, fixed=[_forced([40, 41, 42], 400)])
    assert res.finish_reasons == ["repetition"]
    assert 64 <= len(res.tokens[0]) < 64 + block_size + 1
    assert repeated_tail(res.tokens[0]) == (3, len(res.tokens[0]))


@pytest.mark.parametrize("order", ["any", "verify"])
def test_a_loop_that_ends_inside_a_block_still_stops(model, order):
    # 24 copies of one token end at offset 28; four other tokens follow in the same 32-token block,
    # so the block's end has no periodic tail (the embedded model wrote " read" 24 times, then
    # " Let me read where it is defined.", and the check at block ends let it through).
    fixed = {k: 7 for k in range(4, 28)} | {28: 100, 29: 101, 30: 102, 31: 103}
    s = DecodeSettings(block_size=32, max_new_tokens=96, stop_token_ids=[], order=order)
    res = generate(model, [[5, 6, 7, 8]], s, fixed=[fixed])
    assert res.finish_reasons == ["repetition"] and len(res.tokens[0]) == 28
    assert cut_runaway(res.tokens[0])[-2:] != [7, 7]  # the loop is then cut to one copy


def test_first_runaway_finds_the_earliest_end():
    rule = RepetitionStop()
    tokens = [1, 2, 3] + [7] * 30 + [4, 5, 6]
    assert first_runaway(tokens, 0, rule) == 3 + 24
    assert first_runaway(tokens, 3 + 24, rule) == 3 + 25  # from a later start: the next end still in the loop
    assert first_runaway(tokens, 3 + 30, rule) is None  # past the loop: nothing new ends one
    assert first_runaway(tokens, 0, None) is None


def test_switched_off_it_runs_to_the_budget(model):
    s = DecodeSettings(block_size=8, max_new_tokens=120, stop_token_ids=[], repetition=None)
    res = generate(model, [[5, 6, 7, 8]], s, fixed=[_forced([40, 41, 42], 120)])
    assert res.finish_reasons == ["length"] and len(res.tokens[0]) == 120


def test_a_loop_after_free_text_is_cut_and_only_the_looping_row_stops(model):
    # Row 0 loops after 40 free tokens; row 1 is never forced and runs to the budget.
    s = DecodeSettings(block_size=4, max_new_tokens=160, stop_token_ids=[])
    loop = {k: v for k, v in _forced([50, 51], 160).items() if k >= 40}
    res = generate(model, [[5, 6, 7, 8], [9, 10, 11]], s, fixed=[loop, {}])
    assert res.finish_reasons[0] == "repetition" and 40 + 64 <= len(res.tokens[0]) <= 40 + 64 + 4
    assert res.tokens[0][:40] == generate(model, [[5, 6, 7, 8]], s).tokens[0][:40]
    assert res.finish_reasons[1] == "length" and len(res.tokens[1]) == 160


def test_thresholds():
    rule = RepetitionStop(min_tokens=64, min_repeats=4, max_period=32)
    rng = random.Random(0)
    assert repeated_tail([rng.randrange(1000) for _ in range(500)], rule) is None
    assert repeated_tail([7, 8] * 31 + [7], rule) is None  # one token short
    assert repeated_tail([1, 2, 3] + [7, 8] * 32, rule) == (2, 64)
    # one token over and over: single_tokens in a row suffice
    assert repeated_tail([1, 2, 3] + [7] * 23, rule) is None
    assert repeated_tail([1, 2, 3] + [7] * 24, rule) == (1, 24)
    unit = list(range(100, 130))  # a 30-token line, 3 times: 90 tokens but too few repeats
    assert not is_runaway(unit * 3, rule) and is_runaway(unit * 4, rule)
    # a long n-gram (a whole sentence or reply) needs only three copies in a row
    sentence = list(range(200, 260))
    assert not is_runaway(sentence * 2, rule) and repeated_tail([1, 2] + sentence * 3, rule) == (60, 180)
    assert not is_runaway(list(range(40)) * 5, RepetitionStop(max_period=32, long_period=0))
    assert not is_runaway(list(range(130)) * 3, rule)  # longer than long_period
    # from twice_period tokens on, two copies in a row are a loop (a looping reply seen twice)
    assert not is_runaway([1, 2] + list(range(300, 363)) * 2, rule)  # 63 tokens
    assert repeated_tail([1, 2] + list(range(300, 364)) * 2, rule) == (64, 128)
    assert repeated_tail([1, 2] + list(range(300, 377)) * 2, rule) == (77, 154)
    assert not is_runaway(list(range(300, 377)) * 2, RepetitionStop(twice_period=0))
    assert not is_runaway([7] * 200, None)
    with pytest.raises(ValueError):
        RepetitionStop(min_repeats=1)
    with pytest.raises(ValueError):
        RepetitionStop(long_repeats=1)
    with pytest.raises(ValueError):
        RepetitionStop(twice_period=32)  # not longer than max_period: the short tier's n-grams


def test_a_reply_that_repeats_itself_whole_stops(model):
    # a 50-token "sentence" over and over: beyond max_period, caught by the long tier at 3 copies
    sentence = list(range(60, 110))
    s = DecodeSettings(block_size=8, max_new_tokens=400, stop_token_ids=[])
    res = generate(model, [[5, 6, 7, 8]], s, fixed=[_forced(sentence, 400)])
    assert res.finish_reasons == ["repetition"] and 150 <= len(res.tokens[0]) < 150 + 8 + 1
    assert cut_runaway(res.tokens[0]) == sentence


def test_a_runaway_is_cut_to_one_copy_of_its_ngram():
    rule = RepetitionStop(min_tokens=64, min_repeats=4, max_period=32)
    head = [1, 2, 3]
    assert cut_runaway(head + [7, 8] * 40, rule) == head + [7, 8]
    assert cut_runaway(head + [9] * 70, rule) == head + [9]
    below = head + [7, 8] * 20  # 40 tokens of a loop: not a runaway, nothing cut
    assert cut_runaway(below, rule) == below and cut_runaway(below * 3, None) == below * 3
