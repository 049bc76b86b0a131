"""Headless runs say what happened, through the real `clover`
program: a real git repository, a scripted model or a real HTTP server on 127.0.0.1.

- every refused call is a stderr line as it happens, a `permission_denials` entry in json and a
  `tool_result` (is_error) event in stream-json; refused-and-unchanged is exit 3, never 0;
- a fix that changed nothing exits 0 only on the model's explicit "No change needed";
- the server being down is the same exit code (5) for `clover fix` and `clover -p`;
- the summary comes from the real diff and the last test command, the model's words are labelled
  and never cut (a reply the server cut is said to be cut), the commit subject is not cut mid-word;
- on a terminal, `clover fix` shows progress on stderr before the model's first reply."""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clover.main import app
from tests.clihelp import ROOT, git_repo, isolated_env, run_clover, run_fix
from tests.fakeserver import FakeChatServer, FakeReply

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
EDIT = {
    "name": "str_replace",
    "arguments": {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"},
}
PYTEST = {"name": "bash", "arguments": {"command": f"{sys.executable} -m pytest -q test_calc.py"}}


def _setup(tmp_path: Path, turns: list[dict], *, config: str = "") -> tuple[Path, Path, dict[str, str]]:
    repo = git_repo(tmp_path / "repo", {"calc.py": BUGGY, "test_calc.py": TEST})
    (tmp_path / "issue.md").write_text("add(2, 3) returns -1 instead of 5.")
    script = tmp_path / "script.json"
    script.write_text(json.dumps(turns))
    env = isolated_env(tmp_path)
    if config:
        (tmp_path / "cfg" / "clover").mkdir(parents=True)
        (tmp_path / "cfg" / "clover" / "config.toml").write_text(config)
    return repo, script, env


def _fix(
    tmp_path: Path, repo: Path, script: Path, env: dict[str, str], *args: str
) -> subprocess.CompletedProcess:
    return run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{script}",
        *args,
        env=env,
    )


