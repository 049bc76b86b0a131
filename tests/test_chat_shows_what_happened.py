"""What the chat shows is what happened, each with the run that showed otherwise: a malformed call
stays in the transcript, `seq 1 5000` is counted as 5000 lines and `/show` has it whole after its
temp file is gone, `clover serve` without its extra says what to install, the status line never
wraps, the diffusion view shows no template tokens, a command is shown once at its approval, a new
file's diff comes from /dev/null, a resumed session counts its requests, an empty session is not
announced as saved, a command that printed nothing says so once, and leaving with the model
loaded is quick."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from clover.backends.scripted import ScriptedModel
from clover.core.model_protocol import StreamEvent
from clover.repl.app import ChatApp
from clover.repl.diffusion_view import DiffusionView
from clover.repl.sessions import SessionStore
from clover.settings import Settings
from tests.clihelp import git_repo

ROOT = Path(__file__).resolve().parents[1]


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
    turns: list[dict],
    stdin: str = "",
    width: int = 120,
    terminal: bool = False,
    **settings: object,
) -> tuple[ChatApp, io.StringIO]:
    out = io.StringIO()
    settings.setdefault("mode", "yolo")
    console = Console(file=out, force_terminal=terminal, color_system=None, width=width)
    app = ChatApp(
        Settings(**settings),
        repo,
        live=False,
        tty=False,
        stdin=io.StringIO(stdin),
        console=console,
        model=ScriptedModel(turns),
    )
    return app, out


def _calls(*calls: dict) -> dict:
    return {"tool_calls": list(calls)}


# 1. every call the model made is on screen


def test_malformed_calls_are_in_the_transcript(repo: Path, home: Path) -> None:
    """HEAD: a `git` call with an unknown key vanished between the glob result and `done`; three in a
    row showed only `format_error: …`."""
    bad_git = {"name": "git", "arguments": {"subcommand": "status", "colour": "always"}}
    turns = [
        _calls({"name": "glob", "arguments": {"pattern": "*.py"}}, bad_git),
        {"text": "done"},
        _calls(bad_git),
        _calls({"name": "nosuch", "arguments": {}}),
        _calls({"name": "view", "arguments": {}, "error": "unclosed <parameter=path>"}),
    ]
    app, out = _app(repo, turns)
    app.ask("look around")
    first = out.getvalue()
    assert first.index("⏺ glob(*.py)") < first.index("⏺ git(status") < first.index("done")
    assert re.search(r"⎿ ✗ malformed: Invalid arguments for git: .*colour", first)
    app.ask("again")
    text = out.getvalue()[len(first) :]
    assert text.count("⎿ ✗ malformed:") == 3
    assert "⏺ nosuch(" in text and "Unknown tool 'nosuch'" in text
    assert "⏺ view()" in text and "Malformed tool call: unclosed <parameter=path>" in text
    assert "format_error: 3 malformed tool calls in a row" in text


# 2. whole outputs, counted right, kept for the session


def test_a_long_output_is_counted_whole_and_shown_whole_after_its_temp_file_is_gone(
    repo: Path, home: Path
) -> None:
    """HEAD: `seq 1 5000` was `✓ 3422 lines` (the cut copy's lines) and `/show` printed the cut copy,
    pointing at /tmp/clover-output-…/exec-….log, which was gone later."""
    app, out = _app(repo, [_calls({"name": "bash", "arguments": {"command": "seq 1 5000"}}), {"text": "ok"}])
    app.ask("count")
    text = out.getvalue()
    assert "⎿ ✓ 5000 lines · exit 0  [1]" in text and "… 4992 more lines (/show 1)" in text
    tool_message = next(m["content"] for m in app.state.agent.messages if m["role"] == "tool")
    spill = re.search(r"(/\S+/exec-\S+\.log)", tool_message).group(1)  # the model got the cut copy
    os.remove(spill)  # what the environment's exit handler does when the process ends
    before = len(out.getvalue())
    from clover.repl.slash import dispatch

    dispatch(app, "/show 1")
    shown = out.getvalue()[before:]
    assert shown.split("\n")[1:5001] == [str(i) for i in range(1, 5001)]
    assert "5000 lines · exit 0" in shown and "exec-" not in shown


def test_no_output_says_so(repo: Path, home: Path) -> None:
    """HEAD: `✓ 1 line · exit 0` and `(no output)` for a command that printed nothing."""
    app, out = _app(repo, [_calls({"name": "bash", "arguments": {"command": "true"}}), {"text": "ok"}])
    app.ask("run true")
    assert "⎿ ✓ no output · exit 0  [1]" in out.getvalue() and "(no output)" not in out.getvalue()


# 4. clover serve without its extra


def test_serve_without_the_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """HEAD: `internal error: ModuleNotFoundError: No module named 'uvicorn'`."""
    from typer.testing import CliRunner

    from clover.main import app

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if it were not installed
    result = CliRunner().invoke(app, ["serve"])
    assert result.exit_code == 2 and result.exception is None or isinstance(result.exception, SystemExit)
    assert (
        "clover serve needs uvicorn, from the [serve] extra: pip install 'clover-cli[serve]'" in result.output
    )
    assert "Traceback" not in result.output


# 6. layout: the status line and the diffusion view


def test_the_status_line_never_wraps(repo: Path, home: Path) -> None:
    """HEAD: it wrapped at 120 columns and took three lines at 60."""
    turns = [{"text": "ok", "prompt_tokens": 123_456, "completion_tokens": 7_890}] * 2
    for width in (60, 120):
        app, out = _app(
            repo, turns, width=width, terminal=True, model="scripted:a-rather-long-model-name.jsonl"
        )
        app.ask("hi")
        lines = out.getvalue().splitlines()
        status = next(line for line in lines if "tok" in line and "ctx" in line)
        assert len(status) < width and lines[lines.index(status) + 1 :] == []
        assert "yolo" in status and "ctx" in status


def test_the_diffusion_view_shows_no_template_tokens() -> None:
    """HEAD: `</think>⏎⏎<tool_call>⏎<function=` in the live view."""
    view = DiffusionView()
    pieces = [
        "</think>",
        "\n\n",
        "<tool_call>",
        "\n",
        "<function=",
        "bash",
        ">\n",
        "<parameter=",
        "command",
        ">\n",
        None,
        None,
        "\n",
        "</parameter>",
        "\n",
        "</function>",
        "\n",
        "</tool_call>",
        "<|im_end|>",
    ]
    view.update(StreamEvent("block_round", data={"tokens": pieces, "block": 3, "round": 2}))
    line = view.render(200).plain
    assert "⏺ bash command=░░" in line
    assert not re.search(r"</?(think|tool_call|function|parameter)|<\|", line)
    # a tokenizer that splits the markup, half decoded: no fragments either
    view.update(
        StreamEvent(
            "block_round",
            data={
                "tokens": ["<", None, "tool", "_call", ">", "<", "function", "=", "view", ">"],
                "block": 4,
                "round": 1,
            },
        )
    )
    assert view.render(200).plain.endswith("│ ░view ")


# 7. the smaller ones


def test_a_command_is_shown_once_at_its_approval(repo: Path, home: Path) -> None:
    """HEAD: the bash approval printed the command twice (the call line and the command again)."""
    call = _calls({"name": "bash", "arguments": {"command": "echo approve-me"}})
    app, out = _app(repo, [call, {"text": "ok"}], stdin="y\n", mode="ask")
    app.ask("run it")
    before_question = out.getvalue().split("Allow?")[0]
    assert before_question.count("echo approve-me") == 2  # `⏺ bash(echo approve-me)` and the hint
    assert "[a]lways allows bash(echo approve-me)" in before_question
    long = "python -c 'print(1)' && " + "echo x && " * 12 + "echo done"
    app2, out2 = _app(
        repo,
        [_calls({"name": "bash", "arguments": {"command": long}}), {"text": "ok"}],
        stdin="n\n",
        mode="ask",
        width=80,
    )
    app2.ask("run the long one")
    assert long in out2.getvalue()  # cut on the call line: shown whole once


def test_a_new_files_diff_comes_from_dev_null(repo: Path, home: Path) -> None:
    """HEAD: `--- a/new_mod.py` for a file that did not exist."""
    create = _calls({"name": "create", "arguments": {"path": "new_mod.py", "file_text": "X = 1\n"}})
    app, out = _app(repo, [create, {"text": "ok"}], stdin="y\n", mode="ask")
    app.ask("make it")
    text = out.getvalue()
    assert "--- /dev/null\n+++ b/new_mod.py" in text and "--- a/new_mod.py" not in text


def test_resume_counts_the_requests_made_even_after_compaction(repo: Path, home: Path) -> None:
    """HEAD: `/status` said 6 requests, the resumed session `(0 requests)`: compaction had folded
    every request into its summary, and resume counted the requests left in the messages."""
    turns = [{"text": f"answer {i}"} for i in range(6)]
    app, out = _app(repo, turns, stdin="".join(f"question {i}\n" for i in range(6)) + "/status\n/exit\n")
    assert app.run() == 0
    assert "session totals: 6 requests" in out.getvalue()
    from clover.repl import compaction

    # as compaction leaves it: the requests are in the summary
    session = app.state.store.load(app.state.session.id)
    session.messages = [
        session.messages[0],
        {"role": "user", "content": f"{compaction.MARKER}\nsix requests"},
        {"role": "assistant", "content": compaction.ACK},
    ]
    app.state.store.save(session)
    again, out2 = _app(repo, [], stdin="/status\n/exit\n")
    assert again.run(resume=session.id) == 0
    assert f"resumed session {session.id} (6 requests)" in out2.getvalue()
    assert "session totals: 6 requests" in out2.getvalue()


def test_an_empty_session_is_not_announced_as_saved(repo: Path, home: Path) -> None:
    """HEAD: every chat ended with `session … saved · clover chat --resume …`, also one with nothing in
    it, which was not written (the command it gave did not work)."""
    app, out = _app(repo, [], stdin="/status\n/exit\n")
    assert app.run() == 0
    assert "saved" not in out.getvalue() and "nothing to save: no request in this session" in out.getvalue()
    assert SessionStore(home / "sessions").ids() == []


# 8. leaving with the model loaded


def test_leaving_with_torch_loaded_skips_the_teardown_but_not_the_exit_handlers(tmp_path: Path) -> None:
    """The 2.9 s Ctrl-D exit was the interpreter's teardown of torch's object graph (its final
    garbage collections). leave() ends the process after the exit handlers instead: a handler still
    runs (the spill folder goes), output is flushed, the code is kept, the teardown is not done."""
    pytest.importorskip("torch")
    marker = tmp_path / "handler-ran"
    script = textwrap.dedent(f"""
        import atexit, sys
        import torch
        class Teardown:
            def __del__(self):
                print("teardown ran", flush=True)
        keep = Teardown()
        atexit.register(lambda: open({str(marker)!r}, "w").write("yes"))
        print("chat done", end="")
        from clover.repl.leave import leave
        leave(3)
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 3 and proc.stdout == "chat done"  # no "teardown ran": it was skipped
    assert marker.read_text() == "yes"
