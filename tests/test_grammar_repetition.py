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