def _invoke(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """The same command in this process (no interpreter start-up): exit code, stdout, stderr."""
    result = CliRunner().invoke(
        app,
        args,
        env={k: None for k in os.environ if k.startswith(("CLOVER_", "OPENAI_"))} | env,
        catch_exceptions=False,
    )
    return result.exit_code, result.stdout, result.stderr


def _events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


# --------------------------------------------------------------------------- refusals


def test_fix_whose_every_edit_is_refused_says_so_everywhere_and_exits_3(tmp_path: Path) -> None:
    """No --yes, and the user's config keeps `ask`: both edits are refused. HEAD printed the model's
    "Fixed it and all tests pass.", `(no changes)` and exited 0, with no record of the refusals."""
    turns = [
        {"tool_calls": [EDIT]},
        {"tool_calls": [{**EDIT, "arguments": {**EDIT["arguments"], "old_str": "a - b"}}]},
        {"text": "Fixed it and all tests pass."},
    ]
    repo, script, env = _setup(tmp_path, turns, config='mode = "ask"\n')
    args = ["fix", str(tmp_path / "issue.md"), "--repo", str(repo), "--model", f"scripted:{script}"]
    proc = run_clover(*args, env=env)
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert (repo / "calc.py").read_text() == BUGGY
    refused = [line for line in proc.stderr.splitlines() if line.startswith("clover: refused: str_replace")]
    assert len(refused) == 2 and "calc.py" in refused[0] and "approval" in refused[0], proc.stderr
    assert "Change: no files changed" in proc.stdout
    assert "The model's words: Fixed it and all tests pass." in proc.stdout  # labelled, not the report
    assert "[refused] exit 3" in proc.stderr

    code, out, err = _invoke([*args, "--output-format", "json"], env)
    report = json.loads(out)
    assert code == 3 and report["exit_code"] == 3 and report["outcome"] == "refused" and report["is_error"]
    denials = report["permission_denials"]
    assert [d["tool_name"] for d in denials] == ["str_replace", "str_replace"]
    assert denials[0]["tool_input"]["path"] == "calc.py" and "approval" in denials[0]["reason"]
    assert denials[0]["tool_use_id"] and err.count("clover: refused: str_replace") == 2

    code, out, _ = _invoke([*args, "--output-format", "stream-json"], env)
    events = _events(out)
    calls = [e for e in events if e["type"] == "tool_call"]
    results = [e for e in events if e["type"] == "tool_result"]
    assert code == 3 and len(calls) == len(results) == 2
    assert all(r["is_error"] and r["refused"] and r["name"] == "str_replace" for r in results)
    assert events[-1]["type"] == "result" and events[-1]["exit_code"] == 3


def test_print_with_an_edit_and_a_command_refused_exits_3(tmp_path: Path) -> None:
    """`clover -p "fix it"` in the default mode: HEAD printed `Fixed.` and exited 0, file unchanged."""
    work = tmp_path / "work"  # not tmp_path itself: the isolated home (checkpoint store) lies there
    work.mkdir()
    (work / "calc.py").write_text(BUGGY)
    env = isolated_env(tmp_path)
    edit = {
        "name": "str_replace",
        "arguments": {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"},
    }
    command = {"name": "bash", "arguments": {"command": "echo ran > ran.txt"}}
    for fmt in ("text", "json", "stream-json"):
        replies = [FakeReply(tool_calls=[edit, command]), FakeReply(text="Fixed.")]
        with FakeChatServer(replies) as server:
            args = [
                "-p",
                "fix it",
                "--repo",
                str(work),
                "--base-url",
                server.url,
                "--model",
                "m",
                "--output-format",
                fmt,
            ]
            if fmt == "text":
                proc = run_clover(*args, env=env)
                code, out, err = proc.returncode, proc.stdout, proc.stderr
            else:
                code, out, err = _invoke(args, env)
        assert code == 3, (fmt, out, err)
        assert (work / "calc.py").read_text() == BUGGY and not (work / "ran.txt").exists()
        lines = err.splitlines()
        assert any(ln.startswith("clover: refused: str_replace calc.py") for ln in lines), err
        assert any(ln.startswith("clover: refused: bash echo ran > ran.txt") for ln in lines), err
        if fmt == "text":
            assert out == "Fixed.\n" and "2 tool call(s) refused in ask mode and nothing changed" in err
        if fmt == "json":
            report = json.loads(out)
            assert [d["tool_name"] for d in report["permission_denials"]] == ["str_replace", "bash"]
            assert report["permission_denials"][1]["tool_input"] == {"command": "echo ran > ran.txt"}
            assert report["outcome"] == "refused" and report["result"] == "Fixed."
        if fmt == "stream-json":
            results = [e for e in _events(out) if e["type"] == "tool_result"]
            assert [(r["name"], r["is_error"], r["refused"]) for r in results] == [
                ("str_replace", True, True),
                ("bash", True, True),
            ]


def test_a_refusal_after_a_change_is_reported_but_the_change_decides(tmp_path: Path) -> None:
    """auto-edit (fix's default): the edit runs, the test command is refused: exit 0 with the change,
    the refusal still on stderr and in json."""
    repo, script, env = _setup(
        tmp_path, [{"tool_calls": [EDIT]}, {"tool_calls": [PYTEST]}, {"text": "Done."}]
    )
    proc = _fix(tmp_path, repo, script, env, "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["outcome"] == "fixed" and report["mode"] == "auto-edit"
    assert [d["tool_name"] for d in report["permission_denials"]] == ["bash"]
    assert "clover: refused: bash" in proc.stderr and (repo / "calc.py").read_text() == FIXED


# --------------------------------------------------------------------------- no change


def test_a_fix_that_changed_nothing_never_exits_0_unless_the_model_says_no_change_is_needed(
    tmp_path: Path,
) -> None:
    view = {"name": "view", "arguments": {"path": "calc.py"}}
    repo, script, env = _setup(tmp_path, [{"tool_calls": [view]}, {"text": "Fixed: add now adds."}])
    proc = _fix(tmp_path, repo, script, env, "--yes", "--output-format", "json")
    assert proc.returncode == 1, proc.stderr  # HEAD: 0, "submitted"
    assert json.loads(proc.stdout)["outcome"] == "no_change"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [view]},
                {"text": "**No change needed**: add already adds; the issue is about 1.2."},
            ]
        )
    )
    proc = _fix(tmp_path, repo, script, env, "--yes", "--output-format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outcome"] == "no_change_needed"


