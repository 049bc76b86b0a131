"""The chat's screen in a real terminal (tmux): the layout at 60 columns and after a resize (no
ghost of the input line, no partial reply left above the answer), `clover chat > out.txt` keeps
asking on the terminal, `/st` + Tab + Enter runs /status, `/show` pages through a whole output."""

from __future__ import annotations

import shlex
import time
from pathlib import Path

from tests.clihelp import git_repo
from tests.test_chat_tmux import ROOT, Tmux, pytestmark  # noqa: F401  (skips without tmux)
from tests.test_chat_tmux_more import _command, _script


def _repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "repo", {"calc.py": "def add(a, b):\n    return a - b\n"})


def _resize(term: Tmux, width: int) -> None:
    term._tmux("resize-window", "-t", term.name, "-x", str(width))


def test_sixty_columns_and_a_resize_leave_no_ghosts(tmp_path: Path) -> None:
    """HEAD: the status line took three lines at 60 columns; narrowing the terminal left a ghost copy
    of the input line, and rows of the live region above the final text. (The screen is filled
    first, as in a session under way: a terminal that re-wraps pushes the rows above the cursor that
    no longer fit into its scrollback, and no program can move the cursor there to erase them.)"""
    repo = _repo(tmp_path)
    loop = (
        'for i in 1 2 3 4; do echo "output line $i of a command that prints long lines, long enough to '
        'wrap when the terminal narrows"; done; sleep 3'
    )
    script = _script(
        tmp_path,
        [
            {"tool_calls": [{"name": "bash", "arguments": {"command": loop}}]},
            {"text": "The command finished.", "prompt_tokens": 123_456, "completion_tokens": 789},
        ],
    )
    term = Tmux(
        _command(tmp_path, repo, "--model", f"scripted:{script}", "--mode", "yolo"),
        cwd=ROOT,
        width=120,
        height=20,
    )
    try:
        term.wait_for("› ")
        term.type("/help")
        term.send("Enter")
        term.wait_for("/quit ")
        question = "please run the loop that prints long lines and tell me when the command has finished"
        term.type(question)
        time.sleep(0.3)
        _resize(term, 60)  # the typed line is now wider than the terminal
        time.sleep(0.8)
        assert term.screen().count("please run the loop") == 1, term.screen()
        term.send("Enter")
        term.wait_for("output line 4 of")  # the live tail under the spinner
        _resize(term, 50)  # narrowed while the live region is up
        term.wait_for("The command finished.")
        time.sleep(0.5)
        screen = term.screen()
        assert screen.count("please run the loop") == 1, screen
        assert "long enough to" not in screen and "running bash(" not in screen, screen  # nothing left of it
        status = next(line for line in screen.splitlines() if "ctx" in line)
        assert len(status) <= 50 and "yolo" in status  # one line, whatever the width
        term.type("/exit")
        term.send("Enter")
        term.wait_for("[exited 0]")
    finally:
        term.close()


def test_redirected_stdout_keeps_the_questions_on_the_terminal(tmp_path: Path) -> None:
    """HEAD: `clover chat > out.txt` sent the banner and the `Allow?` question into the file; the
    terminal stayed blank while it waited for an answer."""
    repo = _repo(tmp_path)
    bash = {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]}
    script = _script(tmp_path, [bash, {"text": "The command printed hi."}])
    out = tmp_path / "out.txt"
    command = _command(tmp_path, repo, "--model", f"scripted:{script}", "--mode", "ask")
    command = command.replace("; echo", f" > {shlex.quote(str(out))}; echo", 1)
    term = Tmux(command, cwd=ROOT)
    try:
        term.wait_for("Clover chat · model scripted:script.jsonl")
        term.wait_for("› ")
        term.type("run it")
        term.send("Enter")
        term.wait_for("Allow this call?")
        term.send("y")
        term.wait_for("The command printed hi.")
        term.type("/exit")
        term.send("Enter")
        term.wait_for("[exited 0]")
    finally:
        term.close()
    written = out.read_text()
    assert written == "› run it\n\nThe command printed hi.\n\n"  # the transcript, none of the interface


def test_a_slash_prefix_tab_and_enter_runs_the_command(tmp_path: Path) -> None:
    """HEAD: with `/st` typed the menu showed /status, and Enter said `unknown command /st`."""
    repo = _repo(tmp_path)
    script = _script(tmp_path, [{"text": "x"}])
    term = Tmux(_command(tmp_path, repo, "--model", f"scripted:{script}"), cwd=ROOT)
    try:
        term.wait_for("› ")
        term.type("/st")
        term.wait_for("model, mode, tokens, context")  # the completion menu, /status in it
        term.send("Enter")
        term.wait_for("session totals:")
        term.type("/he")
        term.send("Tab")  # Tab picks /help from the menu, Enter runs it
        time.sleep(0.3)
        term.send("Enter")
        screen = term.wait_for("list the commands and keys")
        assert "unknown command" not in screen
        term.type("/exit")
        term.send("Enter")
        term.wait_for("[exited 0]")
    finally:
        term.close()


def test_show_pages_through_the_whole_output(tmp_path: Path) -> None:
    """HEAD: `seq 1 5000` was `✓ 3422 lines`, and `/show` printed the cut copy pointing at a temp file."""
    repo = _repo(tmp_path)
    seq = {"tool_calls": [{"name": "bash", "arguments": {"command": "seq 1 5000"}}]}
    script = _script(tmp_path, [seq, {"text": "counted"}])
    command = _command(tmp_path, repo, "--model", f"scripted:{script}", "--mode", "yolo")
    term = Tmux("PAGER=less LESS= " + command, cwd=ROOT, height=30)
    try:
        term.wait_for("› ")
        term.type("count to 5000")
        term.send("Enter")
        screen = term.wait_for("counted")
        assert "⎿ ✓ 5000 lines · exit 0  [1]" in screen and "… 4992 more lines (/show 1)" in screen
        term.type("/show 1")
        term.send("Enter")
        screen = term.wait_for("[1] bash(seq 1 5000) · 5000 lines · exit 0")  # in the pager, from the top
        assert "\n1\n2\n3\n" in screen
        term.send("G")  # the pager's end: the whole output is there
        screen = term.wait_for("5000\n")
        assert "4999\n5000" in screen and "exec-" not in screen
        term.send("q")
        term.wait_for("all 5000 lines shown in the pager")
        term.type("/exit")
        term.send("Enter")
        term.wait_for("[exited 0]")
    finally:
        term.close()
