"""Ask mode: allow rules let a command run unasked only when the parser proves it is
exactly the command the rule names, and then only the programs it names may start (the exec check);
prefix rules (`bash(python3 -m pytest:*)`) and the approval that offers one; approvals
show control characters escaped; "always" compares exact argv. Plan mode runs commands proven
read-only, in the read-only sandbox."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from clover.backends.scripted import ScriptedModel
from clover.core.model_protocol import ToolCall
from clover.repl.approvals import Approver
from clover.runner import build_environment, run_agent
from clover.settings import Settings
from clover.tools.safety.execguard import unavailable_reason
from clover.tools.safety.permissions import (
    PermissionGate,
    PermissionPolicy,
    Rule,
    command_prefix,
    offered_prefix,
)
from clover.tools.safety.sandbox import bwrap_available
from clover.tools.shell import BashTool
from clover.trajectory import Trajectory
from tests.safety_attack_rows import ALLOW_NEW, ALLOW_ROWS, AllowRow
from tests.safety_attacks import effects, make_workspace

needs_exec_check = pytest.mark.skipif(
    unavailable_reason() is not None, reason=f"no exec check here: {unavailable_reason()}"
)
needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="no usable bwrap")
ROWS = [pytest.param(r, id=r.command[:60]) for r in ALLOW_ROWS + ALLOW_NEW]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("tpl") / "ws")


def workspace(template: Path, tmp_path: Path, row: AllowRow) -> Path:
    if why := row.missing():
        pytest.skip(why)
    subprocess.run(["cp", "-a", str(template.parent), str(tmp_path / "w")], check=True)
    ws = tmp_path / "w" / "ws"
    if row.setup:
        subprocess.run(["bash", "-c", row.setup], cwd=ws, check=True, capture_output=True)
    return ws


def decide(mode: str, command: str, **rules) -> str:
    return PermissionPolicy(mode, **rules).decide("bash", {"command": command}, False)[0]


@pytest.mark.parametrize("row", ROWS)
def test_each_row_really_does_harm_when_bash_runs_it(row: AllowRow, template: Path, tmp_path: Path):
    ws = workspace(template, tmp_path, row)
    subprocess.run(
        ["bash", "-c", row.command], cwd=ws, capture_output=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert effects(ws) & {"pwned", "t removed"}, row.command


@needs_exec_check
@pytest.mark.parametrize("row", ROWS)
def test_allow_rules_run_none_of_them_unasked(row: AllowRow, template: Path, tmp_path: Path):
    """Headless ask mode with the row's allow rules (nobody to approve): nothing happens."""
    ws = workspace(template, tmp_path, row)
    settings = Settings(mode="ask", allow=list(row.allow), checkpoints=False)
    env = build_environment(settings, ws)
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": row.command}}]}, {"text": "done"}]
    run_agent(
        "go", settings=settings, env=env, model=ScriptedModel(turns), trajectory_path=tmp_path / "t.jsonl"
    )
    assert effects(ws) == set(), row.command
    output = [r["output"] for r in Trajectory.read(tmp_path / "t.jsonl") if r["type"] == "tool"][0]
    assert output.startswith("Not run") or "exec check: refused" in output, output


@pytest.mark.parametrize("row", [pytest.param(r, id=r.command[:60]) for r in ALLOW_ROWS])
def test_the_parser_alone_asks_for_each_issue_row(row: AllowRow):
    """Without the exec check (where it cannot work) the parser's proof is the answer: it asks."""
    assert decide("ask", row.command, allow=list(row.allow)) == "ask", row.command


def test_allow_rules_match_exact_argv_of_literal_lines():
    allow = ["bash(git status*)", "bash(make test)", "bash(echo *)"]
    assert decide("ask", "git status --short", allow=allow) == "allow"
    assert decide("ask", "make   test", allow=allow) == "allow"  # the same argv
    assert decide("ask", "git status && make test", allow=allow) == "allow"
    for command in [
        "make test2",
        "make 'test'x",
        "echo $(id)",
        "echo `id`",
        "echo ${HOME}",
        "echo *.py",
        "for x in a; do echo $x; done",
        "if true; then make test; fi",
        "echo hi > out",
        "f() { echo; }; f",
        "bash -c 'make test'",
        "git status; touch x",
    ]:
        assert decide("ask", command, allow=allow) == "ask", command


