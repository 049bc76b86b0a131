"""The chat a daily user trusts, in a real terminal (tmux): an instruction typed at an approval is the
reply, never keys; a session remembers its backend; a failed request leaves no orphan turn; a long
paste is a placeholder while edited and whole in the scrollback; Ctrl-D leaves while the model loads."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from tests.test_chat_tmux import ROOT, Tmux, _git, pytestmark  # noqa: F401  (skips without tmux)


def _repo(path: Path) -> Path:
    path.mkdir()
    (path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    _git(path, "init", "-q")
    _git(path, "add", ".")
    _git(path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    return path


def _command(tmp_path: Path, repo: Path, *args: str) -> str:
    env = {
        "CLOVER_HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PYTHONPATH": str(ROOT),
        "TERM": "xterm-256color",
    }
    argv = [sys.executable, "-m", "clover.repl", "--repo", str(repo), *args]
    line = "env -u COLUMNS -u LINES " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return f'{line} {shlex.join(argv)}; echo "[exited $?]"; sleep 30'


def _script(tmp_path: Path, turns: list[dict], name: str = "script.jsonl") -> Path:
    script = tmp_path / name
    script.write_text("\n".join(json.dumps(t) for t in turns) + "\n")
    return script


def _exit(term: Tmux) -> str:
    term.type("/exit")
    term.send("Enter")
    return term.wait_for("[exited")


def test_an_instruction_typed_at_an_approval_is_the_reply_not_keys(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    pytest_call = {"name": "bash", "arguments": {"command": "python3 -m pytest -q"}}
    later = {"name": "bash", "arguments": {"command": "echo later-call-ran"}}
    script = _script(
        tmp_path, [{"tool_calls": [pytest_call]}, {"tool_calls": [later]}, {"text": "All done."}]
    )
    term = Tmux(_command(tmp_path, repo, "--model", f"scripted:{script}", "--mode", "ask"), cwd=ROOT)
    try:
        term.wait_for("› ")
        term.type("run the tests")
        term.send("Enter")
        screen = term.wait_for("Allow this call?")
        assert "allow commands starting with `python3 -m pytest`" in screen  # the `p` key is offered
        term.type("please run only test_add")  # `p` picked the prefix at HEAD, `a` of "please" the next
        term.wait_for("› please run only test_add")
        term.send("Enter")
        screen = term.wait_for("not run: you said: please run only test_add")
        term.wait_for("⏺ bash(echo later-call-ran)")
        screen = term.wait_for("Allow this call?")  # the later call is asked, not allowed
        assert "later-call-ran\n" not in screen
        term.send("n")
        term.wait_for("declined")
        term.type("/permissions")
        term.send("Enter")
        screen = term.wait_for("no approvals remembered this session")
        _exit(term)
    finally:
        term.close()
