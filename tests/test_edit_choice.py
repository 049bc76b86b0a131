"""new_str chosen among one-site repairs by the model's likelihood (steering/edit_choice.py,
model/decoder/score.py), on a tiny RANDOM checkpoint: the scores are the plain causal forward's, and the
turn's call, as the local model's turn stage (steering/turn_stage.py) settles it, carries the
repair that scores best. The stage runs after the turn: here as the agent runs it, with a check
runner where `may_run(command)` stands for the agent's gate."""

from __future__ import annotations

import shlex
import subprocess

import pytest

torch = pytest.importorskip("torch")

from clover.core.model_protocol import ToolCall  # noqa: E402
from clover.core.tool_protocol import tool_spec  # noqa: E402
from clover.model.decoder.score import continuation_logprobs  # noqa: E402
from clover.model.text.chat import PARAM_CLOSE  # noqa: E402
from clover.steering.edit_choice import edit_pairs, region, region_lines, with_edit  # noqa: E402
from clover.tools.environment import LocalEnvironment  # noqa: E402
from clover.tools.registry import default_tools  # noqa: E402
from tests.test_tool_grammar import clover as clover  # noqa: E402,F401 - the module fixture
from tests.test_tool_grammar import variant  # noqa: E402

CALC = "def add(a, b):\n    return a - b\n"
USER = [{"role": "user", "content": "add(2, 3) returns -1 instead of 5"}]
CALL = (
    "<tool_call>\n<function=str_replace>\n<parameter=path>\ncalc.py\n</parameter>\n"
    "<parameter=old_str>\n    return a - b\n</parameter>\n<parameter=new_str>\n    return a - b\n</parameter>\n"
    "</function>\n</tool_call>"
)


def tools() -> list[dict]:
    return [tool_spec(t) for t in default_tools() if t.name in ("str_replace", "view")]


def full_forward_score(net, ids: list[int], cont: list[int]) -> float:
    with torch.no_grad():
        logp = net(torch.tensor([ids + cont]))[0].float().log_softmax(-1)
    return sum(logp[len(ids) - 1 + j, t].item() for j, t in enumerate(cont))


def test_continuation_scores_are_the_causal_forwards(clover):
    gen = torch.Generator().manual_seed(0)
    prefix = torch.randint(20, 290, (37,), generator=gen).tolist()
    conts = [torch.randint(20, 290, (n,), generator=gen).tolist() for n in (1, 6, 3, 9)]
    got = continuation_logprobs(clover.net, prefix, conts)
    want = [full_forward_score(clover.net, prefix, c) for c in conts]
    assert got == pytest.approx(want, abs=1e-4)
    with pytest.raises(ValueError):
        continuation_logprobs(clover.net, [], conts)


class Bound:
    """A model bound to a workspace, with the check runner its turn stage gets (None: no check may
    run; else the checks `may_run(command)` allows run in the environment, as the agent runs them)."""

    def __init__(self, model, env, may_run=None) -> None:
        self.model, self.env, self.may_run = model, env, may_run
        model.bind_workspace(env)

    def __getattr__(self, name):
        return getattr(self.model, name)

    def run_check(self, check):
        if not self.may_run(shlex.join(check.argv)):
            return None
        return self.env.run(check.argv, timeout=check.timeout)

    def complete(self, messages, tools, **kw):
        """The model's turn, then its stage, as the agent runs them."""
        turn = self.model.complete(messages, tools, **kw)
        return staged(self.model, turn, messages, self.run_check if self.may_run is not None else None)


def staged(model, turn, messages, run_check=None):
    """`turn` as the model's turn stage settles it (the agent's Agent._review): calls, held reasons
    (on `turn.held`) and stats."""
    stage = model.turn_stage()
    turn.held = [None] * len(turn.tool_calls)
    if stage is not None and turn.tool_calls:
        decision = stage.review(turn, messages, run_check)
        turn.tool_calls, turn.held = decision.calls, decision.held
        turn.stats |= decision.stats
    return turn


def _bound(clover, tmp_path, may_run=None, **changes):
    (tmp_path / "calc.py").write_text(CALC)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    return Bound(variant(clover, **changes), LocalEnvironment(str(tmp_path)), may_run)


def _complete(model, user=USER):
    ids = model.tokenizer.encode(CALL) + [model.tokenizer.token_id("<|im_end|>")]
    return model.complete(user, tools(), forced=dict(enumerate(ids)))


