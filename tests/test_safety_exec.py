"""Deny rules in yolo: every row (and new spellings of each class) really removes `t` when
bash runs it, and through Clover it does not: stopped where the program starts (the exec check
alone, without the parser, in and out of the sandbox) and through the real agent loop (parser +
exec check). The tests look at the workspace, not at a decision."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clover.backends.scripted import ScriptedModel
from clover.runner import build_environment, run_agent
from clover.settings import Settings
from clover.tools.safety.execguard import unavailable_reason
from clover.tools.safety.sandbox import bwrap_available
from tests.safety_attack_rows import DENY, DENY_NEW, DENY_ROWS, GIT_ALIAS_ROWS, Row
from tests.safety_attacks import effects, make_workspace

needs_exec_check = pytest.mark.skipif(
    unavailable_reason() is not None, reason=f"no exec check here: {unavailable_reason()}"
)
SANDBOXES = [
    False,
    pytest.param(True, marks=pytest.mark.skipif(not bwrap_available(), reason="no usable bwrap")),
]
ROWS = [pytest.param(r, id=r.id) for r in DENY_ROWS + DENY_NEW]


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("tpl") / "ws")


def workspace(template: Path, tmp_path: Path, row: Row) -> Path:
    """A fresh copy of the template workspace (a real git repository with a remote), set up."""
    if why := row.missing():
        pytest.skip(why)
    subprocess.run(["cp", "-a", str(template.parent), str(tmp_path / "w")], check=True)
    ws = tmp_path / "w" / "ws"
    if row.setup:
        subprocess.run(["bash", "-c", row.setup], cwd=ws, check=True, capture_output=True)
    return ws


def _cleanup(row: Row) -> None:
    if "tmux" in row.command:
        subprocess.run(["tmux", "-L", "clover-row47", "kill-server"], capture_output=True)


@pytest.mark.parametrize("row", ROWS)
def test_each_row_really_removes_t_when_bash_runs_it(row: Row, template: Path, tmp_path: Path):
    ws = workspace(template, tmp_path, row)
    try:
        subprocess.run(
            ["bash", "-c", row.command], cwd=ws, capture_output=True, timeout=60, stdin=subprocess.DEVNULL
        )
    finally:
        _cleanup(row)
    assert "t removed" in effects(ws), row.command


@needs_exec_check
@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("row", ROWS)
def test_the_exec_check_alone_stops_each_row(row: Row, sandbox: bool, template: Path, tmp_path: Path):
    """No parser, no gate: the environment runs the command, and every program it starts is held
    against the deny rules as it starts (a copy, link, loader, script or interpreter included)."""
    ws = workspace(template, tmp_path, row)
    settings = Settings(mode="yolo", deny=DENY, sandbox=sandbox, checkpoints=False)
    env = build_environment(settings, ws)
    try:
        result = env.execute(row.command, timeout=60)
    finally:
        _cleanup(row)
    assert effects(ws) == set(), (row.command, result.output)
    assert "exec check: refused" in result.output or "Operation not permitted" in result.output, result.output


@needs_exec_check
@pytest.mark.parametrize("row", ROWS)
def test_the_agent_in_yolo_with_deny_rules_runs_none_of_them(row: Row, template: Path, tmp_path: Path):
    ws = workspace(template, tmp_path, row)
    settings = Settings(mode="yolo", deny=DENY, checkpoints=False)  # the sandbox wherever it works
    env = build_environment(settings, ws)
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": row.command}}]}, {"text": "done"}]
    try:
        result = run_agent("go", settings=settings, env=env, model=ScriptedModel(turns))
    finally:
        _cleanup(row)
    assert result.exit_status == "submitted"
    assert effects(ws) == set(), row.command


@needs_exec_check
def test_ordinary_work_runs_under_the_exec_check(tmp_path: Path):
    """Deny rules about rm do not get in the way of other programs or of rm without -rf."""
    ws = make_workspace(tmp_path / "ws")
    env = build_environment(Settings(mode="yolo", deny=DENY, checkpoints=False), ws)
    out = env.execute(
        "git status --short && python3 -c 'print(6 * 7)' && rm -f f && ls && "
        "printf 'all:\\n\\t@echo made\\n' > Makefile && make -s && git log --oneline | wc -l"
    )
    assert out.returncode == 0, out.output
    assert "42" in out.output and "made" in out.output and "refused" not in out.output
    assert not (ws / "f").exists() and (ws / "t" / "keep").exists()


@needs_exec_check
def test_a_refusal_names_the_program_and_the_rule(tmp_path: Path):
    ws = make_workspace(tmp_path / "ws")
    env = build_environment(Settings(mode="yolo", deny=DENY, sandbox=False, checkpoints=False), ws)
    out = env.execute("cp /bin/rm del; ./del -rf t; echo after").output
    assert "after" in out  # the command goes on; only that program start failed
    assert "refused to start `./del -rf t`: denied by rule bash(rm -rf *) (read as `rm -rf t`)" in out


@needs_exec_check
def test_a_daemon_left_behind_can_start_nothing(tmp_path: Path):
    """Outside the sandbox a background job can escape the process group (setsid); once its command
    ended, the check's listener is closed and every program start it tries fails."""
    ws = make_workspace(tmp_path / "ws")
    env = build_environment(Settings(mode="yolo", deny=DENY, sandbox=False, checkpoints=False), ws)
    env.execute("setsid sh -c 'sleep 2; touch pwned' > /dev/null 2>&1 < /dev/null &")
    import time

    time.sleep(3.5)
    assert not (ws / "pwned").exists()