def test_always_compares_exact_argv_not_squashed_text():
    """The red team's row: "always" for `ssh devbox touch p` also allowed `ssh devbox⏎touch p`."""
    answers = ["always", "no"]
    gate = PermissionGate(PermissionPolicy("ask"), lambda call, tool, why: answers.pop(0))
    bash = BashTool()
    assert gate.authorize(ToolCall("bash", {"command": "ssh devbox touch pwned"}), bash) is None
    assert (
        gate.authorize(ToolCall("bash", {"command": "ssh  devbox   touch pwned"}), bash) is None
    )  # same argv
    refusal = gate.authorize(ToolCall("bash", {"command": "ssh devbox\ntouch pwned"}), bash)
    assert refusal is not None and "declined" in refusal
    assert gate.authorize(ToolCall("bash", {"command": "ssh 'devbox touch pwned'"}), bash) is not None


def test_the_newline_row_really_does_harm(tmp_path: Path):
    subprocess.run(
        ["bash", "-c", "ssh -o BatchMode=yes -o ConnectTimeout=1 devbox\ntouch pwned"],
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert (tmp_path / "pwned").exists()


# --------------------------------------------------------------------------- prefix rules


def test_prefix_rules_match_whole_leading_words_of_literal_commands():
    allow = ["bash(python3 -m pytest:*)"]
    for command in [
        "python3 -m pytest",
        "python3 -m pytest -q tests/test_x.py",
        "python3 -m pytest -k 'a or b'",
    ]:
        assert decide("ask", command, allow=allow) == "allow", command
    for command in [
        "python3 -m pytestx",
        "python3 -m pytest; rm x",
        "python3 -m pytest $(id)",
        "python3 -m",
        "python3 -m pytest > out",
        "python3 -c 'import pytest'",
        "cd x && python3 -m pytest",
    ]:
        assert decide("ask", command, allow=allow) == "ask", command
    assert decide("yolo", "rm -rf /tmp/x", deny=["bash(rm:*)"]) == "deny"
    assert decide("yolo", "rmdir x", deny=["bash(rm:*)"]) == "allow"
    with pytest.raises(ValueError):
        Rule("bash(:*)")


def test_the_offered_prefix_names_the_action_not_its_arguments():
    assert command_prefix(["python3", "-m", "pytest", "tests/x.py", "-q"]) == ["python3", "-m", "pytest"]
    assert command_prefix(["npm", "run", "test", "--", "--watch"]) == ["npm", "run", "test"]
    assert command_prefix(["git", "log", "--oneline"]) == ["git", "log"]
    assert command_prefix(["cargo", "test", "--release"]) == ["cargo", "test"]
    assert command_prefix(["ls", "-la"]) == ["ls"]
    assert offered_prefix("bash", {"command": "python3 -m pytest -q"}) == ["python3", "-m", "pytest"]
    for command in ["ls; rm x", "for f in a; do ls; done", "ls $(id)", "sudo ls", "ls > x"]:
        assert offered_prefix("bash", {"command": command}) is None, command


def test_a_prefix_answer_remembers_the_prefix_rule():
    answers = ["prefix"]
    gate = PermissionGate(PermissionPolicy("ask"), lambda call, tool, why: answers.pop(0))
    bash = BashTool()
    assert gate.authorize(ToolCall("bash", {"command": "python3 -m pytest -q"}), bash) is None
    assert gate.authorize(ToolCall("bash", {"command": "python3 -m pytest tests/a.py -x"}), bash) is None
    assert [r.text for r in gate.remembered] == ["bash(python3 -m pytest:*)"]
    answers.append("no")
    assert gate.authorize(ToolCall("bash", {"command": "python3 -m pip install x"}), bash) is not None


def _approver(answers: list[str]) -> tuple[Approver, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200, color_system=None)
    return Approver(console, ".", lambda question: answers.pop(0)), out


def test_the_approval_offers_the_prefix_and_accepts_p():
    approver, out = _approver(["p"])
    answer = approver(
        ToolCall("bash", {"command": "python3 -m pytest -q"}, id="1"), BashTool(), "needs approval"
    )
    assert answer == "prefix"
    assert "always allows commands starting with `python3 -m pytest`" in out.getvalue()
    approver, out = _approver(["p", "n"])  # no prefix on offer: `p` is not an answer
    assert approver(ToolCall("bash", {"command": "ls; rm x"}, id="2"), BashTool(), "") == "no"
    assert "starting with" not in out.getvalue()


def test_the_approval_preview_shows_control_characters_escaped():
    """`touch p #\\e[2K\\e[1Gls -la` repainted itself as `ls -la` in the preview."""
    approver, out = _approver(["n"])
    approver(ToolCall("bash", {"command": "touch pwned #\x1b[2K\x1b[1Gls -la"}, id="1"), BashTool(), "")
    shown = out.getvalue()
    assert "\x1b" not in shown and "touch pwned #\\e[2K\\e[1Gls -la" in shown
    approver, out = _approver(["n"])
    approver(ToolCall("bash", {"command": "ls\rrm -rf t \u202e"}, id="2"), BashTool(), "")
    assert "ls\\rrm -rf t \\u202e" in out.getvalue()


# --------------------------------------------------------------------------- what an approval covers


@needs_exec_check
@pytest.mark.parametrize("answer, runs", [("no", False), ("yes", True), ("always", True)])
def test_a_program_the_approval_did_not_name_is_asked_about(answer: str, runs: bool, tmp_path: Path):
    """`make` was approved; its recipe starts `touch pwned`, which the approval did not name: the
    command waits while the user is asked; "always" is not asked again."""
    ws = make_workspace(tmp_path / "ws")
    (ws / "Makefile").write_text("all:\n\ttouch pwned\n")
    asked: list[tuple[str, str]] = []

    def ask_user(call, tool, why):
        asked.append((call.name, call.arguments["command"]))
        return "yes" if call.name == "bash" else answer

    settings = Settings(mode="ask", checkpoints=False)
    env = build_environment(settings, ws)
    gate = PermissionGate(PermissionPolicy("ask"), ask_user)
    env.exec_guard.gate_of = lambda: gate
    call = ToolCall("bash", {"command": "make -s"}, id="1")
    assert gate.authorize(call, BashTool()) is None
    result = BashTool().run(call.arguments, env)
    assert asked == [("bash", "make -s"), ("exec", "touch pwned")]
    assert (ws / "pwned").exists() == runs, result.output
    if not runs:
        assert "refused to start `touch pwned` (started by `make -s`): the user declined" in result.output
    if answer == "always":
        (ws / "pwned").unlink()
        assert gate.authorize(call, BashTool()) is None
        BashTool().run(call.arguments, env)
        assert len(asked) == 3 and (ws / "pwned").exists()  # the make line asked, its recipe did not


@needs_exec_check
def test_headless_a_program_the_approval_did_not_name_is_refused(tmp_path: Path):
    ws = make_workspace(tmp_path / "ws")
    (ws / "Makefile").write_text("all:\n\ttouch pwned\n")
    settings = Settings(mode="ask", allow=["bash(make -s)"], checkpoints=False)
    env = build_environment(settings, ws)
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": "make -s"}}]}, {"text": "done"}]
    run_agent(
        "go", settings=settings, env=env, model=ScriptedModel(turns), trajectory_path=tmp_path / "t.jsonl"
    )
    assert not (ws / "pwned").exists()
    output = [r["output"] for r in Trajectory.read(tmp_path / "t.jsonl") if r["type"] == "tool"][0]
    assert "refused to start `touch pwned`" in output


# --------------------------------------------------------------------------- plan mode


def test_plan_mode_allows_only_lines_proven_read_only():
    reads = [
        "ls",
        "ls -la src",
        "git status",
        "git log --oneline -5",
        "git diff HEAD~1",
        "cat a.py | head -20",
        "grep -rn foo .",
        "rg -n foo",
        "find . -name '*.py'",
        "sed -n 1,20p a.py",
        "wc -l *.py",
        "pwd",
        "git branch",
        "git show HEAD:a.py",
        "awk '{print $1}' f",
        "cd src && ls",
    ]
    writes = [
        "touch x",
        "rm -rf t",
        "git commit -m x",
        "git log --output=x",
        "find . -delete",
        "find . -exec rm {} +",
        "sed -i s/a/b/ f",
        "sed -n '1e id' f",
        "ls > x",
        "git branch new",
        "sort -o f f",
        "python3 -c 'print(1)'",
        "echo $(touch x)",
        "awk '{print > \"x\"}' f",
        "git -c core.pager=x log",
        "uniq a b",
        "env rm x",
        "rg --pre=x foo",
        "tee x",
    ]
    policy = PermissionPolicy("plan", plan_commands=True)
    for command in reads:
        assert policy.decide("bash", {"command": command}, False)[0] == "allow", command
    for command in writes:
        decision, reason = policy.decide("bash", {"command": command}, False)
        assert decision == "deny" and "plan mode" in reason, command
    no_sandbox = PermissionPolicy("plan", plan_commands=False).decide("bash", {"command": "ls"}, False)
    assert no_sandbox[0] == "deny" and "sandbox" in no_sandbox[1]


@needs_bwrap
def test_plan_mode_runs_read_only_commands_in_the_read_only_sandbox(tmp_path: Path):
    ws = make_workspace(tmp_path / "ws")
    subprocess.run(["git", "config", "core.fsmonitor", "touch pwned"], cwd=ws, check=True)
    settings = Settings(mode="plan", checkpoints=False)
    env = build_environment(settings, ws)
    commands = ["ls", "git status --short", "cat f", "touch made"]
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": c}}]} for c in commands] + [
        {"text": "ok"}
    ]
    run_agent(
        "look", settings=settings, env=env, model=ScriptedModel(turns), trajectory_path=tmp_path / "t.jsonl"
    )
    outputs = [r["output"] for r in Trajectory.read(tmp_path / "t.jsonl") if r["type"] == "tool"]
    assert "evil" in outputs[0] and "hello" in outputs[2]
    assert outputs[3].startswith("Permission denied: plan mode")
    assert not (ws / "made").exists() and not (ws / "pwned").exists()  # fsmonitor never ran


