"""A headless run stopped by a signal, through the real `clover` program, mid-step (the agent's
command still running): the step is recorded (undo reverts it), the command's processes go with
the run, the json result still comes out, and the exit code says which signal.

HEAD: SIGTERM killed Clover at once: no json, exit -15 (143 in a shell), the step's record never
written (its changes could not be undone, and were taken for the user's edits from then on), and
the agent's command went on running after Clover was gone, writing files no one recorded. A
Ctrl-C'd call had a `tool_call` event and no `tool_result` in stream-json.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.clihelp import ROOT, git_repo, isolated_env, run_clover

BUGGY = "def add(a, b):\n    return a - b\n"
# the agent's command: a change, a marker beside the repository the test waits for (the step's
# own changes reach the workspace only when the step ends: the step boundary), then more after a
# pause long enough for a loaded machine to deliver the signal first; its sleep is found by its
# argument (behind the boundary its shell's pid is of its own PID namespace)
PAUSE = "6.0417"
SLOW = {
    "name": "bash",
    "arguments": {
        "command": f"sed -i 's/a - b/a + b/' calc.py; echo new > new.txt; echo up > ../started; sleep {PAUSE}; "
        "echo late > late.txt"
    },
}


def _default_signals() -> None:
    """In the child: the signals at their defaults, as in a terminal. A run started in the background
    or under nohup inherits SIGINT / SIGHUP ignored, and Clover rightly keeps an ignored signal ignored."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _running(argument: str) -> bool:
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if argument.encode() in fh.read().split(b"\0"):
                    return True
        except OSError:
            continue
    return False


def _command_is_gone(repo: Path) -> bool:
    """The agent's command went with the run (waits for it a while; the kill is asynchronous)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if not _running(PAUSE):
            return not (repo / "late.txt").exists()
        time.sleep(0.05)
    return False


def _env(tmp_path: Path) -> dict[str, str]:
    env = isolated_env(tmp_path)
    (tmp_path / "cfg" / "clover").mkdir(parents=True, exist_ok=True)
    (tmp_path / "cfg" / "clover" / "config.toml").write_text("sandbox = false\n")
    return {**env, "PYTHONPATH": str(ROOT)}


def _stopped(tmp_path: Path, argv: list[str], signum: int, marker: Path) -> subprocess.CompletedProcess:
    """Run `python -m clover ARGV`, send `signum` once `marker` exists (the step is under way)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "clover", *argv],
        cwd=ROOT,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signals,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    repo = git_repo(tmp_path / "repo", {"calc.py": BUGGY})
    (tmp_path / "issue.md").write_text("add subtracts")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool_calls": [SLOW]}, {"text": "Fixed."}]))
    return repo, script


@pytest.mark.parametrize(
    ("signum", "code", "outcome"), [(signal.SIGTERM, 143, "terminated"), (signal.SIGHUP, 129, "hung_up")]
)
def test_fix_stopped_by_a_signal_mid_step_reports_records_and_stops_the_command(
    tmp_path: Path, signum: int, code: int, outcome: str
) -> None:
    repo, script = _setup(tmp_path)
    proc = _stopped(
        tmp_path,
        [
            "fix",
            str(tmp_path / "issue.md"),
            "--repo",
            str(repo),
            "--model",
            f"scripted:{script}",
            "--yes",
            "--output-format",
            "json",
        ],
        signum,
        repo.parent / "started",
    )
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    report = json.loads(proc.stdout)
    assert (report["exit_code"], report["outcome"], report["is_error"]) == (code, outcome, True)
    assert [f["path"] for f in report["changes"]["files"]] == ["calc.py", "new.txt"]
    assert [e["tool_name"] for e in report["tool_errors"]] == ["bash"]
    assert _command_is_gone(repo)
    undo = run_clover("undo", "--repo", str(repo), env=_env(tmp_path))
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert "revert   calc.py" in undo.stdout and "delete   new.txt" in undo.stdout
    assert (repo / "calc.py").read_text() == BUGGY and not (repo / "new.txt").exists()


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_stream_json_answers_the_stopped_call_and_ends_with_the_result(
    tmp_path: Path, signum: int, code: int
) -> None:
    repo, script = _setup(tmp_path)
    proc = _stopped(
        tmp_path,
        [
            "fix",
            str(tmp_path / "issue.md"),
            "--repo",
            str(repo),
            "--model",
            f"scripted:{script}",
            "--yes",
            "--output-format",
            "stream-json",
        ],
        signum,
        repo.parent / "started",
    )
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    calls = [e for e in events if e["type"] == "tool_call"]
    results = [e for e in events if e["type"] == "tool_result"]
    assert len(calls) == len(results) == 1 and results[0]["is_error"] and results[0]["name"] == "bash"
    assert events[-1]["type"] == "result" and events[-1]["exit_code"] == code == proc.returncode


def test_print_stopped_by_sigterm_reports_in_json_and_exits_143(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "calc.py").write_text(BUGGY)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool_calls": [SLOW]}, {"text": "Fixed."}]))
    proc = _stopped(
        tmp_path,
        [
            "-p",
            "fix add",
            "--repo",
            str(work),
            "--model",
            f"scripted:{script}",
            "--yes",
            "--output-format",
            "json",
        ],
        signal.SIGTERM,
        work.parent / "started",
    )
    assert proc.returncode == 143, (proc.stdout, proc.stderr)
    report = json.loads(proc.stdout)
    assert (report["exit_code"], report["outcome"]) == (143, "terminated")
    undo = run_clover("undo", "--repo", str(work), env=_env(tmp_path))
    assert undo.returncode == 0 and (work / "calc.py").read_text() == BUGGY, undo.stdout + undo.stderr


def test_a_signal_ignored_by_the_caller_stays_ignored(tmp_path: Path) -> None:
    """`nohup clover fix ...`: SIGHUP is ignored before Clover starts, and stays so."""
    repo, script = _setup(tmp_path)
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
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
    )
    deadline = time.monotonic() + 60
    while not (repo.parent / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGHUP)
    proc.communicate(timeout=60)
    assert proc.returncode == 0 and (repo / "late.txt").exists()


def test_chat_stopped_by_sigterm_mid_step_records_the_step_and_leaves(tmp_path: Path) -> None:
    """The chat, not only headless runs: SIGTERM mid-step ends the chat (exit 143, not back at the
    prompt), with the step recorded for `clover undo`; at the prompt it simply leaves."""
    repo, _ = _setup(tmp_path)
    (tmp_path / "chat.json").write_text(json.dumps([{"tool_calls": [SLOW]}, {"text": "Fixed."}]))
    argv = [
        sys.executable,
        "-m",
        "clover.repl",
        "--repo",
        str(repo),
        "--model",
        f"scripted:{tmp_path / 'chat.json'}",
        "--mode",
        "yolo",
        "--no-live",
    ]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        env=_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_signals,
    )
    assert proc.stdin is not None
    proc.stdin.write("fix add\n")
    proc.stdin.flush()  # stdin stays open: the chat would wait for the next request
    deadline = time.monotonic() + 60
    while not (repo.parent / "started").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, (out, err)
    assert _command_is_gone(repo)
    undo = run_clover("undo", "--repo", str(repo), env=_env(tmp_path))
    assert undo.returncode == 0 and "revert   calc.py" in undo.stdout, undo.stdout + undo.stderr
    assert (repo / "calc.py").read_text() == BUGGY and not (repo / "new.txt").exists()