def test_the_issues_reproduction_picks_the_edit_that_fixes_it(clover, tmp_path):
    """A random model's likeliest pair is arbitrary; run against the issue's example (where the
    policy lets it), the repair that makes `add(2, 3)` give 5 is the edit."""
    user = [{"role": "user", "content": "`add(2, 3)` returns -1 but should be 5."}]
    commands: list[str] = []
    model = _bound(
        clover, tmp_path, may_run=lambda c: commands.append(c) or True, edit_repairs="on", max_tokens=128
    )
    turn = _complete(model, user)
    args = turn.tool_calls[0].arguments
    assert (args["path"], args["old_str"], args["new_str"]) == (
        "calc.py",
        "    return a - b",
        "    return a + b",
    )
    assert turn.stats["verified_edits"] == 1 and turn.stats["reproduction_runs"] >= 1 and commands
    # refused by the policy: the model's likeliest pair, unverified
    model = _bound(clover, tmp_path, may_run=lambda c: False, edit_repairs="on", max_tokens=128)
    turn = _complete(model, user)
    assert turn.stats["verified_edits"] == 0 and turn.stats["reproduction_runs"] == 0


def test_a_no_op_edit_becomes_the_pair_the_model_finds_likeliest(clover, tmp_path):
    model = _bound(clover, tmp_path, edit_repairs="on", max_tokens=128)
    turn = _complete(model)
    (call,) = turn.tool_calls
    pairs = edit_pairs("    return a - b", CALC, "calc.py", USER[0]["content"], "")
    assert {o for o, _ in pairs} == {"def add(a, b):", "    return a - b"}  # the function around old_str
    got = (call.arguments["old_str"], call.arguments["new_str"])
    assert got in pairs and got[0] != got[1] and turn.stats["repaired_edits"] == 1
    assert f"<parameter=new_str>\n{got[1]}\n</parameter>" in call.raw
    # the choice is the argmax of the plain causal forward over prompt + reply + (old, new)
    ids, _ = model.prompt_ids(USER, tools())
    prefix = ids + model.tokenizer.encode(
        CALL[: CALL.index("<parameter=old_str>\n") + len("<parameter=old_str>\n")]
    )
    conts = [f"{o}\n</parameter>\n<parameter=new_str>\n{n}\n{PARAM_CLOSE}" for o, n in pairs]
    scores = [full_forward_score(model.net, prefix, model.tokenizer.encode(c)) for c in conts]
    assert got == pairs[max(range(len(pairs)), key=scores.__getitem__)]


PARSE = """def parse_line(line):
    account, amount = line.split("=")
    return account.strip(), float(amount)


def parse_all(text):
    items = []
    for line in text.split("\\n"):
        items.append(parse_line(line))
    return items
"""
LOOP = '    for line in text.split("\\n"):'
GUARD = LOOP + "\n        if not line.strip():\n            continue"
BLANK_LINES = [
    {"role": "user", "content": "parse_all crashes on files with blank lines. They should be skipped."}
]


def _call(path: str, old: str, new: str) -> str:
    return (
        f"<tool_call>\n<function=str_replace>\n<parameter=path>\n{path}\n</parameter>\n"
        f"<parameter=old_str>\n{old}\n</parameter>\n<parameter=new_str>\n{new}\n</parameter>\n"
        "</function>\n</tool_call>"
    )


def _edit(model, call: str, user):
    ids = model.tokenizer.encode(call) + [model.tokenizer.token_id("<|im_end|>")]
    turn = model.complete(user, tools(), forced=dict(enumerate(ids)))
    (got,) = turn.tool_calls
    return (got.arguments["old_str"], got.arguments["new_str"]), turn.stats


def test_the_models_own_edit_survives_when_no_check_exists(clover, tmp_path):
    """Given the correct 3-line fix, the likeliest one-site mutation replaced it (`return
    items` -> `return not items`). Without a check the model's edit stands as written, and no
    candidate is even scored; with the issue's example unable to run (the policy refuses), the same."""
    (tmp_path / "parse.py").write_text(PARSE)
    for may_run in (None, lambda c: False):
        model = Bound(
            variant(clover, edit_repairs="on", max_tokens=256), LocalEnvironment(str(tmp_path)), may_run
        )
        got, stats = _edit(model, _call("parse.py", LOOP, GUARD), BLANK_LINES)
        assert got == (LOOP, GUARD) and stats.get("repaired_edits", 0) == 0


