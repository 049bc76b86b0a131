"""The conventions a Claude Code or Codex user's hands know, in a real terminal (tmux): one key
answers an approval, Esc at an approval and `n` decline and end the turn, Shift+Tab cycles the mode,
`!cmd` runs a command into the conversation, typing ahead shows, bare `clover` opens a session,
`--continue` and the `--resume` picker, Ctrl-D during a step exits."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

from tests.clihelp import git_repo
from tests.test_chat_tmux import ROOT, Tmux, pytestmark  # noqa: F401  (skips without tmux)
from tests.test_chat_tmux_more import _command, _script


def _repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "repo", {"calc.py": "def add(a, b):\n    return a - b\n"})


EDIT = {
    "tool_calls": [
        {
            "name": "str_replace",
            "arguments": {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"},
        }
    ]
}


def _chat(tmp_path: Path, repo: Path, turns: list[dict], *args: str, width: int = 100) -> Tmux:
    script = _script(tmp_path, turns)
    term = Tmux(_command(tmp_path, repo, "--model", f"scripted:{script}", *args), cwd=ROOT, width=width)
    term.wait_for("› ")
    return term


def _request(term: Tmux, text: str) -> None:
    term.type(text)
    term.send("Enter")


def _leave(term: Tmux) -> str:
    _request(term, "/exit")
    screen = term.wait_for("[exited 0]")
    assert "Traceback" not in screen
    return screen


def test_one_key_answers_an_approval(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    bash = {"tool_calls": [{"name": "bash", "arguments": {"command": "echo ran-it"}}]}
    term = _chat(tmp_path, repo, [bash, {"text": "It ran."}, bash, {"text": "Again."}], "--mode", "ask")
    try:
        _request(term, "run it")
        screen = term.wait_for("Allow this call?")
        assert (
            "1. Yes  (y)" in screen
            and "2. Yes, and don't ask again for bash(echo ran-it) this session  (a)" in screen
        )
        assert ". No, and tell Clover what to do instead  (n, Esc)" in screen
        assert (
            screen.count("echo ran-it") == 2
        )  # the ⏺ line and the menu's option, not a second copy of the command
        term.send("y")  # no Enter
        screen = term.wait_for("It ran.")
        assert "ran-it" in screen.split("It ran.")[0].split("⏺ bash(echo ran-it)")[1]
        assert "Allow this call?" not in screen  # the menu is gone once answered
        _request(term, "again")
        term.wait_for("Allow this call?")
        term.send("a")  # yes, and not again this session
        term.wait_for("Again.")
        assert "allowed for the rest of this session: bash(echo ran-it)" in term.screen()
        _leave(term)
    finally:
        term.close()


def test_esc_at_an_approval_declines_and_the_user_says_what_instead(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    turns = [EDIT, {"text": "Understood: I will add a test first."}]  # the model is asked twice in all
    term = _chat(tmp_path, repo, turns, "--mode", "ask")
    try:
        _request(term, "fix add")
        term.wait_for("Allow this edit?")
        term.send("Escape")
        screen = term.wait_for("the call was declined: tell Clover what to do instead")  # under the prompt
        assert "⎿ not run: declined" in screen and "declined: say what Clover should do instead" in screen
        assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a - b\n"
        _request(term, "add a test first")
        term.wait_for("Understood: I will add a test first.")
        _leave(term)
    finally:
        term.close()
    saved = json.loads(next((tmp_path / "home" / "sessions").glob("*.json")).read_text())
    roles = [(m["role"], str(m.get("content"))[:40]) for m in saved["messages"][1:]]
    assert [r for r, _ in roles] == ["user", "assistant", "tool", "user", "assistant"]
    assert roles[2][1].startswith("The user declined this tool call")


def test_n_stops_the_turn_instead_of_asking_again(tmp_path: Path) -> None:
    """HEAD: after `n` the agent went on (viewed the file, asked for the same edit again)."""
    repo = _repo(tmp_path)
    view = {"tool_calls": [{"name": "view", "arguments": {"path": "calc.py"}}]}
    turns = [EDIT, view, EDIT, {"text": "never reached"}]
    term = _chat(tmp_path, repo, turns, "--mode", "ask")
    try:
        _request(term, "fix add")
        term.wait_for("Allow this edit?")
        term.send("n")
        screen = term.wait_for("declined: say what Clover should do instead")
        time.sleep(0.5)
        screen = term.screen()
        assert screen.count("⏺ ") == 1 and "⏺ view(" not in screen
        assert "Allow this edit?" not in screen
        _leave(term)
    finally:
        term.close()


def test_shift_tab_cycles_the_mode_and_it_applies(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    term = _chat(tmp_path, repo, [EDIT, {"text": "Edited without asking."}], "--mode", "ask")
    try:
        term.wait_for("⏵ ask · shift+tab")
        term.send("BTab")
        term.wait_for("⏵ auto-edit · shift+tab")
        term.send("BTab")
        term.wait_for("⏵ plan · shift+tab")
        term.send("BTab")
        term.wait_for("⏵ ask · shift+tab")
        term.send("BTab")
        term.wait_for("⏵ auto-edit · shift+tab")
        _request(term, "fix add")  # auto-edit: the edit runs without a question
        screen = term.wait_for("Edited without asking.")
        assert "Allow this edit?" not in screen and "⎿ ✓ calc.py +1 -1" in screen
        assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
        _request(term, "/status")
        assert "auto-edit" in term.wait_for("session totals:").split("/status")[-1]
        _leave(term)
    finally:
        term.close()


def test_bang_runs_a_command_into_the_conversation(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    term = _chat(tmp_path, repo, [{"text": "I see calc.py."}], "--mode", "ask")
    try:
        _request(term, "!ls")  # typing it is the approval "ask" mode wants
        screen = term.wait_for("⎿ ✓ 1 line · exit 0")
        assert "! bash(ls)" in screen and "    calc.py" in screen and "Allow" not in screen
        _request(term, "/mode plan")
        _request(term, "!touch made-by-user")  # plan mode: the gate refuses it, as it would the agent's
        screen = term.wait_for("Permission denied: plan mode")
        assert "! bash(touch made-by-user)" in screen and not (repo / "made-by-user").exists()
        _request(term, "what do you see?")
        term.wait_for("I see calc.py.")
        _leave(term)
    finally:
        term.close()
    saved = json.loads(next((tmp_path / "home" / "sessions").glob("*.json")).read_text())
    users = [m["content"] for m in saved["messages"] if m["role"] == "user"]
    assert len(users) == 2 and "$ ls\ncalc.py" in users[0] and users[1] == "what do you see?"


def test_typed_ahead_text_shows_while_the_agent_works(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    turns = [{"text": "slow answer", "delay": 2.5}, {"text": "second answer"}]
    term = _chat(tmp_path, repo, turns, "--mode", "ask")
    try:
        _request(term, "first")
        term.wait_for("working ·")
        term.type("next question")
        screen = term.wait_for("› next question▏")
        assert "queued (sent when this step ends):" in screen
        term.send("Enter")
        term.wait_for("second answer")
        _leave(term)
    finally:
        term.close()


def test_ctrl_d_during_a_step_stops_it_and_exits(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    term = _chat(tmp_path, repo, [{"text": "never shown", "delay": 30}], "--mode", "ask")
    try:
        _request(term, "think a long time")
        term.wait_for("working ·")
        started = time.monotonic()
        term.send("C-d")
        screen = term.wait_for("[exited 0]", timeout=10)
        assert time.monotonic() - started < 5
        assert "Ctrl-D (input closed): leaving" in screen and "saved · clover chat --resume" in screen
        assert "Traceback" not in screen
    finally:
        term.close()


def _clover(tmp_path: Path, repo: Path, *args: str) -> str:
    """The `clover` program itself (bare, or with flags), as a user types it."""
    env = {
        "CLOVER_HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PYTHONPATH": str(ROOT),
        "TERM": "xterm-256color",
    }
    line = "env -u COLUMNS -u LINES " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return (
        f"cd {shlex.quote(str(repo))} && {line} {shlex.join([sys.executable, '-m', 'clover', *args])}; "
        'echo "[exited $?]"; sleep 30'
    )


def _user_config(tmp_path: Path, turns: list[dict]) -> None:
    """The user's config picks the model, so `clover` runs with no argument at all."""
    script = _script(tmp_path, turns)
    config = tmp_path / "config" / "clover" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'model = "scripted:{script}"\nmode = "ask"\n')


