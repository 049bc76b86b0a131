"""Undo end to end through the real CLI with a scripted model in real git repositories:
undo reverts the agent's change and only that. (1) `clover fix --yes`, then the user's own
edits, then `clover undo`; (2) `/undo` as the first command of a new chat session; (3) a step
that moves `.git` aside behind a gitfile and plants a repository in a tracked directory."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clihelp import git_repo, isolated_env, run_clover, run_fix

ROOT = Path(__file__).resolve().parents[1]
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"


def user_env(tmp_path: Path) -> dict[str, str]:
    """An isolated user whose config turns the sandbox off (the same run with or without bwrap)."""
    env = isolated_env(tmp_path)
    cfg = tmp_path / "cfg" / "clover" / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text("sandbox = false\n")
    return env


def fix(tmp_path: Path, repo: Path, turns: list[dict], env: dict[str, str]) -> subprocess.CompletedProcess:
    (tmp_path / "issue.md").write_text("add(2, 3) returns -1 instead of 5.")
    (tmp_path / "script.json").write_text(json.dumps(turns))
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{tmp_path / 'script.json'}",
        "--yes",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


EDIT_CALC = [
    {"tool_calls": [{"name": "view", "arguments": {"path": "calc.py"}}]},
    {
        "tool_calls": [
            {
                "name": "str_replace",
                "arguments": {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"},
            }
        ]
    },
    {"text": "Fixed: add() subtracted."},
]


def test_clover_undo_after_fix_reverts_the_agent_and_keeps_the_users_edits(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"calc.py": BUGGY, "README.md": "# calc\n"})
    env = user_env(tmp_path)
    fix(tmp_path, repo, EDIT_CALC, env)
    assert (repo / "calc.py").read_text() == FIXED
    (repo / "notes.txt").write_text("my notes\n")  # the user, by hand, after the run
    with open(repo / "README.md", "a") as fh:
        fh.write("user edit\n")
    undo = run_clover("undo", "--repo", str(repo), env=env)
    assert undo.returncode == 0, undo.stderr
    lines = undo.stdout.splitlines()
    # the plan names the session, the request and the step, then each path with its diff summary
    assert (
        lines[0].startswith("undo: session fix-") and 'request 1 "fix issue.md: add(2, 3) returns' in lines[0]
    )
    assert lines[0].endswith("(step 2)")
    assert "  revert   calc.py  (modified by the agent, +1 -1)" in lines
    assert not any("notes.txt" in ln or "README" in ln for ln in lines)
    assert (repo / "calc.py").read_text() == BUGGY
    assert (repo / "notes.txt").read_text() == "my notes\n"
    assert (repo / "README.md").read_text() == "# calc\nuser edit\n"
    again = run_clover("undo", "--repo", str(repo), env=env)
    assert again.returncode == 1 and "nothing to undo" in again.stderr and "Traceback" not in again.stderr
    redo = run_clover("undo", "--redo", "--repo", str(repo), env=env)
    assert redo.returncode == 0, redo.stderr
    assert (repo / "calc.py").read_text() == FIXED and (repo / "notes.txt").exists()


def test_clover_undo_lists_a_conflict_and_force_saves_the_users_version(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"calc.py": BUGGY})
    env = user_env(tmp_path)
    fix(tmp_path, repo, EDIT_CALC, env)
    (repo / "calc.py").write_text(FIXED + "# the user's line\n")
    dry = run_clover("undo", "--repo", str(repo), "--dry-run", env=env)
    assert "  CONFLICT calc.py: changed since the agent's step; left alone" in dry.stdout
    undo = run_clover("undo", "--repo", str(repo), env=env)
    assert undo.returncode == 1 and "nothing can be done" in undo.stderr
    assert (repo / "calc.py").read_text() == FIXED + "# the user's line\n"
    forced = run_clover("undo", "--repo", str(repo), "--force", env=env)
    assert forced.returncode == 0, forced.stderr
    assert (repo / "calc.py").read_text() == BUGGY
    saved = [ln.split("saved to ", 1)[1] for ln in forced.stdout.splitlines() if "saved to " in ln]
    assert len(saved) == 1 and Path(saved[0]).read_text() == FIXED + "# the user's line\n"


def _chat(repo: Path, tmp_path: Path, script: list[dict], stdin: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "chat.json").write_text(json.dumps(script))
    env = {**user_env(tmp_path), "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "clover.repl",
            "--repo",
            str(repo),
            "--model",
            f"scripted:{tmp_path / 'chat.json'}",
            "--mode",
            "ask",
        ],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def test_undo_first_in_a_new_chat_session_leaves_files_made_outside_clover(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"hello.py": "def hello():\n    return 1\n", "README.md": "# hi\n"})
    edit = {
        "tool_calls": [
            {
                "name": "str_replace",
                "arguments": {"path": "hello.py", "old_str": "return 1", "new_str": "return 'hi'"},
            }
        ]
    }
    first = _chat(repo, tmp_path, [edit, {"text": "Changed."}], "change hello\ny\n/exit\n")
    assert first.returncode == 0, first.stderr
    assert (repo / "hello.py").read_text() == "def hello():\n    return 'hi'\n"
    big = os.urandom(3 * 1024 * 1024)  # made outside Clover, after that session
    (repo / "data.bin").write_bytes(big)
    with open(repo / "README.md", "a") as fh:
        fh.write("user edit\n")
    second = _chat(repo, tmp_path, [{"text": "unused"}], "/undo\n/exit\n")
    assert second.returncode == 0, second.stderr
    assert "nothing to undo in this session" in second.stdout + second.stderr
    assert (repo / "data.bin").read_bytes() == big
    assert (repo / "README.md").read_text() == "# hi\nuser edit\n"
    assert (repo / "hello.py").read_text() == "def hello():\n    return 'hi'\n"  # the earlier session's
    # `clover undo` names that session and reverts its edit, and nothing else.
    undo = run_clover("undo", "--repo", str(repo), env=user_env(tmp_path))
    assert undo.returncode == 0, undo.stderr
    assert "revert   hello.py" in undo.stdout and "data.bin" not in undo.stdout
    assert (repo / "hello.py").read_text() == "def hello():\n    return 1\n"
    assert (repo / "data.bin").read_bytes() == big


def test_chat_undo_reverts_this_sessions_request(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"hello.py": "def hello():\n    return 1\n"})
    edit = {
        "tool_calls": [
            {
                "name": "str_replace",
                "arguments": {"path": "hello.py", "old_str": "return 1", "new_str": "return 'hi'"},
            }
        ]
    }
    proc = _chat(
        repo, tmp_path, [edit, {"text": "Changed."}], "change hello\ny\n/undo\n/redo\n/undo\n/exit\n"
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "undo: session" in out and 'request 1 "change hello" (step 1)' in out
    assert "revert   hello.py  (modified by the agent, +1 -1)" in out
    assert "↶ undone: 1 path(s) changed (request 1: change hello)" in out
    assert "↷ redone: 1 path(s) changed" in out
    assert (repo / "hello.py").read_text() == "def hello():\n    return 1\n"


def test_a_moved_dotgit_and_a_planted_repository_lose_nothing(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"calc.py": BUGGY})
    (repo / "src").mkdir()
    (repo / "src" / "keep.py").write_text("x = 1\n")  # a tracked directory
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "src"], cwd=repo, check=True
    )
    log = subprocess.run(["git", "log", "--format=%H %s"], cwd=repo, capture_output=True, text=True).stdout
    turns = [
        {
            "tool_calls": [
                {
                    "name": "bash",
                    "arguments": {
                        "command": "mv .git .g && printf 'gitdir: .g\\n' > .git && git init -q src/t"
                    },
                }
            ]
        },
        {"text": "Reorganised."},
    ]
    proc = fix(tmp_path, repo, turns, user_env(tmp_path))
    # the step could not move the history away: .git stayed a whole repository (its copy .g and
    # the new src/t are what the step made), and the run says so
    assert (repo / ".git").is_dir() and (repo / ".g").is_dir() and (repo / "src" / "t" / ".git").is_dir()
    assert "left as they were: .git" in proc.stderr + proc.stdout or _said_in_trajectory(tmp_path, ".git")
    env = user_env(tmp_path)
    first = run_clover("undo", "--repo", str(repo), env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "delete   .g/" in first.stdout and "delete   src/t/" in first.stdout
    assert (repo / ".git").is_dir() and not (repo / ".g").exists()
    assert not (repo / "src" / "t").exists() and (repo / "src" / "keep.py").exists()
    second = run_clover("undo", "--repo", str(repo), env=env)  # the red team undid twice
    assert second.returncode == 1 and "nothing to undo" in second.stderr
    after = subprocess.run(["git", "log", "--format=%H %s"], cwd=repo, capture_output=True, text=True).stdout
    assert after == log  # the whole history, where it was
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert status == ""
    fsck = subprocess.run(["git", "fsck", "--strict"], cwd=repo, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


def _said_in_trajectory(tmp_path: Path, path: str) -> bool:
    runs = list((tmp_path / "state" / "runs").glob("*.jsonl"))
    return any(f"left as they were: {path}" in run.read_text() for run in runs)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_clover_undo_on_a_terminal_asks_before_acting(tmp_path: Path) -> None:
    from tests.test_chat_tmux import Tmux

    repo = git_repo(tmp_path / "repo", {"calc.py": BUGGY})
    env = user_env(tmp_path)
    fix(tmp_path, repo, EDIT_CALC, env)
    keep = {k: env[k] for k in ("HOME", "XDG_CONFIG_HOME", "CLOVER_HOME")}
    command = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**keep, "PYTHONPATH": str(ROOT)}.items())
    undo = f"{command} {shlex.quote(sys.executable)} -m clover undo --repo {shlex.quote(str(repo))}"
    term = Tmux(f'{undo}; echo "[exited $?]"; {undo}; echo "[exited $?]"; sleep 30', cwd=ROOT)
    try:
        screen = term.wait_for("Undo this? [y/N]")
        assert "  revert   calc.py  (modified by the agent, +1 -1)" in screen
        assert (repo / "calc.py").read_text() == FIXED  # shown, not done
        term.send("n", "Enter")
        term.wait_for("[exited 1]")
        assert "nothing was done" in term.screen() and (repo / "calc.py").read_text() == FIXED
        term.wait_for("Undo this? [y/N]", count=2)
        term.send("y", "Enter")
        term.wait_for("[exited 0]")
        assert (repo / "calc.py").read_text() == BUGGY
    finally:
        term.close()