def test_a_check_keeps_the_models_edit_when_it_passes_and_replaces_it_only_when_verified(clover, tmp_path):
    user = [{"role": "user", "content": "`add(2, 3)` returns -1 but should be 5."}]
    allow = lambda c: True  # noqa: E731
    # the model's own edit passes the issue's example: it is kept (and counted as verified)
    model = _bound(clover, tmp_path, may_run=allow, edit_repairs="on", max_tokens=128)
    got, stats = _edit(model, _call("calc.py", "    return a - b", "    return b + a"), user)
    assert got == ("    return a - b", "    return b + a") and stats["verified_edits"] == 1
    assert stats["repaired_edits"] == 0
    # a wrong edit of the model's: the repair the example verifies replaces it
    model = _bound(clover, tmp_path, may_run=allow, edit_repairs="on", max_tokens=128)
    got, stats = _edit(model, _call("calc.py", "    return a - b", "    return a * b"), user)
    assert got == ("    return a - b", "    return a + b") and stats["verified_edits"] == 1
    # nothing verifies another candidate (the example asks for something no repair gives): the model's edit stands
    odd = [{"role": "user", "content": "`add(2, 3)` returns -1 but should be 99."}]
    model = _bound(clover, tmp_path, may_run=allow, edit_repairs="on", max_tokens=128)
    got, stats = _edit(model, _call("calc.py", "    return a - b", "    return a * b"), odd)
    assert got == ("    return a - b", "    return a * b") and stats["repaired_edits"] == 0


def test_an_unusable_edit_is_repaired_unverified_at_most_once_per_file(clover, tmp_path):
    model = _bound(clover, tmp_path, edit_repairs="on", max_tokens=128)
    first, stats = _edit(model, CALL, USER)  # new_str = old_str: no edit at all
    assert first[0] != first[1] and stats["unverified_repairs"] == 1
    again, stats = _edit(model, CALL, USER)  # the same conversation, the same file: left as written
    assert again == ("    return a - b", "    return a - b") and "unverified_repairs" not in stats
    # an edit the tools would refuse (an undefined name) is no usable edit either; the budget is spent
    undefined, _ = _edit(model, _call("calc.py", "    return a - b", "    return a - bb"), USER)
    assert undefined == ("    return a - b", "    return a - bb")
    # another conversation has its own budget
    other, stats = _edit(model, CALL, [{"role": "user", "content": "add is wrong"}])
    assert other[0] != other[1] and stats["unverified_repairs"] == 1


@pytest.mark.parametrize("setting", ["off", "auto"])  # auto: the tiny checkpoint's config says no
def test_off_or_a_checkpoint_without_it_keeps_the_models_edit(clover, tmp_path, setting):
    turn = _complete(_bound(clover, tmp_path, edit_repairs=setting, max_tokens=128))
    assert turn.tool_calls[0].arguments["new_str"] == "    return a - b"
    assert "repaired_edits" not in turn.stats


def test_with_edit_rewrites_arguments_and_raw_text():
    call = ToolCall(
        "str_replace", {"path": "a.py", "old_str": "x = 1", "new_str": "x = 1"}, id="c1", raw="<old>"
    )
    out = with_edit(call, "y = 1", "y = 2")
    assert out.arguments == {"path": "a.py", "old_str": "y = 1", "new_str": "y = 2"} and out.id == "c1"
    assert "<parameter=new_str>\ny = 2\n</parameter>" in out.raw and call.arguments["new_str"] == "x = 1"


def test_region_is_the_enclosing_definition():
    lines = ["import os", "", "def f(x):", "    y = x", "    return y", "", "", "class C:", "    z = 1"]
    assert list(region(lines, 3)) == [2, 3, 4, 5, 6]
    assert list(region(lines, 8)) == [7, 8]
    long = ["def g():"] + [f"    v{i} = {i}" for i in range(100)]
    assert len(region(long, 60)) == 40 and 60 in region(long, 60)


def test_region_lines_and_pairs_for_the_kept_lines_only():
    text = "def f(a, b):\n    c = a + b\n    c = a + b\n    return c * 2\n\n\ndef g():\n    return 1\n"
    # the duplicated line cannot be an old_str (not unique); g is another definition
    assert region_lines("    return c * 2", text) == ["def f(a, b):", "    return c * 2"]
    pairs = edit_pairs("    return c * 2", text, "f.py", "", "", keep=["    return c * 2"])
    assert (
        pairs
        and {o for o, _ in pairs} == {"    return c * 2"}
        and ("    return c * 2", "    return c / 2") in pairs
    )


def test_the_agents_gate_decides_when_the_reproduction_may_run(clover, tmp_path):
    """A stage's check goes through the agent's current gate (the chat switching modes swaps it)."""
    from clover.core.stage_protocol import StageCheck
    from clover.runner import build_agent, build_gate
    from clover.settings import Settings

    model = variant(clover, edit_repairs="on")
    agent = build_agent(Settings(mode="yolo"), LocalEnvironment(str(tmp_path)), model=model)
    check = StageCheck(["python3", "-c", "pass"], 30.0, "a check")
    assert agent.run_check(check).returncode == 0
    agent.gate = build_gate(Settings(mode="ask"), tmp_path)  # the chat switching modes
    assert agent.run_check(check) is None
    agent.gate = build_gate(Settings(mode="ask", allow=["bash(python3 -c *)"]), tmp_path)
    assert agent.run_check(check).returncode == 0
