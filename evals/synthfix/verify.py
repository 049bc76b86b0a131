"""Check an instance the way a grader would: in a fresh clone, apply `test_patch` and run pytest (the
FAIL_TO_PASS tests must fail, PASS_TO_PASS pass), then apply the gold `patch` (everything passes).
The clone, git and pytest are the grader core's (evals/grading.py); the patches must apply as they are."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from clover.evals.grading import fresh_clone, git, run_pytest

__all__ = ["Verdict", "run_pytest", "verify_instance"]


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
        work = fresh_clone(row["repo"], row["base_commit"], Path(tmp) / "repo")
        git(work, "apply", "-", stdin=row["test_patch"])
        verdict.before = run_pytest(work, timeout)
        git(work, "apply", "-", stdin=row["patch"])
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
