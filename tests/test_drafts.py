"""Drafts from the prompt (model/decoder/drafts.py): the index, the acceptance rule, and the shipped model."""

from __future__ import annotations

import json

import pytest
import torch

from clover.model.decoder.decode_policy import select
from clover.model.decoder.drafts import DraftIndex
from clover.model.decoder.generate import DecodeSettings, generate
from tests.embedded_reference import WEIGHTS


def test_a_draft_is_what_followed_the_latest_occurrence_in_the_prompt():
    index = DraftIndex([5, 6, 7, 8, 9, 5, 6, 7, 1, 2], n=3)
    assert index.draft([5, 6, 7], 4) == [1, 2]  # the latest occurrence wins; the prompt ends there
    assert index.draft([9, 5, 6], 2) == [7, 1]
    assert index.draft([4, 4, 4], 3) == []  # never in the prompt
    assert index.draft([5, 6, 7], 0) == []
    # output shorter than n: the prompt's last tokens complete the n-gram
    assert DraftIndex([1, 2, 3, 4, 2, 3], n=3).draft([], 2) == []  # [4, 2, 3] is only at the end
    assert DraftIndex([1, 2, 3, 4, 1, 2], n=3).draft([3], 2) == [4, 1]


def test_an_agreeing_run_from_the_leftmost_mask_is_accepted_below_the_threshold():
    s = DecodeSettings(threshold=0.9, order="left")
    masked = torch.tensor([[False, True, True, True, True]])
    score = torch.tensor([[1.0, 0.5, 0.4, 0.95, 0.3]])
    assert select(score, masked, s).tolist() == [[False, True, False, False, False]]
    agree = torch.tensor([[False, True, True, False, True]])
    # the run stops at the first disagreement; a confident position right after it still counts
    assert select(score, masked, s, agree=agree).tolist() == [[False, True, True, True, False]]
    # a held position ends the run too
    held = torch.tensor([[False, False, True, False, False]])
    got = select(score, masked & ~held, s, held, agree=agree)
    assert got.tolist() == [[False, True, False, False, False]]


@pytest.fixture(scope="module")
def embedded():
    from clover.model.loading.load import load_checkpoint
    from clover.model.text.chat import encode_prompt, render_messages
    from clover.model.text.tokenizer import CloverTokenizer

    loaded = load_checkpoint(WEIGHTS, device="cpu", dtype=torch.float32)
    tok = CloverTokenizer.from_dir(WEIGHTS)
    source = (
        '     1\tdef total(items):\n     2\t    """Sum of the prices."""\n     3\t    return sum(items) + 1\n'
    )

    def call(i: int, name: str, args: dict) -> dict:
        fn = {"name": name, "arguments": json.dumps(args)}
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": f"c{i}", "type": "function", "function": fn}],
        }

    messages = [  # after the view: the str_replace's old_str is copied from the tool's output
        {"role": "system", "content": "You are Clover, a coding agent."},
        {"role": "user", "content": "`total([2, 3])` returns 6 but should be 5."},
        call(1, "outline", {"symbol": "total"}),
        {
            "role": "tool",
            "tool_call_id": "c1",
            "name": "outline",
            "content": "shop/prices.py:1-3: def total(items)",
        },
        call(2, "view", {"path": "shop/prices.py", "view_range": [1, 3]}),
        {"role": "tool", "tool_call_id": "c2", "name": "view", "content": source},
    ]
    prompt = encode_prompt(
        tok, loaded.config, render_messages(messages, think=True, template=loaded.chat_template)
    )
    return loaded.model, tok, prompt


def _run(embedded, block: int, drafts: int):
    model, tok, prompt = embedded
    # a strict threshold, so that plain rounds accept little and the drafts' agreement shows
    s = DecodeSettings(
        block_size=block,
        order="left",
        threshold=0.999,
        max_new_tokens=96,
        stop_token_ids=tok.stop_ids(),
        draft_ngram=drafts,
    )
    return generate(model, [prompt], s)


def test_drafts_save_forwards_where_the_model_copies_its_context(embedded):
    plain, drafted = _run(embedded, 16, 0), _run(embedded, 16, 3)
    assert plain.stats["drafted_tokens"] == 0 and drafted.stats["drafted_tokens"] > 0
    assert drafted.stats["forwards"] < plain.stats["forwards"]
    # the old_str opens with the viewed line, copied as it was (earlier weights added a blank line
    # after it here, where no grammar grounds the value)
    assert "<parameter=old_str>\n    return sum(items) + 1\n" in embedded[1].decode(drafted.tokens[0])


def test_drafts_change_nothing_autoregressively(embedded):
    plain, drafted = _run(embedded, 1, 0), _run(embedded, 1, 3)
    assert drafted.tokens == plain.tokens and drafted.stats["forwards"] == plain.stats["forwards"]
    assert drafted.stats["drafted_tokens"] == 0
