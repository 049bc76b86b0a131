"""The decoder's repetition stop inside a tool call's value: the grammar still closes the call
(the value cut where it stopped), as it does when the token budget runs out."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

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
    assert any(" a a a a" in str(v) for c in turn.tool_calls for v in c.arguments.values())


def test_a_rule_that_undoes_every_round_cannot_loop_forever(clover, monkeypatch):
    # a grammar whose walk rejects every value token it had allowed: without the guard the block
    # would be re-masked and re-decoded forever (a typed-value dead end once did this)
    from clover.backends import tool_grammar

    class Contrary(tool_grammar.ToolCallGrammar):
        def step(self, st, t, left=None):
            if st.mode == tool_grammar.VALUE and t != self.param_close:
                return None
            return super().step(st, t, left)

    monkeypatch.setattr(tool_grammar, "ToolCallGrammar", Contrary)
    model = variant(clover, block_size=4, max_tokens=48, think=False)
    turn = model.complete(USER, TOOLS, forced={0: clover.tokenizer.token_id("<tool_call>")})
    assert turn.completion_tokens <= 48 and turn.stats["grammar_gave_up"] >= 1