def test_the_prompt_offers_the_no_change_answer_to_a_server_model(tmp_path: Path) -> None:
    repo, _, env = _setup(tmp_path, [])
    with FakeChatServer([FakeReply(text="No change needed: it works.")]) as server:
        proc = run_fix(
            tmp_path / "issue.md",
            repo,
            "--base-url",
            server.url,
            "--model",
            "m",
            env=env,
        )
        system = server.requests[0]["messages"][0]["content"]
    assert proc.returncode == 0, proc.stderr
    assert "start your answer with the words: No change needed." in system


# --------------------------------------------------------------------------- the backend


def test_server_down_is_the_same_exit_code_for_fix_and_print(tmp_path: Path) -> None:
    """HEAD: `clover fix` exited 2, `clover -p` 1. Now both 5, one line, and nothing left behind."""
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    repo, _, env = _setup(tmp_path, [])
    fix = run_fix(
        tmp_path / "issue.md",
        repo,
        "--base-url",
        url,
        "--model",
        "m",
        "--yes",
        env=env,
    )
    one_shot = run_clover("-p", "hello", "--repo", str(repo), "--base-url", url, "--model", "m", env=env)
    assert fix.returncode == one_shot.returncode == 5, (fix.returncode, one_shot.returncode)
    assert fix.stderr.strip().count("\n") == 0 and url in fix.stderr  # one line, naming the server
    for proc in (fix, one_shot):
        assert "cannot reach the model server" in proc.stderr and "Traceback" not in proc.stderr
    assert not any((tmp_path / "state").rglob("fix-*.jsonl"))  # no trajectory of a run that never started
    assert (
        subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
        == ""
    )


# --------------------------------------------------------------------------- the report


def test_the_summary_comes_from_the_diff_and_the_test_run_not_the_model(tmp_path: Path) -> None:
    """The model claims success; the test it ran failed (a wrong fix): the report says exit 1."""
    wrong = {
        "name": "str_replace",
        "arguments": {"path": "calc.py", "old_str": "return a - b", "new_str": "return a * b"},
    }
    repo, script, env = _setup(
        tmp_path,
        [{"tool_calls": [wrong]}, {"tool_calls": [PYTEST]}, {"text": "Fixed add, and all tests pass."}],
    )
    proc = _fix(tmp_path, repo, script, env, "--yes")
    assert proc.returncode == 0, proc.stderr
    head = proc.stdout.split("\ndiff --git")[0]
    assert "Change: 1 file changed, +1 -1: calc.py (+1 -1)" in head
    assert f"Tests: `{sys.executable} -m pytest -q test_calc.py` exit 1, after the last edit" in head
    assert "The model's words: Fixed add, and all tests pass." in head
    assert "+    return a * b" in proc.stdout


def test_a_reply_cut_by_the_server_is_labelled_and_the_full_answer_is_never_cut(tmp_path: Path) -> None:
    repo, _, env = _setup(tmp_path, [])
    answer = (
        "Fixed `add` in calc.py: it subtracted its arguments instead of adding them, so add(2, 3) "
        "gave -1.\nThe test in test_calc.py now passes; nothing else changed."
    )
    with FakeChatServer(
        [
            FakeReply(tool_calls=[EDIT]),
            FakeReply(text="Fixed `add` in", finish_reason="length"),
            FakeReply(tool_calls=[EDIT]),
            FakeReply(text=answer),
        ]
    ) as server:
        cut = run_fix(
            tmp_path / "issue.md",
            repo,
            "--base-url",
            server.url,
            "--model",
            "m",
            "--output-format",
            "json",
            env=env,
        )
        subprocess.run(["git", "checkout", "-q", "calc.py"], cwd=repo, check=True)
        commit_env = {
            **env,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        }
        full = run_fix(
            tmp_path / "issue.md",
            repo,
            "--base-url",
            server.url,
            "--model",
            "m",
            "--commit",
            env=commit_env,
        )
    report = json.loads(cut.stdout)
    assert cut.returncode == 0 and report["outcome"] == "fixed"  # the change is the result...
    assert (
        report["final_text"] == "Fixed `add` in" and "max_tokens" in report["truncated"]
    )  # ...the cut is said
    assert full.returncode == 0, full.stderr
    assert (
        "The model's words:\n  Fixed `add` in calc.py: it subtracted its arguments instead of adding them, so "
        "add(2, 3) gave -1.\n  The test in test_calc.py now passes; nothing else changed." in full.stdout
    )
    message = subprocess.run(
        ["git", "log", "-1", "--format=%B"], cwd=repo, capture_output=True, text=True
    ).stdout
    subject = message.splitlines()[0]
    assert subject == "clover fix: calc.py"  # the answer's first line is too long for a subject: not cut
    assert answer in message