@needs_bwrap
def test_a_read_only_grant_cannot_write_whatever_the_command(tmp_path: Path):
    """The sandbox is the guarantee, not the proof: a grant for a read-only line runs it with the
    workspace read-only."""
    from clover.tools.safety.execgrant import Grant

    ws = make_workspace(tmp_path / "ws")
    env = build_environment(Settings(mode="plan", checkpoints=False), ws)

    class OneGrant:
        def take_grant(self, command):
            return Grant(everything=True, read_only=True, label=command)

    env.exec_guard.gate_of = OneGrant
    out = env.execute("echo x > made; rm -rf t; ls t").output
    assert "Read-only file system" in out and not (ws / "made").exists() and (ws / "t" / "keep").exists()


@needs_exec_check
def test_clover_fix_in_ask_mode_with_allow_rules_runs_none_of_the_rows(template: Path, tmp_path: Path):
    """Through the real CLI with the README's kind of allow rules and nobody to approve."""
    import json

    from tests.clihelp import isolated_env, run_fix

    subprocess.run(["cp", "-a", str(template.parent), str(tmp_path / "w")], check=True)
    ws = tmp_path / "w" / "ws"
    subprocess.run(["git", "config", "core.fsmonitor", "touch pwned"], cwd=ws, check=True)
    subprocess.run(["tar", "-cf", "a.tar", "f"], cwd=ws, check=True)
    allow = ["bash(git status*)", "bash(test *)", "bash(tar *)", "bash(sed -n *)", "bash(git log*)"]
    commands = [
        "git status --short",
        "test -v 'a[$(touch pwned)]'",
        "tar --to-com='touch pwned' -xf a.tar",
        "sed -n '1e touch pwned' f",
        "git log -1 --output=pwned",
        "for HOME in evil; do git status; done",
    ]
    cfg = tmp_path / "cfg" / "clover" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[permissions]\nallow = [" + ", ".join(json.dumps(r) for r in allow) + "]\n")
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": c}}]} for c in commands] + [
        {"text": "ok"}
    ]
    (tmp_path / "script.json").write_text(json.dumps(turns))
    (tmp_path / "issue.md").write_text("Look around.")
    proc = run_fix(
        tmp_path / "issue.md",
        ws,
        "--model",
        f"scripted:{tmp_path / 'script.json'}",
        "--trajectory",
        str(tmp_path / "t.jsonl"),
        env=isolated_env(tmp_path),
    )
    assert "Traceback" not in proc.stderr
    assert effects(ws) == set()
    outputs = [r["output"] for r in Trajectory.read(tmp_path / "t.jsonl") if r["type"] == "tool"]
    assert "exec check: refused to start" in outputs[0]  # `git status` ran; its fsmonitor did not
    assert all(o.startswith("Not run") for o in outputs[1:]), outputs
