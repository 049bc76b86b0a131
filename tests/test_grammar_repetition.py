"""The decoder's repetition stop inside a tool call's value: the grammar still closes the call
(the value cut where it stopped), as it does when the token budget runs out."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from clover.model.decoder.repetition import RepetitionStop  # noqa: E402
from tests.test_tool_grammar import TOOLS, USER, _Biased, problems, variant  # noqa: E402
from tests.test_tool_grammar import clover as clover  # noqa: E402,F401 - the module fixture


def test_a_runaway_value_still_closes_its_call(clover):
    tok = clover.tokenizer
    bias = torch.zeros(clover.config.vocab_size)
    bias[tok.encode(" a")[0]] = 30.0  # the model says " a" forever wherever it may
    model = variant(clover, net=_Biased(clover.net, bias), block_size=1, max_tokens=400, think=False)
    turn = model.complete(USER, TOOLS, forced={0: tok.token_id("<tool_call>")})
    assert turn.completion_tokens < 400  # the repetition stop ended it, not the budget
    assert turn.tool_calls and not problems(turn), problems(turn)
    # the value is cut where the loop began: one " a" is kept, the repeats are not
    values = [str(v) for c in turn.tool_calls for v in c.arguments.values()]
    assert any(v.endswith(" a") for v in values) and not any(" a a" in v for v in values), values


def test_a_looping_thought_ends_and_the_turn_goes_on(clover):
    tok = clover.tokenizer
    bias = torch.zeros(clover.config.vocab_size)
    bias[tok.encode(" a")[0]] = 30.0  # " a" forever: first in the thinking, then in the answer
    for block in (1, 8):
        model = variant(clover, net=_Biased(clover.net, bias), block_size=block, max_tokens=400, think=True)
        turn = model.complete(USER, TOOLS)
        # before: the repetition stop ended the turn inside its thinking, with neither an answer
        # nor a call, and the agent asked again for the same loop
        assert turn.thinking == "a" and turn.text == "a", turn  # each loop cut to one " a"
        assert turn.finish_reason == "repetition"  # and the turn says so
        decoded = turn.stats["forwards"] * turn.stats["tokens_per_forward"]
        assert (
            decoded >= 2 * RepetitionStop().single_tokens > turn.completion_tokens
        )  # two loops decoded, one kept each
        # the grammar of the second piece knows the thought is over: no second think block
        assert "<think>" not in turn.text


def test_a_value_looping_after_a_looping_thought_still_closes_its_call(clover):
    tok = clover.tokenizer
    bias = torch.zeros(clover.config.vocab_size)
    bias[tok.encode(" a")[0]] = 30.0  # the thought loops on " a" (no call can open inside it) ...
    bias[tok.token_id("<tool_call>")] = 31.0  # ... then, after it, a call opens and its value loops
    model = variant(clover, net=_Biased(clover.net, bias), block_size=1, max_tokens=400, think=True)
    turn = model.complete(USER, TOOLS)
    assert turn.thinking == "a" and turn.tool_calls and not problems(turn), (turn, problems(turn))
    assert turn.stats["grammar_tokens"] > 0  # the second piece's grammar placed the call's scaffold


def test_after_a_closed_thought_the_grammar_refuses_another(clover):
    from clover.steering.tool_grammar import ToolCallGrammar

    kw = {
        "opened": False,
        "stop_ids": clover.stop_ids,
        "vocab_size": clover.config.vocab_size,
        "mask_id": clover.config.mask_token_id,
    }
    think = clover.tokenizer.token_id("<think>")
    fresh, after = (
        ToolCallGrammar(clover.tokenizer, TOOLS, **kw),
        ToolCallGrammar(clover.tokenizer, TOOLS, thought_closed=True, **kw),
    )
    assert fresh.step(fresh.seqs[0].start, think) is not None
    assert after.step(after.seqs[0].start, think) is None


def test_a_rule_that_undoes_every_round_cannot_loop_forever(clover, monkeypatch):
    # a grammar whose walk rejects every value token it had allowed: without the guard the block
    # would be re-masked and re-decoded forever (a typed-value dead end once did this)
    from clover.steering import tool_grammar

    class Contrary(tool_grammar.ToolCallGrammar):
        def step(self, st, t, left=None):
            if st.mode == tool_grammar.VALUE and t != self.param_close:
                return None
            return super().step(st, t, left)

    monkeypatch.setattr(tool_grammar, "ToolCallGrammar", Contrary)
    model = variant(clover, block_size=4, max_tokens=48, think=False)
    turn = model.complete(USER, TOOLS, forced={0: clover.tokenizer.token_id("<tool_call>")})
    assert turn.completion_tokens <= 48 and turn.stats["grammar_gave_up"] >= 1
