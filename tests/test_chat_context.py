"""The chat and the context: the window a server reports, compact-and-retry when a server refuses a
too-long conversation, compaction that says so when nothing shrank, and replies cut short (token
limit, dropped stream, a runaway loop) labelled as such, never shown as a finished answer."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from clover.backends.openai_compat import OpenAICompatModel
from clover.backends.scripted import ScriptedModel
from clover.core.model_protocol import Model
from clover.repl.app import ChatApp
from clover.settings import Settings
from tests.fakeserver import FakeChatServer, FakeReply


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLOVER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "home"


def _app(tmp_path: Path, backend: Model | None = None, **settings: object) -> tuple[ChatApp, io.StringIO]:
    out = io.StringIO()
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    app = ChatApp(
        Settings(mode="ask", checkpoints=False, **settings),
        repo,
        live=False,
        tty=False,
        stdin=io.StringIO(""),
        console=Console(file=out, force_terminal=False, color_system=None, width=120),
        model=backend,
    )
    return app, out


def test_context_window_comes_from_the_server(home: Path) -> None:
    with FakeChatServer(models=["m"], max_model_len=4096) as server:
        assert OpenAICompatModel(Settings(model="m", base_url=server.url)).context_window == 4096
        assert (
            OpenAICompatModel(Settings(model="m", base_url=server.url), context_window=999).context_window
            == 999
        )
    with FakeChatServer(models=["m"]) as server:  # listed without a length: unknown, not assumed
        assert OpenAICompatModel(Settings(model="m", base_url=server.url)).context_window == 0
        # the setting, for servers that do not say
        assert (
            OpenAICompatModel(Settings(model="m", base_url=server.url, context_window=8192)).context_window
            == 8192
        )


def test_context_length_error_compacts_and_retries(tmp_path: Path, home: Path) -> None:
    replies = [
        FakeReply(text="Read it."),
        FakeReply(text="Summary: the user sent a long x file."),
        FakeReply(text="Second answer."),
    ]
    with FakeChatServer(replies) as server:
        app, out = _app(tmp_path, model="m", base_url=server.url)
        first = app.ask("first " + "x" * 4000)
        assert first is not None and first.exit_status == "submitted"
        server.context_limit = len(json.dumps(server.requests[0]["messages"])) // 4 + 100
        second = app.ask("second " + "y" * 1000)
        text = out.getvalue()
        assert second is not None and second.exit_status == "submitted", text
        assert "too long for m's context: compacting and retrying" in text and "⟳ context compacted" in text
        assert "Second answer." in text
        assert len(server.requests) == 4  # first, refused, summary, retry
        retried = json.dumps(server.requests[-1]["messages"])
        assert "x" * 4000 not in retried and "Summary: the user sent a long x file." in retried
        assert app.state.model.context_window == server.context_limit  # learnt from the error message


def test_compaction_that_would_not_shrink_says_so(tmp_path: Path, home: Path) -> None:
    turns = [{"text": "a"}, {"text": "b"}, {"text": "S" * 3000}]
    app, out = _app(tmp_path, ScriptedModel(turns))
    app.ask("one")
    app.ask("two")
    before = list(app.state.agent.messages)
    assert app.compact(forced=True) is False
    assert "compaction would not shrink the conversation" in out.getvalue()
    assert app.state.agent.messages == before


def test_compaction_names_only_instructions_that_exist(tmp_path: Path, home: Path) -> None:
    app, out = _app(tmp_path, ScriptedModel([{"text": "a" * 800}, {"text": "b"}, {"text": "short"}]))
    app.ask("one " + "q" * 800)
    app.ask("two")
    assert app.compact(forced=True) is True
    assert "(~" in out.getvalue() and "; the task re-injected)" in out.getvalue()
    assert "AGENTS.md" not in out.getvalue()


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        (FakeReply(text="Partial answ", finish_reason="length"), "the reply hit the token limit"),
        (FakeReply(text="Partial answer that goes on", drop_after=3), "the stream ended before"),
    ],
)
def test_truncated_reply_is_labelled_in_the_chat(
    tmp_path: Path, home: Path, reply: FakeReply, label: str
) -> None:
    with FakeChatServer([reply]) as server:
        app, out = _app(tmp_path, model="m", base_url=server.url)
        app.ask("q")
    assert f"⚠ truncated: {label}" in out.getvalue()
    assert "Partial answ" in out.getvalue()


def test_runaway_reply_is_cut_in_the_chat(tmp_path: Path, home: Path) -> None:
    app, out = _app(tmp_path, ScriptedModel([{"text": "Sure: " + "s" * 4000}]))
    result = app.ask("q")
    text = out.getvalue()
    assert result is not None and result.final_text == "Sure: ss"
    assert "⚠ truncated: the reply kept repeating itself and was stopped" in text
    assert "sss" not in text
