"""A repository's pytest tests, run through its Environment: each test's outcome, by node id.

The runner is a short standard-library script run as `python3 -c SCRIPT SPEC` in the repository's
own interpreter and sandbox (Environment.run, as every command), with pytest imported there. It
writes no bytecode and no pytest cache; pytest's own output is discarded, and one JSON line comes
back: {"outcomes": {node id: "passed" | "failed" | "skipped"}} or {"error": why it could not run}.
A collection error counts as a failed node (`path` or `<collection>`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")
SKIP_DIRS = frozenset({"node_modules", ".venv", "venv", "site-packages", ".tox", "build", "dist"})

SCRIPT = r"""
import json, os, sys
spec = json.loads(sys.argv[1])
sys.dont_write_bytecode = True
try:
    import pytest
except ImportError:
    print(json.dumps({"error": "pytest is not installed for " + sys.executable}))
    sys.exit(0)
outcomes = {}

class Collect:
    def pytest_runtest_logreport(self, report):
        before = outcomes.get(report.nodeid)
        if report.failed:
            outcomes[report.nodeid] = "failed"
        elif report.skipped and before is None:
            outcomes[report.nodeid] = "skipped"
        elif report.when == "call" and report.passed and before != "failed":
            outcomes[report.nodeid] = "passed"

    def pytest_collectreport(self, report):
        if report.failed:
            outcomes[report.nodeid or "<collection>"] = "failed"

real_stdout = os.dup(1)
devnull = os.open(os.devnull, os.O_WRONLY)
os.dup2(devnull, 1)
os.dup2(devnull, 2)
try:
    code = pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", spec["root"], *spec["files"]], plugins=[Collect()])
finally:
    os.dup2(real_stdout, 1)
if int(code) not in (0, 1, 5):
    print(json.dumps({"error": "pytest exited with status %d" % int(code)}))
else:
    print(json.dumps({"outcomes": outcomes}))
"""


@dataclass
class TestRun:
    """The outcome of every test (`outcomes`), or `error`: why the tests could not be run."""

    __test__ = False  # not a pytest test class
    outcomes: dict[str, str] = field(default_factory=dict)
    error: str = ""
    discarded: tuple[str, ...] = ()  # what the run changed in the workspace, thrown away

    @property
    def ok(self) -> bool:
        return not self.error


def test_files(files: Iterable[str]) -> list[str]:
    """The repository's pytest files (`test_*.py`, `*_test.py`), vendored trees left out."""
    return sorted(f for f in files if TEST_FILE.search(f) and not set(f.split("/")[:-1]) & SKIP_DIRS)


test_files.__test__ = False  # type: ignore[attr-defined]


def argv(python: str, root: str, files: list[str]) -> list[str]:
    return [python, "-c", SCRIPT, json.dumps({"root": root, "files": files})]


def run_tests(env: Any, files: list[str], timeout: float, python: str = "python3") -> TestRun:
    """Run `files` (paths relative to env.root) with pytest in `env`; never raises."""
    result = env.run(argv(python, str(env.root), files), timeout=timeout)
    if result.timed_out:
        return TestRun(error=f"the tests took longer than {timeout:.0f} s")
    if result.returncode == 127:
        return TestRun(error=f"{python} is not installed")
    out = result.stdout.decode("utf-8", "replace") if isinstance(result.stdout, bytes) else str(result.stdout)
    try:
        answer = json.loads(out.strip().rsplit("\n", 1)[-1])
    except (ValueError, IndexError):
        return TestRun(error=f"the test runner gave no answer (exit status {result.returncode})")
    if not isinstance(answer, dict) or not isinstance(answer.get("outcomes", {}), dict):
        return TestRun(error="the test runner gave no answer", discarded=result.discarded)
    return TestRun(
        outcomes=dict(answer.get("outcomes") or {}),
        error=str(answer.get("error") or ""),
        discarded=result.discarded,
    )


__all__ = ["TEST_FILE", "TestRun", "argv", "run_tests", "test_files"]
