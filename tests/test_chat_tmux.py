"""Drive the real chat program in a real terminal (tmux): edit with approval, /diff, /undo,
Ctrl-C during a long shell command, a follow-up in the same session, /exit."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    def __init__(self, command: str, cwd: Path, width: int = 110, height: int = 40) -> None:
        self.socket = f"clover-test-{uuid.uuid4().hex[:8]}"
        self.name = "chat"
        self._tmux(
            "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height), "-c", str(cwd), command
        )

    def _tmux(self, *args: str) -> str:
        proc = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10)
        return proc.stdout

    def send(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.name, *keys)

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-t", self.name, "-l", text)

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-t", self.name, "-S", "-2000")

    def wait_for(self, text: str, timeout: float = 15.0, count: int = 1) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if screen.count(text) >= count:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} (x{count}) did not appear; the screen:\n{self.screen()}")

    def close(self) -> None:
        keep = os.environ.get("CLOVER_TEST_SCREENS")  # a folder: keep each test's last screen (for reviews)
        if keep:
            test = os.environ.get("PYTEST_CURRENT_TEST", "screen").split(" ")[0].split("::")[-1]
            Path(keep).mkdir(parents=True, exist_ok=True)
            (Path(keep) / f"{test}.txt").write_text(self.screen())
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=10)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_chat_in_a_real_terminal(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "hello.py").write_text("def hello():\n    return 1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    script = tmp_path / "script.jsonl"
    turns = [
        {
            "thinking": "The user wants a greeting; edit hello.py.",
            "tool_calls": [
                {
                    "name": "str_replace",
                    "arguments": {"path": "hello.py", "old_str": "return 1", "new_str": "return 'hello'"},
                }
            ],
        },
        {"text": "Done: `hello()` now returns a greeting."},
        {"tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]},
        {"text": "never shown", "delay": 30},
        {"text": "Still here after the interruption."},
    ]
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
        "ask",
    ]
    # tmux started without a terminal hands its panes COLUMNS=80 / LINES=24: drop them.
    command = (
        "env -u COLUMNS -u LINES "
        + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        + " "
        + shlex.join(argv)
    )
    term = Tmux(f'{command}; echo "[exited $?]"; sleep 30', cwd=ROOT)
    try:
        term.wait_for("Clover chat · model scripted:script.jsonl · mode ask")
        term.wait_for("› ")
        # Ask for a change: the diff is shown before the approval question.
        term.type("make hello return a greeting")
        term.send("Enter")
        screen = term.wait_for("Allow this edit?")
        assert "⏺ str_replace(hello.py)" in screen
        assert "-    return 1" in screen and "+    return 'hello'" in screen
        assert (repo / "hello.py").read_text() == "def hello():\n    return 1\n"  # not yet
        term.send("y")  # one key, no Enter
        screen = term.wait_for("Done: hello() now returns a greeting.")
        assert "∴ thought for" in screen
        assert (repo / "hello.py").read_text() == "def hello():\n    return 'hello'\n"
        # /diff shows the session's change; /undo restores the file.
        term.type("/diff")
        term.send("Enter")
        term.wait_for("diff --git a/hello.py b/hello.py")
        term.type("/undo")
        term.send("Enter")
        screen = term.wait_for("Undo this? [y/N]")  # the plan first: the path and its diff summary
        assert "revert   hello.py  (modified by the agent, +1 -1)" in screen
        term.send("y", "Enter")
        term.wait_for("undone: 1 path(s) changed")
        assert (repo / "hello.py").read_text() == "def hello():\n    return 1\n"
        # A long command, approved, then Ctrl-C: back at the prompt well before it would end.
        term.type("run the slow job")
        term.send("Enter")
        term.wait_for("Allow this call?")
        assert "⏺ bash(sleep 30)" in term.screen()
        term.send("y")
        term.wait_for("running bash(sleep 30)")
        started = time.monotonic()
        term.send("C-c")
        term.wait_for("interrupted: back at the prompt")
        assert time.monotonic() - started < 5
        # Ctrl-C while the model is still generating.
        term.type("think hard")
        term.send("Enter")
        term.wait_for("working ·")
        term.send("C-c")
        term.wait_for("interrupted: back at the prompt", count=2)
        # The session is intact: a follow-up goes to the same conversation.
        term.type("are you still there?")
        term.send("Enter")
        term.wait_for("Still here after the interruption.")
        term.type("/exit")
        term.send("Enter")
        screen = term.wait_for("[exited 0]")
        assert "Traceback" not in screen
        assert "saved · clover chat --resume" in screen
    finally:
        term.close()
    sessions = list((tmp_path / "home" / "sessions").glob("*.json"))
    assert len(sessions) == 1
    saved = json.loads(sessions[0].read_text())
    contents = [m.get("content") for m in saved["messages"]]
    assert "are you still there?" in contents and "Still here after the interruption." in contents
    assert "interrupted by the user" in contents  # the interrupted bash call got its answer
    assert "never shown" not in contents
