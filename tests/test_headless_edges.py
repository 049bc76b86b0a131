"""Headless honesty, red-teamed through the real `clover` program (a real HTTP server on 127.0.0.1 or
a scripted model, real git repositories): endings the issue-46 tests did not try.

HEAD: a server that dropped the stream in the middle of the reply after the agent's edit exited 0
as "fixed" (the broken reply taken for the final answer, though the model may have been writing
its next call); `--patch-out` naming a directory ran the whole fix and then only warned.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.clihelp import git_repo, isolated_env, run_fix
from tests.fakeserver import FakeChatServer, FakeReply

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
EDIT = {"name": "str_replace", "arguments": {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"}}
UNDO_EDIT = {"name": "str_replace", "arguments": {"path": "calc.py", "old_str": "a + b", "new_str": "a - b"}}


def _repo(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    repo = git_repo(tmp_path / "repo", {"calc.py": BUGGY})
    (tmp_path / "issue.md").write_text("add(2, 3) returns -1")
    return repo, isolated_env(tmp_path)


def test_a_stream_dropped_after_a_change_is_a_backend_failure_not_a_fix(tmp_path: Path) -> None:
    repo, env = _repo(tmp_path)
    for fmt in ("json", "stream-json"):
        subprocess.run(["git", "checkout", "-q", "."], cwd=repo, check=True)
        with FakeChatServer(
            [FakeReply(tool_calls=[EDIT]), FakeReply(text="Fixed, and now I will run", drop_after=2)]
        ) as server:
            proc = run_fix(
                tmp_path / "issue.md",
                repo,
                "--base-url",
                server.url,
                "--model",
                "m",
                "--output-format",
                fmt,
                env=env,
            )
        report = json.loads(proc.stdout.splitlines()[-1] if fmt == "stream-json" else proc.stdout)
        assert proc.returncode == 5 and report["exit_code"] == 5 and report["is_error"], proc.stdout
        assert "stream ended" in report["truncated"]
        assert [f["path"] for f in report["changes"]["files"]] == ["calc.py"]  # the change is still reported


def test_a_model_that_reverts_its_own_edit_has_changed_nothing(tmp_path: Path) -> None:
    """(Held at HEAD too: the real diff decides, not whether an edit ran.)"""
    repo, env = _repo(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps([{"tool_calls": [EDIT]}, {"tool_calls": [UNDO_EDIT]}, {"text": "Fixed add."}])
    )
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{script}",
        "--output-format",
        "json",
        env=env,
    )
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["outcome"] == "no_change" and report["changes"]["files"] == []


def test_patch_out_naming_a_directory_is_refused_before_anything_runs(tmp_path: Path) -> None:
    repo, env = _repo(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool_calls": [EDIT]}, {"text": "Fixed add."}]))
    (tmp_path / "out").mkdir()
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{script}",
        "--patch-out",
        str(tmp_path / "out"),
        env=env,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--patch-out" in proc.stderr, proc.stderr
    assert (repo / "calc.py").read_text() == BUGGY  # nothing ran


def test_patch_out_on_a_read_only_file_system_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """Found by trying, not by os.access: for root, os.access says yes to a file on a read-only
    file system (/proc here), and the fix ran before its patch could not be written."""
    repo, env = _repo(tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool_calls": [EDIT]}, {"text": "Fixed add."}]))
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{script}",
        "--patch-out",
        "/proc/clover-fix.diff",
        env=env,
    )
    assert proc.returncode == 2 and "--patch-out: cannot write /proc/clover-fix.diff" in proc.stderr, (
        proc.stderr
    )
    assert (repo / "calc.py").read_text() == BUGGY  # nothing ran
