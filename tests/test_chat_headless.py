"""`clover -p` / `clover chat -p` / `... | clover chat`: all of stdin is ONE request (the scripted
server's log says so), the answer on stdout as text, JSON or JSON lines, the permission mode from the
flags, and a non-zero exit when the server is down or the reply was cut off (exit_codes.py)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clover.repl.headless import read_prompt, run_print
from clover.settings import Settings
from tests.fakeserver import FakeChatServer, FakeReply

ROOT = Path(__file__).resolve().parents[1]


def _clover(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CLOVER_HOME": str(_state(tmp_path)),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PYTHONPATH": str(ROOT),
    }
    env.pop("OPENAI_BASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "clover.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )


def _state(tmp_path: Path) -> Path:
    """Clover's state beside the workspace (tmp_path), not inside it: the undo store may not lie in
    the tree it records."""
    return tmp_path.with_name(tmp_path.name + "-state")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLOVER_HOME", str(_state(tmp_path)))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return _state(tmp_path)


def _user_messages(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def test_piped_multiline_stdin_is_one_request(tmp_path: Path) -> None:
    with FakeChatServer([FakeReply(text="All three lines read."), FakeReply(text="Again.")]) as server:
        proc = _clover(tmp_path, "chat", "--base-url", server.url, "--model", "m", stdin="a\nb\nc\n")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "All three lines read.\n"
        assert len(server.requests) == 1 and _user_messages(server.requests[0]) == ["a\nb\nc"]
        # -p QUESTION with piped stdin: the question, then the input
        proc = _clover(
            tmp_path, "-p", "why?", "--base-url", server.url, "--model", "m", stdin="log 1\nlog 2\n"
        )
        assert proc.returncode == 0, proc.stderr
        assert _user_messages(server.requests[1]) == ["why?\n\nlog 1\nlog 2"]


def _run(tmp_path: Path, url: str, prompt: str, fmt: str = "text", mode: str = "ask") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_print(Settings(model="m", base_url=url, mode=mode), tmp_path, prompt, fmt, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_json_output_and_the_permission_mode(tmp_path: Path, home: Path) -> None:
    call = {"name": "bash", "arguments": {"command": "echo ran > out.txt"}}
    replies = [
        FakeReply(tool_calls=[call]),
        FakeReply(text="Could not run it."),
        FakeReply(tool_calls=[call]),
        FakeReply(text="Ran it."),
    ]
    with FakeChatServer(replies) as server:
        # ask mode: the command needs approval and no one can give it: refused, and nothing changed (3)
        code, out, _ = _run(tmp_path, server.url, "run it", "json")
        assert code == 3
        summary = json.loads(out)
        assert summary["status"] == "submitted" and summary["result"] == "Could not run it."
        assert summary["outcome"] == "refused" and summary["permission_denials"][0]["tool_name"] == "bash"
        assert summary["mode"] == "ask" and not (tmp_path / "out.txt").exists()
        tool_reply = next(m for m in server.requests[1]["messages"] if m["role"] == "tool")
        assert "no one can approve it" in tool_reply["content"]
        # yolo: the command runs; stream-json prints one JSON object a line, the result last
        code, out, _ = _run(tmp_path, server.url, "run it", "stream-json", mode="yolo")
        assert code == 0
        events = [json.loads(line) for line in out.splitlines()]
        assert {"text", "tool_call", "tool_result", "usage"} <= {e["type"] for e in events}
        assert events[-1]["type"] == "result" and events[-1]["result"] == "Ran it."
        assert (tmp_path / "out.txt").read_text() == "ran\n"
    from clover.tools.undo.checkpoints import Checkpoints

    Checkpoints(str(tmp_path)).undo()  # a -p run is checkpointed like any other: `clover undo` reverts it
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.slow
def test_yes_flag_sets_yolo_from_the_command_line(tmp_path: Path) -> None:
    call = {"name": "bash", "arguments": {"command": "echo ran > out.txt"}}
    with FakeChatServer([FakeReply(tool_calls=[call]), FakeReply(text="Ran it.")]) as server:
        proc = _clover(
            tmp_path,
            "chat",
            "-p",
            "run it",
            "--yes",
            "--output-format",
            "json",
            "--base-url",
            server.url,
            "--model",
            "m",
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["mode"] == "yolo" and (tmp_path / "out.txt").read_text() == "ran\n"


def test_bad_format_and_empty_prompt_are_usage_errors(tmp_path: Path, home: Path) -> None:
    assert _run(tmp_path, "http://127.0.0.1:9/v1", "q", "yaml")[0] == 2
    assert "--output-format must be one of text, json, stream-json" in _run(tmp_path, "x", "q", "yaml")[2]
    code, _, err = _run(tmp_path, "http://127.0.0.1:9/v1", "  ")
    assert code == 2 and "no prompt" in err
    assert read_prompt("-", io.StringIO("a\nb\n")) == "a\nb"


@pytest.mark.parametrize(
    ("reply", "exit_code"),
    [
        (FakeReply(text="The answer is", finish_reason="length"), 4),  # a limit: max_tokens
        (
            FakeReply(text="The answer is 4" + "2" * 40, chunk_size=4, drop_after=4),
            5,
        ),  # the backend cut the stream
    ],
)
def test_a_truncated_reply_is_labelled_and_fails(
    tmp_path: Path, home: Path, reply: FakeReply, exit_code: int
) -> None:
    with FakeChatServer([reply]) as server:
        code, out, err = _run(tmp_path, server.url, "q")
        assert code == exit_code and out.startswith("The answer is") and "clover: truncated:" in err
        code, out, _ = _run(tmp_path, server.url, "q", "json")
    assert code == 5  # no reply was left: the backend failed, still one JSON object
    assert json.loads(out)["status"] == "model_error"


def test_a_runaway_reply_is_cut(tmp_path: Path, home: Path) -> None:
    with FakeChatServer([FakeReply(text="Here it is: " + "s" * 4000, chunk_size=8)]) as server:
        code, out, _ = _run(tmp_path, server.url, "q", "json")
    summary = json.loads(out)
    assert code == 1 and summary["status"] == "truncated"
    assert summary["result"] == "Here it is: ss" and "repeating itself" in summary["truncated"]


@pytest.mark.parametrize("declines", [False, True])
def test_the_step_limit_wrap_up_and_a_model_that_declines_it(
    tmp_path: Path, home: Path, declines: bool
) -> None:
    """The chat wraps the model (runaway guard); the agent must still see the model's `wrap_up`."""
    from clover.core.model_protocol import AssistantTurn, ModelCapabilities, ToolCall

    class Looping(ModelCapabilities):
        name, context_window, wrap_up = "looping", 8192, not declines

        def __init__(self) -> None:
            self.options: list = []

        def complete(self, messages, tools, on_event=None, options=None):
            self.options.append(options)
            if options is not None and options.tool_choice == "none":
                return AssistantTurn(text="I looked at a.py; nothing is fixed yet.")
            return AssistantTurn(tool_calls=[ToolCall("view", {"path": "a.py"})])

    (tmp_path / "a.py").write_text("x = 1\n")
    model, out = Looping(), io.StringIO()
    code = run_print(
        Settings(model="m", max_steps=2), tmp_path, "look", "json", out=out, err=io.StringIO(), model=model
    )
    summary = json.loads(out.getvalue())
    assert code != 0 and summary["status"] == "limits_exceeded"
    if declines:
        assert len(model.options) == 2 and summary["result"] == ""
    else:
        assert (
            model.options[-1].tool_choice == "none"
            and summary["result"] == "I looked at a.py; nothing is fixed yet."
        )