E2E_ROWS = [
    "cp /bin/rm ./del; ./del -rf t",
    "rm --rec --fo t",
    "python3 -c \"import os; os.system('rm -rf t')\"",
    "sed --expr='1e rm -rf t' f",
    "git fetch -q --upload-pa='rm -rf t; git-upload-pack' .",
    "for PATH in evil:/usr/bin; do ls; done",
    "printf 'all:\\n\\trm -rf t\\n' > Makefile; make -s",
]


@needs_exec_check
def test_clover_fix_in_yolo_with_deny_rules_runs_none_of_the_rows(template: Path, tmp_path: Path):
    """Through the real CLI (a subprocess), a scripted model, the user's deny rules, `--yes`."""
    import json

    from tests.clihelp import isolated_env, run_fix

    subprocess.run(["cp", "-a", str(template.parent), str(tmp_path / "w")], check=True)
    ws = tmp_path / "w" / "ws"
    env = isolated_env(tmp_path)
    cfg = tmp_path / "cfg" / "clover" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("[permissions]\ndeny = [" + ", ".join(json.dumps(r) for r in DENY) + "]\n")
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": c}}]} for c in E2E_ROWS] + [
        {"text": "done"}
    ]
    (tmp_path / "script.json").write_text(json.dumps(turns))
    (tmp_path / "issue.md").write_text("Tidy up.")
    proc = run_fix(
        tmp_path / "issue.md",
        ws,
        "--yes",
        "--model",
        f"scripted:{tmp_path / 'script.json'}",
        "--trajectory",
        str(tmp_path / "t.jsonl"),
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert effects(ws) == set()
    outputs = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    tool_outputs = [r["output"] for r in outputs if r["type"] == "tool"]
    assert len(tool_outputs) == len(E2E_ROWS)
    assert all(o.startswith("Permission denied") or "exec check: refused" in o for o in tool_outputs), (
        tool_outputs
    )


@needs_exec_check
@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("row", [pytest.param(r, id=r.id) for r in GIT_ALIAS_ROWS])
def test_a_git_alias_hidden_in_a_script_pushes_nothing(
    row: Row, sandbox: bool, template: Path, tmp_path: Path
):
    ws = workspace(template, tmp_path, row)
    bare = subprocess.run(["bash", "-c", row.command], cwd=ws, capture_output=True, timeout=60)
    assert "pushed" in effects(ws), bare.stderr  # plain bash pushes
    subprocess.run(["git", "update-ref", "-d", "refs/heads/main"], cwd=ws.parent / "origin.git", check=True)
    env = build_environment(Settings(mode="yolo", deny=DENY, sandbox=sandbox, checkpoints=False), ws)
    result = env.execute(row.command)
    assert "pushed" not in effects(ws), result.output
    assert "names a git command" in result.output
