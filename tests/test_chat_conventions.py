"""The chat's conventions without a terminal: @mentions checked before sending, /model switching for
real or refusing, `!cmd` through the agent's gate, a declined call with feedback, the approval menu's
keys, the CLI's optional `--resume` value, and `/st` running /status."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from clover.backends.scripted import ScriptedModel
from clover.main import PICK, optional_resume_value
from clover.repl.app import ChatApp
from clover.repl.approvals import ALL_EDITS, ALWAYS, NO, YES, options_for
from clover.repl.menu import Option, choose
from clover.repl.slash import dispatch
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
    return git_repo(tmp_path / "repo", {"calc.py": "def add(a, b):\n    return a - b\n"})


def _app(
    repo: Path,
    chat_model: object = None,
    stdin: str = "",
    input_kwargs: dict | None = None,
    **settings: object,
) -> tuple[ChatApp, io.StringIO]:
    out = io.StringIO()
    settings.setdefault("mode", "ask")
    app = ChatApp(
        Settings(**settings),
        repo,
        live=False,
        tty=False,
        stdin=io.StringIO(stdin),
        console=Console(file=out, force_terminal=False, color_system=None, width=200),
        model=chat_model,
        input_kwargs=input_kwargs,
    )
    return app, out


def test_mentions_too_big_for_the_context_are_not_sent(repo: Path, home: Path) -> None:
    """HEAD: a 64k-token file was attached to a 16k-context model (and failed later at the model)."""
    (repo / "big.txt").write_text("word " * 52_000)  # ~65,000 tokens
    (repo / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    model = ScriptedModel([{"text": "It adds."}], context_window=16_384)
    with create_pipe_input() as pipe:  # a prompt to put the message back into
        app, out = _app(repo, model, input_kwargs={"input": pipe, "output": DummyOutput()})
    assert app.ask("summarise @big.txt and @calc.py") is None
    text = out.getvalue()
    assert "not sent: the mentioned files are ~65,0" in text and "@big.txt ~65,0" in text
    assert "the model's 16,384-token context has room for ~" in text
    assert model.requests == [] and app.ui.input.pending == "summarise @big.txt and @calc.py"  # nothing lost
    app.ui.input.pending = ""
    result = app.ask("explain @calc.py, @missing.py, @logo.png and @../outside")
    assert result is not None and result.exit_status == "submitted"
    text = out.getvalue()
    assert "@missing.py: no such file in the repository (left as text)" in text
    assert "@logo.png is a binary file (" in text and "@../outside is outside the repository" in text
    assert "added @calc.py to the context (~" in text
    sent = model.requests[0][-1]["content"]
    assert '<file path="calc.py">\ndef add(a, b):' in sent and "PNG" not in sent


def test_model_switch_is_real_or_refused(repo: Path, home: Path, tmp_path: Path) -> None:
    """HEAD: `/model embedded` in a --base-url session printed `model: embedded` and kept using the
    server; `/model nosuch` was accepted silently."""
    script = tmp_path / "local.jsonl"
    script.write_text('{"text": "from the local model"}\n')
    with FakeChatServer([FakeReply(text="from the server")], models=["alpha", "beta"]) as server:
        app, out = _app(repo, model="alpha", base_url=server.url)
        dispatch(app, "/model nosuch")
        assert f"cannot switch to nosuch: the server at {server.url} serves alpha, beta" in out.getvalue()
        dispatch(app, f"/model scripted:{script}")
        assert "model: scripted:local.jsonl (local)" in out.getvalue()
        result = app.ask("who answers?")
        assert result.final_text == "from the local model" and server.requests == []
        dispatch(app, "/model beta")  # the session's server is still there for its own names
        assert f"model: beta (served by {server.url})" in out.getvalue()
        assert app.ask("and now?").final_text == "from the server"
        assert server.requests[-1]["model"] == "beta"
    with FakeChatServer([], models=None) as quiet:  # lists no models: a name cannot be checked
        app, out = _app(repo, model="alpha", base_url=quiet.url)
        dispatch(app, "/model nosuch")
        assert (
            "cannot switch to nosuch: the server at" in out.getvalue()
            and "does not list its models" in out.getvalue()
        )
        assert app.state.settings.model == "alpha"
    app, out = _app(repo, ScriptedModel([]))
    dispatch(app, "/model nosuch")
    assert (
        "cannot switch to nosuch: it is not 'embedded', a checkpoint directory or scripted:FILE"
        in out.getvalue()
    )
    assert "the model stays scripted:<list>" in out.getvalue()


def test_bang_command_goes_through_the_gate_and_into_the_conversation(repo: Path, home: Path) -> None:
    app, out = _app(
        repo,
        ScriptedModel([{"text": "seen"}]),
        stdin="!echo from-user\n/mode plan\n!touch x\n/exit\n",
        deny=["bash(rm *)"],
    )
    assert app.run() == 0
    text = out.getvalue()
    assert "! bash(echo from-user)" in text and "⎿ ✓ 1 line · exit 0" in text and "Allow?" not in text
    assert "Permission denied: plan mode" in text and not (repo / "x").exists()
    app.set_mode("yolo")
    from clover.repl.bang import run_user_command

    # a deny rule holds for the user's own command too
    assert run_user_command(app.state, app.ui, app.keep_result, "rm calc.py") is None
    assert (repo / "calc.py").exists() and "is denied by rule bash(rm *)" in out.getvalue()
    users = [m["content"] for m in app.state.agent.messages if m["role"] == "user"]
    assert len(users) == 1 and users[0].endswith("$ echo from-user\nfrom-user\n[exit code 0]")


def test_a_no_with_feedback_goes_on_with_it(repo: Path, home: Path) -> None:
    """Without a terminal `n, do X` still declines and tells the model X; the turn goes on."""
    call = {"tool_calls": [{"name": "bash", "arguments": {"command": "pytest"}}]}
    app, out = _app(
        repo, ScriptedModel([call, {"text": "running only test_calc.py"}]), stdin="n, only test_calc.py\n"
    )
    result = app.ask("run the tests")
    assert result.exit_status == "submitted" and result.final_text == "running only test_calc.py"
    assert "⎿ not run: you said: only test_calc.py" in out.getvalue()


def test_the_approval_menu_answers_with_one_key() -> None:
    class Edit:
        kind = "edit"

    class Command:
        kind = "run"

    assert [o.value for o in options_for(Edit(), "")] == [YES, ALL_EDITS, NO]
    assert [o.value for o in options_for(Command(), "bash(ls)")] == [YES, ALWAYS, NO]
    # in auto-edit only an ask rule asks about an edit: "always" is then that file, not every edit
    assert [o.value for o in options_for(Edit(), "edit(poetry.lock)", all_edits=False)] == [YES, ALWAYS, NO]
    options = [Option("yes", "Yes", ("y",)), Option("always", "Always", ("a",)), Option("no", "No", ("n",))]
    for keys, want in (("a", "always"), ("y", "yes"), ("3", "no"), ("\x1b[B\r", "always"), ("\x1b", "no")):
        with create_pipe_input() as pipe:
            pipe.send_text(keys)
            assert choose("Allow?", options, escape="no", input=pipe, output=DummyOutput()) == want
    with create_pipe_input() as pipe:
        pipe.send_text("\x04")
        with pytest.raises(EOFError):
            choose("Allow?", options, escape="no", input=pipe, output=DummyOutput())


def test_resume_without_a_value_opens_the_picker() -> None:
    assert optional_resume_value(["--resume"]) == ["--resume", PICK]
    assert optional_resume_value(["chat", "-r", "--mode", "ask"]) == ["chat", "-r", PICK, "--mode", "ask"]
    assert optional_resume_value(["--resume", "2026"]) == ["--resume", "2026"]
    assert optional_resume_value(["-p", "x", "--", "--resume"]) == ["-p", "x", "--", "--resume"]


def test_a_unique_prefix_runs_its_command(repo: Path, home: Path) -> None:
    """HEAD: `/st` + Tab + Enter said `unknown command /st`."""
    app, out = _app(repo, ScriptedModel([]), stdin="/st\n/mod\n/zzz\n/exit\n")
    assert app.run() == 0
    text = out.getvalue()
    assert "session totals: 0 requests" in text and "/mod is ambiguous" in text
    assert "unknown command /zzz; /help lists them" in text and "unknown command /st" not in text