def test_a_cut_answer_to_a_question_is_a_limit(tmp_path: Path) -> None:
    env, work = isolated_env(tmp_path), tmp_path / "work"
    work.mkdir()
    with FakeChatServer([FakeReply(text="The answer is", finish_reason="length")]) as server:
        proc = run_clover("-p", "q", "--repo", str(work), "--base-url", server.url, "--model", "m", env=env)
    assert proc.returncode == 4 and "clover: truncated:" in proc.stderr and "warning" not in proc.stderr


# --------------------------------------------------------------------------- progress


def test_fix_on_a_terminal_shows_progress_before_the_first_reply(tmp_path: Path) -> None:
    """HEAD wrote nothing to the terminal until the run ended (15-20 s with the embedded model)."""
    repo, script, env = _setup(
        tmp_path, [{"delay": 2, "tool_calls": [EDIT]}, {"tool_calls": [PYTEST]}, {"text": "Fixed."}]
    )
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "clover",
            "fix",
            str(tmp_path / "issue.md"),
            "--repo",
            str(repo),
            "--model",
            f"scripted:{script}",
            "--yes",
        ],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=slave,
        text=True,
    )
    os.close(slave)
    chunks: list[tuple[float, bytes]] = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            if not ready:
                break
            try:
                data = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append((time.monotonic(), data))
    finally:
        proc.wait(timeout=60)
        ended = time.monotonic()
        os.close(master)
    assert proc.returncode == 0
    screen = b"".join(c for _, c in chunks).decode(errors="replace")
    assert "clover: fixing" in screen and "mode yolo" in screen
    assert "step 1 · waiting for the model" in screen
    assert "step 1 · str_replace calc.py ✓" in screen and "-m pytest -q test_calc.py → exit 0" in screen
    # the first line came before the model's first reply, which took 2 s
    assert chunks and ended - chunks[0][0] >= 1.8, [(round(ended - t, 2), c[:40]) for t, c in chunks]


def test_a_command_run_by_a_long_program_path_shows_what_it_ran() -> None:
    """A command that starts with a long interpreter path (a venv in a deep checkout) is cut in the
    middle on the progress line: the path's start and the command's end (which tests) both show."""
    import io

    from clover.call_log import CallLog
    from clover.core.model_protocol import ToolCall
    from clover.core.tool_protocol import ToolResult

    program = "/home/someone/" + "a-rather-long-directory-name/" * 4 + ".venv/bin/python"
    err = io.StringIO()
    log = CallLog(err, progress=True)
    log(
        ToolCall("bash", {"command": f"{program} -m pytest -q test_calc.py"}),
        ToolResult("1 passed", exit_code=0),
    )
    line = err.getvalue().strip()
    assert line.startswith("clover: step 0 · bash /home/someone/") and "…" in line
    assert line.endswith("-m pytest -q test_calc.py → exit 0"), line
    assert len(line) <= len("clover: step 0 · bash ") + 60 + len(" → exit 0")


def test_print_names_a_change_it_held_and_did_not_apply(tmp_path: Path) -> None:
    """A step that writes a git hook under `-p --yes`: the hook is held (no one can approve it),
    and the run says so on stderr and in json, rather than saying nothing."""
    from clover.tools.safety.boundary import available

    if not available(str(tmp_path / "probe"))[0]:
        pytest.skip("user namespaces or overlayfs are missing here")
    hook = {
        "name": "bash",
        "arguments": {"command": "printf '#!/bin/sh\\necho hi\\n' > .git/hooks/pre-commit"},
    }
    repo, script, env = _setup(tmp_path, [{"tool_calls": [hook]}, {"text": "Done."}])
    args = ["-p", "add a hook", "--repo", str(repo), "--model", f"scripted:{script}", "--yes"]
    code, out, err = _invoke([*args, "--output-format", "json"], env)
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    held = json.loads(out)["held_back"]
    assert [h["path"] for h in held] == [".git/hooks/pre-commit"], held
    assert "clover: not applied: .git/hooks/pre-commit" in err
