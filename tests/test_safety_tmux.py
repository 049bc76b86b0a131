"""In a real terminal (tmux): plan mode runs `ls` and `git status`, and refuses a write;
an approval offers a prefix rule (`[p]`) that then covers the next test run; a command's control
characters show escaped in the approval; a program the approved command did not name is asked
about while the command waits."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clover.tools.safety.execguard import unavailable_reason
from clover.tools.safety.sandbox import bwrap_available
from tests.test_chat_tmux import ROOT, Tmux

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def _chat(tmp_path: Path, repo: Path, turns: list[dict], mode: str) -> Tmux:
    script = tmp_path / "script.jsonl"
    script.write_text("\n".join(json.dumps(t) for t in turns) + "\n")
    env = {
        "CLOVER_HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PYTHONPATH": str(ROOT),
        "TERM": "xterm-256color",
    }
    argv = [
        sys.executable,
        "-m",
        "clover.repl",
        "--repo",
        str(repo),
        "--model",
        f"scripted:{script}",
        "--mode",
        mode,
    ]
    command = (
        "env -u COLUMNS -u LINES "
        + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        + " "
        + shlex.join(argv)
    )
    return Tmux(f'{command}; echo "[exited $?]"; sleep 30', cwd=ROOT)


def _repo(path: Path) -> Path:
    path.mkdir()
    (path / "notes.txt").write_text("plan me\n")
    for args in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "i"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    return path


@pytest.mark.skipif(not bwrap_available(), reason="plan mode runs commands only in the sandbox")
def test_plan_mode_runs_ls_and_git_status_in_a_real_terminal(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    (repo / "untracked.txt").write_text("x\n")
    turns = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "git status --short"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "touch made"}}]},
        {"text": "Looked around."},
    ]
    term = _chat(tmp_path, repo, turns, "plan")
    try:
        term.wait_for("mode plan")
        term.wait_for("› ")
        term.type("what is here?")
        term.send("Enter")
        screen = term.wait_for("Looked around.", timeout=60)
        assert "notes.txt" in screen and "?? untracked.txt" in screen
        assert "plan mode: bash(touch made) would run a command" in screen
        assert "Allow?" not in screen  # plan mode never asks
        term.type("/exit")
        term.send("Enter")
        term.wait_for("[exited 0]")
    finally:
        term.close()
    assert not (repo / "made").exists()


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"no exec check: {unavailable_reason()}")
def test_the_prefix_offer_escapes_and_a_question_about_a_started_program(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    (repo / "mod.py").write_text("print('mod ran')\n")
    (repo / "Makefile").write_text("all:\n\ttouch pwned\n")
    turns = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "python3 -m mod -v"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "python3 -m mod -q"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "touch p #\x1b[2K\x1b[1Gls -la"}}]},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "make -s"}}]},
        {"text": "All done."},
    ]
    term = _chat(tmp_path, repo, turns, "ask")
    try:
        term.wait_for("› ")
        term.type("run the module")
        term.send("Enter")
        screen = term.wait_for("Allow this call?")
        assert "Yes, and allow commands starting with `python3 -m mod` this session  (p)" in screen
        term.send("p")  # one key
        term.wait_for("mod ran", count=2, timeout=60)  # the second run was not asked about
        screen = term.wait_for("Allow this call?", timeout=60)
        assert "⏺ bash(touch p #\\e[2K\\e[1Gls -la)" in screen  # shown as written, not repainted
        term.send("Escape")  # no: the turn stops and waits for the user
        term.wait_for("declined", timeout=60)
        term.type("go on")
        term.send("Enter")
        term.wait_for("bash(make -s)", timeout=60)
        term.wait_for("Allow this call?", timeout=60)
        term.send("y")  # make -s
        screen = term.wait_for("`make -s` is starting `touch pwned`", timeout=60)
        term.wait_for("Allow this call?", timeout=60)
        term.send("n")
        screen = term.wait_for("refused to start `touch pwned`", timeout=60)
        term.type("/exit")
        term.send("Enter")
        term.wait_for("[exited 0]")
    finally:
        term.close()
    assert not (repo / "pwned").exists() and not (repo / "p").exists()
