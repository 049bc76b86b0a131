"""The chat program end to end without a terminal: piped use prints plain text, sessions are saved
(redacted) and resumed, compaction, approvals' preview diffs, Ctrl-C at the prompt."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from clover.backends.scripted import ScriptedModel
from clover.repl.app import ChatApp, run_chat
from clover.repl.sessions import SessionStore
from clover.settings import Settings
from tests.clihelp import git_repo

ROOT = Path(__file__).resolve().parents[1]
EDIT = {
    "tool_calls": [
        {
            "name": "str_replace",
            "arguments": {"path": "hello.py", "old_str": "return 1", "new_str": "return 'hi'"},
        }
    ]
}


def _repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "repo", {"hello.py": "def hello():\n    return 1\n"})


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLOVER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "home"


def _piped(repo: Path, home: Path, script: Path, stdin: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CLOVER_HOME": str(home),
        "XDG_CACHE_HOME": str(home.parent / "cache"),
        "XDG_CONFIG_HOME": str(home.parent / "config"),
        "PYTHONPATH": str(ROOT),
        "TERM": "xterm-256color",
        "FORCE_COLOR": "",
    }
    env.pop("FORCE_COLOR")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "clover.repl",
            "--repo",
            str(repo),
            "--model",
            f"scripted:{script}",
            "--mode",
            "ask",
            *extra,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )


def test_piped_chat_prints_plain_text_and_resumes(tmp_path: Path, home: Path) -> None:
    repo = _repo(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                {"thinking": "Edit hello.py.", **EDIT},
                {"text": "Changed **hello**:\n\n- returns `'hi'`"},
                {"text": "You asked me to change hello.py."},
            ]
        )
    )
    first = _piped(repo, home, script, "change hello\ny\n/diff\n/status\n/exit\n")
    assert first.returncode == 0, first.stderr
    out = first.stdout
    assert "\x1b" not in out  # no ANSI escapes when not on a terminal
    assert "∴ thought for" in out and "⏺ str_replace(hello.py)" in out
    assert "+    return 'hi'" in out and "Changed **hello**:" in out
    assert "diff --git a/hello.py b/hello.py" in out
    assert (repo / "hello.py").read_text() == "def hello():\n    return 'hi'\n"
    store = SessionStore(home / "sessions")
    (session_id,) = store.ids()
    saved = store.load(session_id)
    assert saved.title == "change hello" and saved.root == str(repo.resolve())
    assert [m["role"] for m in saved.messages] == ["system", "user", "assistant", "tool", "assistant"]
    # --resume (no id: this repository's last session) continues it: the model sees the history.
    script.write_text(json.dumps([{"text": "You asked me to change hello.py."}]))
    second = _piped(repo, home, script, "what did I ask?\n", "--resume")
    assert second.returncode == 0, second.stderr
    assert (
        f"resumed session {session_id} (1 request)\n› change hello\n⏺ str_replace(hello.py)" in second.stdout
    )
    assert "Clover chat ·" not in second.stdout  # the banner is for terminals
    assert "You asked me to change hello.py." in second.stdout
    again = store.load(session_id)
    assert [m["content"] for m in again.messages if m["role"] == "user"] == [
        "change hello",
        "what did I ask?",
    ]


def test_resume_of_an_unknown_session_is_one_clear_error(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _repo(tmp_path)
    script = tmp_path / "s.json"
    script.write_text("[]")
    code = run_chat(Settings(model=f"scripted:{script}"), repo, resume="no-such-session", live=False)
    captured = capsys.readouterr()
    assert code == 2 and "no saved session 'no-such-session'" in captured.out + captured.err
    code = run_chat(Settings(model=str(tmp_path / "nowhere")), repo, resume=None, live=False)
    assert code == 2 and "not a checkpoint directory" in capsys.readouterr().err


def _app(repo: Path, turns: list[dict], stdin: str = "", **settings: object) -> tuple[ChatApp, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, color_system=None, width=100)
    model = ScriptedModel(turns)
    app = ChatApp(
        Settings(mode="ask", **settings),
        repo,
        live=False,
        tty=False,
        stdin=io.StringIO(stdin),
        console=console,
        model=model,
    )
    return app, out


def test_declined_edit_stops_the_turn_and_waits_for_the_user(tmp_path: Path, home: Path) -> None:
    """`n` stops the turn: the model is not asked again (it viewed the file and asked for the same
    edit), the user says what to do instead, and the model reads the refusal with that message."""
    repo = _repo(tmp_path)
    app, out = _app(
        repo, [EDIT, {"text": "should not be asked for"}, {"text": "ok, returning 2"}], stdin="n\n"
    )
    result = app.ask("change hello")
    assert result is not None and result.exit_status == "declined"
    assert app.state.model.inner.position == 1  # the turn ended at the refusal
    assert (repo / "hello.py").read_text() == "def hello():\n    return 1\n"
    text = out.getvalue()
    assert "⎿ not run: declined" in text and "declined: say what Clover should do instead" in text
    assert "should not be asked for" not in text
    tool_msg = next(m for m in app.state.agent.messages if m["role"] == "tool")
    assert "declined this tool call and stopped the turn" in tool_msg["content"]
    app.state.model.inner.position = 2
    app.ask("return 2 instead")
    sent = app.state.model.inner.requests[-1]
    assert [m["role"] for m in sent[-3:]] == [
        "assistant",
        "tool",
        "user",
    ]  # the refusal, then the new request


def test_always_answer_lasts_for_the_session(tmp_path: Path, home: Path) -> None:
    repo = _repo(tmp_path)
    call = {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]}
    app, out = _app(repo, [call, {"text": "one"}, call, {"text": "two"}], stdin="a\n")
    app.ask("run it")
    app.set_mode("ask")  # a mode change keeps the session's approvals
    app.ask("run it again")
    assert out.getvalue().count("Allow?") == 1
    assert out.getvalue().count("hi\n") >= 2


def test_session_files_are_redacted(tmp_path: Path, home: Path) -> None:
    redact = pytest.importorskip("clover.tools.safety.redact")
    repo = _repo(tmp_path)
    secret = "sk-test-" + "a1b2c3d4" * 4
    redact.register_secret(secret)
    app, _ = _app(repo, [{"text": "noted"}])
    app.ask(f"my key is {secret}")
    assert secret not in app.state.store.path(app.state.session.id).read_text()
    assert any(secret in str(m.get("content")) for m in app.state.agent.messages)  # only the file is redacted


def test_compaction_near_the_context_window(tmp_path: Path, home: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "AGENTS.md").write_text("Always run the tests with pytest -q.\n")
    turns = [
        {"text": "A" * 400},
        {"text": "B" * 400},
        {"text": "The user asked about A and B."},
        {"text": "C"},
    ]
    app, out = _app(repo, turns)
    app.state.model.inner.context_window = 500
    app.ask("first " + "x" * 300)
    app.ask("second " + "y" * 300)
    assert "context compacted" not in out.getvalue()
    app.ask("third")  # the conversation is now past 80% of 500 tokens: compacted before it runs
    text = out.getvalue()
    assert "⟳ context compacted" in text and "a summary by the model" in text
    messages = app.state.agent.messages
    assert (
        messages[0]["role"] == "system" and "Always run the tests with pytest -q." in messages[0]["content"]
    )
    assert messages[1]["content"].startswith("[Earlier conversation, compacted]")
    assert "The user asked about A and B." in messages[1]["content"]
    assert "Current request: third" in messages[1]["content"]
    assert "x" * 300 not in json.dumps(messages)
    assert messages[-1]["content"] == "C" and messages[-2]["content"] == "third"
    # The summary request itself carried the old conversation.
    summary_request = app.state.model.inner.requests[2]
    assert "y" * 300 in summary_request[1]["content"]


def test_slash_commands_without_a_terminal(tmp_path: Path, home: Path) -> None:
    repo = _repo(tmp_path)
    app, out = _app(repo, [{"text": "hi"}], stdin="/help\n/mode plan\n/think off\n/nope\n/show\n/exit\n")
    assert app.run() == 0
    text = out.getvalue()
    assert "/undo" in text and "Alt-Enter" in text
    assert app.state.settings.mode == "plan" and app.state.settings.think is False
    assert "unknown command /nope" in text and "no tool results yet" in text


def test_ctrl_c_twice_at_an_empty_prompt_exits(tmp_path: Path, home: Path) -> None:
    repo = _repo(tmp_path)
    out = io.StringIO()
    with create_pipe_input() as pipe:
        app = ChatApp(
            Settings(mode="ask"),
            repo,
            live=True,
            tty=True,
            model=ScriptedModel([{"text": "hi"}]),
            console=Console(file=out, force_terminal=True, width=100),
            input_kwargs={"input": pipe, "output": DummyOutput()},
        )
        pipe.send_text("typed\x03")  # clears the line
        pipe.send_text("\x03")  # first at an empty prompt: a hint
        pipe.send_text("hello\r")  # ...which a message disarms
        pipe.send_text("\x03")
        pipe.send_text("\x03")  # twice in a row: exit
        assert app.run() == 0
    text = out.getvalue()
    assert text.count("Ctrl-C again or Ctrl-D to exit") == 2
    assert "hi" in text and "saved" in text
    assert [m["content"] for m in app.state.agent.messages if m["role"] == "user"] == ["hello"]


def test_mode_change_keeps_asking_the_user(tmp_path: Path, home: Path) -> None:
    """After /mode the new gate still asks the person (not a headless refusal)."""
    repo = _repo(tmp_path)
    first = {"tool_calls": [{"name": "bash", "arguments": {"command": "echo one"}}]}
    second = {"tool_calls": [{"name": "bash", "arguments": {"command": "echo two"}}]}
    app, out = _app(repo, [first, {"text": "a"}, second, {"text": "b"}], stdin="y\ny\n")
    app.ask("first")
    app.set_mode("auto-edit")  # shell still asks in auto-edit
    app.ask("second")
    assert out.getvalue().count("Allow?") == 2
    assert "two\n" in out.getvalue()


def test_the_chat_model_passes_on_wrap_up_and_keeps_the_session_options():
    from clover.core.model_protocol import ModelCapabilities, TurnOptions
    from clover.loop_guard import LoopGuard
    from clover.repl.observed import ObservedModel, _merged

    class Declines(ModelCapabilities):
        wrap_up = False

    def observed(model: ModelCapabilities) -> ObservedModel:
        return ObservedModel(LoopGuard(model), renderer=None, compact=lambda forced: False, state=None)

    assert observed(Declines()).wrap_up is False
    assert observed(ModelCapabilities()).wrap_up is True  # the declared default
    # the agent's wrap-up turn (tool_choice) on top of the session's /think, not instead of it
    assert _merged(TurnOptions(think=False), TurnOptions(tool_choice="none")) == TurnOptions(
        think=False, tool_choice="none"
    )
    assert _merged(None, TurnOptions(max_tokens=5)) == TurnOptions(max_tokens=5)
    assert _merged(TurnOptions(think=True), None) == TurnOptions(think=True)
