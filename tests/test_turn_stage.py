"""The local model's turn stage (steering/turn_stage.py) as the agent runs it: the backend only
answers (its `complete` runs nothing in the environment), and the issue's example that the stage
checks candidate edits against runs through the agent: its gate decides about the exact command,
the environment runs it as a check, and the trajectory records it as a tool event marked as the
stage's check, refused or run."""

from __future__ import annotations

import subprocess

import pytest

from clover.agent import Agent
from clover.agent_run import Limits
from clover.core.environment_protocol import RunResult
from clover.core.model_protocol import ModelCapabilities
from clover.core.stage_protocol import StageCheck
from clover.core.tool_protocol import tool_spec
from clover.tools.environment import LocalEnvironment
from clover.tools.safety.permissions import PermissionGate, PermissionPolicy
from clover.trajectory import Trajectory

torch = pytest.importorskip("torch")

from clover.tools.registry import default_tools  # noqa: E402
from tests.test_tool_grammar import clover as clover  # noqa: E402,F401 - the module fixture
from tests.test_tool_grammar import variant  # noqa: E402

CALC = "def add(a, b):\n    return a - b\n"
ISSUE = "`add(2, 3)` returns -1 but should be 5."
CALL = (  # a no-op edit of the faulty line: the stage picks the repair the issue's example verifies
    "<tool_call>\n<function=str_replace>\n<parameter=path>\ncalc.py\n</parameter>\n"
    "<parameter=old_str>\n    return a - b\n</parameter>\n<parameter=new_str>\n    return a - b\n</parameter>\n"
    "</function>\n</tool_call>"
)


def _tools():
    return [t for t in default_tools() if t.name in ("str_replace", "view")]


class Forced(ModelCapabilities):
    """The local model, its reply forced to `text` (a random checkpoint writes no useful call)."""

    def __init__(self, model, text: str) -> None:
        self.model, self.name, self.context_window = model, model.name, model.context_window
        ids = model.tokenizer.encode(text) + [model.tokenizer.token_id("<|im_end|>")]
        self.forced = dict(enumerate(ids))

    def complete(self, messages, tools, on_event=None, options=None):
        return self.model.complete(messages, tools, on_event, options, forced=self.forced)

    def bind_workspace(self, env) -> None:
        self.model.bind_workspace(env)

    def turn_stage(self):
        return self.model.turn_stage()


def _repo(root):
    root.mkdir(exist_ok=True)
    (root / "calc.py").write_text(CALC)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return LocalEnvironment(str(root))


def _fix(clover, tmp_path, mode: str):
    env = _repo(tmp_path / "repo")
    model = Forced(variant(clover, edit_repairs="on", max_tokens=128), CALL)
    model.bind_workspace(env)
    path = tmp_path / "trajectory.jsonl"
    agent = Agent(
        model,
        env,
        _tools(),
        system_prompt="s",
        gate=PermissionGate(PermissionPolicy(mode, root=env.root)),
        trajectory=Trajectory(path),
        limits=Limits(max_steps=1, wrap_up=False),
    )
    agent.run(ISSUE)
    agent.trajectory.close()
    records = Trajectory.read(path)
    checks = [r for r in records if r.get("check") == "turn_stage"]
    return env, records, checks