def test_bare_clover_opens_a_session(tmp_path: Path) -> None:
    """HEAD: `clover` printed the help and exited 2."""
    repo = _repo(tmp_path)
    _user_config(tmp_path, [{"text": "Hello from a bare clover."}])
    term = Tmux(_clover(tmp_path, repo), cwd=ROOT)
    try:
        screen = term.wait_for("› ")
        assert "Clover chat · model scripted:script.jsonl · mode ask" in screen and "Usage:" not in screen
        _request(term, "hi")
        term.wait_for("Hello from a bare clover.")
        _leave(term)
    finally:
        term.close()


def test_continue_and_the_resume_picker(tmp_path: Path) -> None:
    """HEAD: no --continue / -c, and --resume without an ID was an error."""
    repo = _repo(tmp_path)
    _user_config(tmp_path, [{"text": "First answer."}])
    first = Tmux(_command(tmp_path, repo), cwd=ROOT)  # the chat alone (a lighter start) makes the session
    try:
        first.wait_for("› ")
        _request(first, "first question")
        first.wait_for("First answer.")
        _leave(first)
    finally:
        first.close()
    _user_config(tmp_path, [{"text": "Second answer."}])  # each process replays its script from the start
    again = Tmux(_clover(tmp_path, repo, "-c"), cwd=ROOT)
    try:
        screen = again.wait_for("› ", count=2)
        assert "resumed session" in screen and "(1 request)" in screen
        assert screen.index("› first question") < screen.index("First answer.")
        _request(again, "second question")
        again.wait_for("Second answer.")
        _leave(again)
    finally:
        again.close()
    picker = Tmux(_clover(tmp_path, repo, "--resume"), cwd=ROOT)
    try:
        screen = picker.wait_for("Resume which session? (Esc: a new one)")
        assert "2 requests · first question" in screen
        picker.send("Enter")
        screen = picker.wait_for("› second question")
        assert "(2 requests)" in screen
        _leave(picker)
    finally:
        picker.close()
