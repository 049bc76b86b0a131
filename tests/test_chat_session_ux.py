"""Sessions and slash commands, second pass: an opened-and-closed chat saves nothing (so `--resume
last` finds real work), resume replays the transcript and does not count the compaction summary as a
request, `/mod` is ambiguous, `/model x` is checked against the server, deny with feedback, what
"always" remembers, `/permissions` list and remove, `/status` session totals."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from clover.backends.scripted import ScriptedModel
from clover.repl import compaction
from clover.repl.app import ChatApp
from clover.repl.approvals import parse_answer
from clover.repl.sessions import Session, SessionStore
from clover.settings import Settings
from tests.clihelp import git_repo
from tests.fakeserver import FakeChatServer, FakeReply


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLOVER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "home"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "repo", {"hello.py": "def hello():\n    return 1\n"})


def _app(
    repo: Path, turns: list[dict] | None = None, stdin: str = "", **settings: object
) -> tuple[ChatApp, io.StringIO]:
    out = io.StringIO()
    settings.setdefault("mode", "ask")
    app = ChatApp(
        Settings(**settings),
        repo,
        live=False,
        tty=False,
        stdin=io.StringIO(stdin),
        console=Console(file=out, force_terminal=False, color_system=None, width=120),
        model=ScriptedModel(turns or []) if "base_url" not in settings else None,
    )
    return app, out


def test_an_empty_chat_saves_no_session_and_resume_last_skips_empty_ones(repo: Path, home: Path) -> None:
    store = SessionStore(home / "sessions")
    app, _ = _app(repo, [{"text": "hi"}], stdin="hello\n/exit\n")
    assert app.run() == 0
    worked = app.state.session.id
    for _ in range(2):  # opened and closed: nothing to keep
        assert _app(repo, stdin="/status\n")[0].run() == 0
    store.save(Session("99999999-empty", str(repo.resolve())))  # as older versions left them
    assert store.ids()[:1] == [worked] and len(store.ids()) == 2
    assert store.resolve("last", str(repo.resolve())).id == worked


def test_resume_replays_and_skips_the_compaction_marker(repo: Path, home: Path) -> None:
    store = SessionStore(home / "sessions")
    messages = [
        {"role": "system", "content": "old system prompt"},
        {"role": "user", "content": f"{compaction.MARKER}\nThe user asked for X.\n\n# Task state"},
        {"role": "assistant", "content": compaction.ACK},
        {"role": "user", "content": "now fix **bar**"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "pytest -q"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "bash", "content": "1 passed\n[exit code 0]"},
        {"role": "assistant", "content": "Fixed **bar**."},
    ]
    store.save(Session("20990101-000000-abcd", str(repo.resolve()), messages=messages))
    app, out = _app(repo, stdin="/exit\n")
    assert app.run(resume="last") == 0
    text = out.getvalue()
    assert "resumed session 20990101-000000-abcd (1 request)" in text
    assert "⟳ (earlier conversation compacted)" in text and compaction.ACK not in text
    replay = text[text.index("resumed session") :]
    assert (
        replay.index("› now fix **bar**") < replay.index("⏺ bash(pytest -q)") < replay.index("Fixed **bar**.")
    )
    assert app.state.agent.messages[0]["content"] != "old system prompt"


def test_ambiguous_prefix_and_checked_model_switch(repo: Path, home: Path) -> None:
    with FakeChatServer([FakeReply(text="hi")], models=["alpha", "beta"]) as server:
        app, out = _app(
            repo, stdin="/mod\n/model gamma\n/model beta\n/exit\n", model="alpha", base_url=server.url
        )
        assert app.run() == 0
    text = out.getvalue()
    assert "/mod is ambiguous: /model, /mode" in text or "/mod is ambiguous: /mode, /model" in text
    assert f"cannot switch to gamma: the server at {server.url} serves alpha, beta" in text
    assert "model: beta" in text and app.state.settings.model == "beta"


def test_parse_answer() -> None:
    assert parse_answer("Y") == ("yes", "") and parse_answer("always") == ("always", "")
    assert parse_answer("n, run only the fast tests") == ("no", "run only the fast tests")
    assert parse_answer("no: use pytest -x") == ("no", "use pytest -x")
    assert parse_answer("edit calc.py instead") == ("no", "edit calc.py instead")
    assert parse_answer("x") is None and parse_answer("nope") is None


def test_deny_with_feedback_goes_to_the_model(repo: Path, home: Path) -> None:
    call = {"tool_calls": [{"name": "bash", "arguments": {"command": "pytest"}}]}
    app, out = _app(repo, [call, {"text": "ok"}], stdin="n, run only test_calc.py\n")
    app.ask("run the tests")
    text = out.getvalue()
    assert "[a]lways allows bash(pytest) for the rest of this session" in text
    assert "⎿ not run: you said: run only test_calc.py" in text
    tool_msg = next(m for m in app.state.agent.messages if m["role"] == "tool")
    assert "the user declined this tool call and said: run only test_calc.py" in tool_msg["content"].lower()


def test_permissions_lists_and_forgets_always_answers(repo: Path, home: Path) -> None:
    call = {"tool_calls": [{"name": "bash", "arguments": {"command": "echo hi"}}]}
    app, out = _app(
        repo, [call, {"text": "one"}, call, {"text": "two"}], stdin="a\ny\n", deny=["bash(rm -rf /)"]
    )
    app.ask("run it")
    from clover.repl.slash import dispatch

    dispatch(app, "/permissions")
    text = out.getvalue()
    assert re.search(r"deny +bash\(rm -rf /\) +settings", text)
    assert re.search(r"\[1\] allow +bash\(echo hi\) +this session", text) and "[2]" not in text
    dispatch(app, "/permissions remove 1")
    assert "forgot: bash(echo hi)" in out.getvalue()
    app.ask("run it again")  # asked again now
    assert out.getvalue().count("Allow?") == 2
    dispatch(app, "/permissions remove 7")
    assert "no remembered approval 7" in out.getvalue()


def test_status_shows_session_totals(repo: Path, home: Path) -> None:
    turns = [
        {"text": "one", "prompt_tokens": 100, "completion_tokens": 10},
        {"text": "two", "prompt_tokens": 200, "completion_tokens": 20},
    ]
    app, out = _app(repo, turns, stdin="a\nb\n/status\n/exit\n")
    assert app.run() == 0
    assert "session totals: 2 requests · 330 tok (300 in, 30 out)" in out.getvalue()
