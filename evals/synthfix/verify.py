"""Check an instance the way a grader would: in a fresh clone, apply `test_patch` and run pytest (the
FAIL_TO_PASS tests must fail, PASS_TO_PASS pass), then apply the gold `patch` (everything passes)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

_RESULT = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", re.MULTILINE)


def run_pytest(repo: Path, timeout: float = 120) -> dict[str, str]:
    """Run the repo's whole test suite; returns {test id: PASSED/FAILED/ERROR/...}."""
    env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONHASHSEED": "0",
    }
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--color=no"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    results: dict[str, str] = {}
    for status, test_id in _RESULT.findall(proc.stdout):
        results.setdefault(test_id, status)
    return results


def _git(repo: Path, *args: str, stdin: str | None = None) -> None:
    proc = subprocess.run(
        ["git", *args], cwd=repo, input=stdin, capture_output=True, text=True, check=False,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"git {args[0]} failed: {proc.stderr.strip()}")


@dataclass
class Verdict:
    instance_id: str
    before: dict[str, str] = field(default_factory=dict)  # with test_patch, without the fix
    after: dict[str, str] = field(default_factory=dict)  # with test_patch and gold patch
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_instance(row: dict, timeout: float = 120) -> Verdict:
    verdict = Verdict(row["instance_id"])
    f2p, p2p = json.loads(row["FAIL_TO_PASS"]), json.loads(row["PASS_TO_PASS"])
    with tempfile.TemporaryDirectory(prefix="synthfix-verify-") as tmp:
        work = Path(tmp) / "repo"
        _git(Path(tmp), "clone", "-q", "--no-checkout", row["repo"], str(work))
        _git(work, "checkout", "-q", row["base_commit"])
        _git(work, "apply", "-", stdin=row["test_patch"])
        verdict.before = run_pytest(work, timeout)
        _git(work, "apply", "-", stdin=row["patch"])
        verdict.after = run_pytest(work, timeout)
    for test in f2p:
        if verdict.before.get(test) not in ("FAILED", "ERROR"):
            verdict.problems.append(f"{test} should fail before the fix, got {verdict.before.get(test)}")
        if verdict.after.get(test) != "PASSED":
            verdict.problems.append(f"{test} should pass after the fix, got {verdict.after.get(test)}")
    for test in p2p:
        for when, results in (("before", verdict.before), ("after", verdict.after)):
            if results.get(test) != "PASSED":
                verdict.problems.append(f"{test} should pass {when} the fix, got {results.get(test)}")
    if not f2p:
        verdict.problems.append("no FAIL_TO_PASS tests")
    return verdict