def test_the_stages_example_run_is_a_recorded_tool_event(clover, tmp_path):
    env, records, checks = _fix(clover, tmp_path, "yolo")
    assert checks and all(r["type"] == "tool" and r["name"] == "bash" for r in checks)
    assert not any(r["denied"] for r in checks) and checks[0]["arguments"]["command"].startswith(
        "python3 -c "
    )
    assert "candidate edit" in checks[0]["purpose"]
    # recorded before the turn it settled, which carries the verified edit, and that edit ran
    (turn,) = [r for r in records if r["type"] == "assistant"]
    assert records.index(checks[0]) < records.index(turn) and turn["stats"]["verified_edits"] == 1
    assert turn["tool_calls"][0]["arguments"]["new_str"] == "    return a + b"
    assert (tmp_path / "repo" / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    # a check is not a call of the model's: no tool message answers it
    assert [r["name"] for r in records if r["type"] == "tool" and not r.get("check")] == ["str_replace"]


def test_the_stages_example_run_is_refused_when_the_gate_refuses_it(clover, tmp_path):
    _, records, checks = _fix(clover, tmp_path, "ask")  # headless: no one to approve, so refused
    assert len(checks) == 1 and checks[0]["denied"] and checks[0]["is_error"]
    assert "no one can approve" in checks[0]["output"]
    (turn,) = [r for r in records if r["type"] == "assistant"]
    assert turn["stats"]["reproduction_runs"] == 0 and turn["stats"]["verified_edits"] == 0


class NoRunEnvironment(LocalEnvironment):
    """An environment whose `run` raises: its files are listed without git."""

    def run(self, argv, cwd=None, timeout=None):
        raise AssertionError(f"env.run was called: {argv[:2]}")

    def list_files(self, base: str) -> list[str]:
        return ["calc.py"]


def test_the_local_backend_never_runs_anything_in_the_environment(clover, tmp_path):
    """Grounded, with edit repairs and competence limits on, and an issue with an example to run:
    `complete` reads the workspace's files and runs nothing; the example is the stage's to ask for."""
    import dataclasses

    _repo(tmp_path)
    env = NoRunEnvironment(str(tmp_path))
    model = variant(clover, edit_repairs="on", max_tokens=128)
    model.config = dataclasses.replace(clover.config, max_repo_files=10, min_reply_logprob=-100.0)
    model.bind_workspace(env)
    turn = Forced(model, CALL).complete(
        [{"role": "user", "content": ISSUE}], [tool_spec(t) for t in _tools()]
    )
    assert turn.tool_calls[0].name == "str_replace" and "verified_edits" not in turn.stats
    asked: list[StageCheck] = []
    decision = model.turn_stage().review(turn, [{"role": "user", "content": ISSUE}], asked.append)
    assert asked and asked[0].argv[:2] == ["python3", "-c"]  # asked of the agent's runner, refused (None)
    assert decision.stats["reproduction_runs"] == 0 and decision.held == [None]


class Runs:
    """An environment stand-in that records the programs it runs."""

    root = "/nowhere"

    def __init__(self) -> None:
        self.ran: list[list[str]] = []

    def run(self, argv, cwd=None, timeout=None):
        self.ran.append(argv)
        return RunResult(0, b"[]\n")


@pytest.mark.parametrize(
    ("policy", "runs"),
    [
        (PermissionPolicy("yolo"), True),
        (PermissionPolicy("ask"), False),
        (PermissionPolicy("yolo", deny=["bash(python3*)"]), False),
        (PermissionPolicy("ask", allow=["bash(python3 -c *)"]), True),
    ],
)
def test_the_gate_decides_whether_a_stage_check_runs(policy, runs):
    env, trajectory = Runs(), []
    agent = Agent(ModelCapabilities(), env, [], system_prompt="s", gate=PermissionGate(policy))
    agent.trajectory = trajectory  # any object with `append`
    got = agent.run_check(StageCheck(["python3", "-c", "print(1)", "{}"], 5.0, "an example"))
    assert (got is not None) is runs and (env.ran == [["python3", "-c", "print(1)", "{}"]]) is runs
    (record,) = trajectory
    assert record["check"] == "turn_stage" and record["denied"] is not runs
    assert record["arguments"] == {"command": "python3 -c 'print(1)' '{}'"}


@pytest.mark.parametrize(
    ("policy", "runs"),
    [
        (PermissionPolicy("yolo"), True),
        (PermissionPolicy("ask", allow=["bash(python3 -c *)"]), True),
        (PermissionPolicy("ask"), False),
        (PermissionPolicy("yolo", deny=["bash(python3*)"]), False),
    ],
)
def test_a_stage_check_leaves_no_grant_in_the_gate(tmp_path, policy, runs):
    """A check is authorized for its exact command and run by `env.run`, which takes no grant from
    the gate: the check consumes the grant it was given, so none is left for a later command."""
    from clover.tools.safety.execguard import ExecGuard, unavailable_reason

    guard = ExecGuard(PermissionPolicy("yolo"), check=unavailable_reason() is None)
    env = LocalEnvironment(str(tmp_path), exec_guard=guard)
    gate = PermissionGate(policy)
    agent = Agent(ModelCapabilities(), env, [], system_prompt="s", gate=gate)
    guard.gate_of = lambda: agent.gate
    agent.trajectory = []  # any object with `append`
    got = agent.run_check(StageCheck(["python3", "-c", "print(6 * 7)"], 10.0, "an example"))
    assert (got is not None and got.stdout == b"42\n") is runs
    assert gate.grants == {}
