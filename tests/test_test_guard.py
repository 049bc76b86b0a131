"""The test guard (clover_cli/test_guard.py, tools/testrun.py): `clover fix` runs the repository's
tests before and after the agent; a change that turns a passing test into a failing one is reported,
and rolled back for a model that asks for it (the embedded one), the user's own work left alone."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clover import gitdiff
from clover.test_guard import TestGuard
from clover.tools.environment import LocalEnvironment
from clover.tools.testrun import run_tests, test_files
from tests.clihelp import git_repo, isolated_env, run_fix

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = (
    "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n"
)


def _repo(tmp_path):
    return git_repo(tmp_path / "repo", {"calc.py": CALC, "test_calc.py": TESTS, "conftest.py": ""})


def _script(tmp_path, old: str, new: str):
    turns = [
        {
            "tool_calls": [
                {"name": "str_replace", "arguments": {"path": "calc.py", "old_str": old, "new_str": new}}
            ]
        },
        {"text": "Done."},
    ]
    path = tmp_path / "script.json"
    path.write_text(json.dumps(turns))
    return f"scripted:{path}"


def _fix(tmp_path, model: str, *flags: str):
    (tmp_path / "issue.md").write_text("add(2, 3) returns -1 instead of 5.")
    return run_fix(
        tmp_path / "issue.md",
        tmp_path / "repo",
        "--model",
        model,
        "--output-format",
        "json",
        *flags,
        env=isolated_env(tmp_path),
    )


def test_the_runner_reports_each_tests_outcome(tmp_path):
    repo = _repo(tmp_path)
    env = LocalEnvironment(str(repo))
    files = test_files(env.list_files(env.root))
    assert files == ["test_calc.py"] and test_files(["node_modules/x/test_a.py", "pkg/a_test.py"]) == [
        "pkg/a_test.py"
    ]
    run = run_tests(env, files, 60, python=sys.executable)
    assert run.ok and run.outcomes == {"test_calc.py::test_add": "failed", "test_calc.py::test_mul": "passed"}
    assert not list(repo.rglob("__pycache__")) and not (repo / ".pytest_cache").exists()  # it writes nothing


def test_a_change_that_breaks_a_passing_test_is_reported(tmp_path):
    _repo(tmp_path)
    proc = _fix(tmp_path, _script(tmp_path, "    return a * b", "    return a ** b"), "--yes")
    report = json.loads(proc.stdout)["test_guard"]
    assert report["checked"] and report["broken"] == ["test_calc.py::test_mul"] and not report["rolled_back"]
    assert "breaks the tests: 1 passing test(s) fail: test_calc.py::test_mul" in report["note"]
    assert "a ** b" in (tmp_path / "repo" / "calc.py").read_text()  # another backend's change: reported, left


@pytest.mark.slow  # a `clover fix` subprocess running the tests twice
def test_a_fix_that_keeps_the_tests_passing_is_reported_as_such(tmp_path):
    _repo(tmp_path)
    proc = _fix(tmp_path, _script(tmp_path, "    return a - b", "    return a + b"), "--yes")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)["test_guard"]
    assert report == {
        "checked": True,
        "note": "tests checked: none that passed before fails now (1 fixed)",
        "broken": [],
        "rolled_back": False,
    }


@pytest.mark.slow
def test_the_tests_run_only_where_the_permission_mode_runs_commands_unasked(tmp_path):
    _repo(tmp_path)
    proc = _fix(tmp_path, _script(tmp_path, "    return a * b", "    return a ** b"), "--mode", "auto-edit")
    report = json.loads(proc.stdout)["test_guard"]
    assert not report["checked"] and "permission mode" in report["note"]


def test_a_breaking_change_is_rolled_back_and_the_users_own_work_stays(tmp_path):
    repo = _repo(tmp_path)
    (repo / "notes.txt").write_text("mine\n")  # the user's uncommitted work, before the run
    (repo / "calc.py").write_text("# my comment\n" + CALC)
    env = LocalEnvironment(str(repo))
    guard = TestGuard(env, lambda command: True, roll_back=True)
    guard.start()
    before = gitdiff.worktree_tree(repo)
    (repo / "calc.py").write_text("# my comment\n" + CALC.replace("a * b", "a ** b"))  # the agent's edit
    patch = gitdiff.diff_trees(repo, before, gitdiff.worktree_tree(repo))
    report = guard.finish(repo, patch)
    assert report.rolled_back and report.broken == ["test_calc.py::test_mul"]
    assert (repo / "calc.py").read_text() == "# my comment\n" + CALC and (
        repo / "notes.txt"
    ).read_text() == "mine\n"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert sorted(status.splitlines()) == [" M calc.py", "?? notes.txt"]


def test_a_change_after_which_the_tests_no_longer_run_is_rolled_back(tmp_path):
    # a hang (or a crash of the test run) after the change is no pass: the tests ran before it
    repo = _repo(tmp_path)
    env = LocalEnvironment(str(repo))
    guard = TestGuard(env, lambda command: True, roll_back=True, timeout=8)
    guard.start()
    before = gitdiff.worktree_tree(repo)
    (repo / "calc.py").write_text(CALC.replace("    return a * b", "    while True:\n        pass"))
    report = guard.finish(repo, gitdiff.diff_trees(repo, before, gitdiff.worktree_tree(repo)))
    assert report.rolled_back and "no longer run (the tests took longer than 8 s)" in report.note
    assert report.broken == ["test_calc.py::test_mul"] and (repo / "calc.py").read_text() == CALC


def test_nothing_to_check_says_why(tmp_path):
    repo = git_repo(tmp_path / "repo", {"calc.py": CALC})
    guard = TestGuard(LocalEnvironment(str(repo)), lambda command: True)
    guard.start()
    assert guard.finish(repo, "diff --git a/x b/x\n").note == "tests not checked: no test files found"
