"""The chat in a real terminal (tmux), second pass: Esc interrupts a running command whose last lines
show live under the spinner, no stray ^C or blank line after it, type-ahead kept; resume after the
banner with the transcript replayed as Markdown; the banner before a local model loads."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest

from clover.repl.sessions import Session, SessionStore
from tests.test_chat_tmux import ROOT, Tmux, pytestmark  # noqa: F401  (skips without tmux)


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


def _script(tmp_path: Path, turns: list[dict]) -> Path:
    script = tmp_path / "script.jsonl"
    script.write_text("\n".join(json.dumps(t) for t in turns) + "\n")
    return script


def test_esc_interrupts_a_command_showing_its_live_tail(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    # Output that the command's own text does not contain: colours, and a \r progress line.
    loop = (
        'for i in 1 2 3; do echo "\\033[32mstep $i\\033[0m"; done; '
        'printf "$((5*2))%%\\r$((9*10))%%\\n"; sleep 30'
    )
    script = _script(
        tmp_path,
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": loop}}]},
            {"text": "never shown", "delay": 30},
            {"text": "never shown either", "delay": 30},
            {"text": "Still **here**."},
        ],
    )
    term = Tmux(_command(tmp_path, repo, "--model", f"scripted:{script}", "--mode", "yolo"), cwd=ROOT)
    try:
        term.wait_for("› ")
        term.type("run the loop")
        term.send("Enter")
        screen = term.wait_for("90%")  # the command's tail, live, under its spinner
        assert "step 3" in screen and "running bash(" in screen and "Esc or Ctrl-C stops" in screen
        assert "10%" not in screen and "\x1b" not in screen
        started = time.monotonic()
        term.send("Escape")
        screen = term.wait_for("interrupted: back at the prompt")
        assert time.monotonic() - started < 5
        lines = screen.splitlines()
        at = next(i for i, line in enumerate(lines) if "interrupted: back at the prompt" in line)
        assert lines[at - 1].startswith("⏺ bash(")  # no blank line, no ^C, between the call and the note
        assert "^C" not in screen and "^[" not in screen
        # Esc while the model is generating; a line typed meanwhile is kept and sent after.
        term.type("think")
        term.send("Enter")
        term.wait_for("working ·")
        term.send("Escape")
        term.wait_for("interrupted: back at the prompt", count=2)
        term.type("are you there?")
        term.send("Enter")
        term.wait_for("working ·")
        term.type("/status")  # typed ahead while the model works
        term.send("Enter")
        term.send("C-c")
        screen = term.wait_for("session totals:")
        assert "› /status" in screen
        term.type("/exit")
        term.send("Enter")
        assert "Traceback" not in term.wait_for("[exited 0]")
    finally:
        term.close()


def test_resume_comes_after_the_banner_and_replays(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    store = SessionStore(tmp_path / "home" / "sessions")
    store.save(
        Session(
            "20990101-000000-beef",
            str(repo.resolve()),
            messages=[
                {"role": "system", "content": "s"},
                {"role": "user", "content": "explain calc.py"},
                {"role": "assistant", "content": "It **adds** numbers:\n\n- `add(a, b)`"},
            ],
        )
    )
    script = _script(tmp_path, [{"text": "ok"}])
    term = Tmux(_command(tmp_path, repo, "--model", f"scripted:{script}", "--continue"), cwd=ROOT)
    try:
        screen = term.wait_for("› ", count=2)
        assert screen.index("Clover chat · model") < screen.index(
            "resumed session 20990101-000000-beef (1 request)"
        )
        assert (
            screen.index("resumed session")
            < screen.index("› explain calc.py")
            < screen.index("It adds numbers:")
        )
        assert "**" not in screen  # Markdown rendered, not raw
        term.type("/exit")
        term.send("Enter")
        term.wait_for("[exited 0]")
    finally:
        term.close()


@pytest.mark.slow
def test_banner_shows_before_the_local_model_loads(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    repo = tmp_path / "repo"
    repo.mkdir()
    term = Tmux(_command(tmp_path, repo, "--model", "embedded"), cwd=ROOT)
    try:
        screen = term.wait_for("model loaded in", timeout=120)
        assert screen.index("Clover chat · model embedded (the built-in tiny Clover") < screen.index(
            "model loaded in"
        )
        term.wait_for("› ")
        term.type("/exit")
        term.send("Enter")
        term.wait_for("[exited 0]")
    finally:
        term.close()


def test_two_edits_both_show_their_diff_after_always_and_clear(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "calc.py").write_text("a = 1\nb = 2\n")

    def edit(old: str, new: str) -> dict:
        return {
            "tool_calls": [
                {"name": "str_replace", "arguments": {"path": "calc.py", "old_str": old, "new_str": new}}
            ]
        }

    script = _script(
        tmp_path,
        [edit("a = 1", "a = 10"), {"text": "first done"}, edit("b = 2", "b = 20"), {"text": "second done"}],
    )
    term = Tmux(_command(tmp_path, repo, "--model", f"scripted:{script}", "--mode", "ask"), cwd=ROOT)
    try:
        term.wait_for("› ")
        term.type("first")
        term.send("Enter")
        screen = term.wait_for("Allow this edit?")
        assert "+a = 10" in screen and "2. Yes, and allow all edits this session  (a)" in screen
        term.send("a")
        term.wait_for("first done")
        assert "mode: auto-edit · edits are allowed for the rest of this session" in term.screen()
        term.type("/clear")
        term.send("Enter")
        term.wait_for("new conversation")
        term.type("second")  # allowed by the "always" answer: no question, the diff comes with the result
        term.send("Enter")
        screen = term.wait_for("second done")
        assert screen.count("Allow this edit?") == 0  # the menu is gone once answered
        assert "⎿ ✓ calc.py +1 -1  [1]" in screen and "⎿ ✓ calc.py +1 -1  [2]" in screen
        assert "+b = 20" in screen
        term.type("/exit")
        term.send("Enter")
        term.wait_for("[exited 0]")
    finally:
        term.close()
