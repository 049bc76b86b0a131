"""When a Terminal-Bench verdict would rest on less than the whole test, there is none: the task is
"cannot judge here: <test>: <reason>", apart from passed and failed.

A task's reward says pass or fail; what it does not say is whether every test ran to its end here
as it would in the official image. The tests' own report (CTRF, /logs/verifier/ctrf.json, which the
Terminal-Bench 2 test scripts write) does:

- a test that skipped (or was left pending) beside a pass: no Terminal-Bench test skips by design,
  so a skip here is this machine's;
- failures that are all timeouts or network errors: this machine is slower or busier than the
  official one, or lacks its network (hosts it failed to resolve are named by needs-internet
  before this); a failure of any other kind decides "failed" whatever those would have done;
- the tests did not finish within their time limit, or a test script that writes that report
  wrote none (the tests never ran);
- the oracle's solution did not finish within its time (an agent's time is its own budget).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clover.evals.swebench.judge import NETWORK

CTRF = "ctrf.json"
# A failure that says time ran out (subprocess's, asyncio's, pytest-timeout's words), not a test of timeouts.
_TIMEOUT = re.compile(r"TimeoutExpired|TimeoutError|\btimed out\b|\bTimeout >\s*\d|\bTimeout:", re.IGNORECASE)
_UNFINISHED = ("skipped", "pending", "other")


@dataclass(frozen=True)
class TestOutcome:
    name: str
    status: str  # passed | failed | skipped | pending | other
    detail: str = ""  # the message and the error lines of its trace


def ctrf_outcomes(text: str | None) -> list[TestOutcome] | None:
    """The tests of a CTRF report (None: no report, or not one)."""
    if text is None:
        return None
    try:
        tests = json.loads(text)["results"]["tests"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    if not isinstance(tests, list):
        return None
    out = []
    for test in tests:
        if not isinstance(test, dict):
            continue
        trace = str(test.get("trace") or "")
        errors = [line[1:].strip() for line in trace.splitlines() if line.startswith("E ")]
        detail = " | ".join([*errors[-3:], str(test.get("message") or "")]).strip(" |")
        out.append(TestOutcome(str(test.get("name", "?")), str(test.get("status", "other")), detail))
    return out


def _machine_cause(detail: str) -> str:
    """Why a failure is this machine's (a timeout, a network error), or ''."""
    if match := NETWORK.search(detail):
        return f"needs the network: {_around(detail, match)}"
    if match := _TIMEOUT.search(detail):
        return f"ran out of time on this machine (slower or busier than the official one): {_around(detail, match)}"
    return ""


def _skip_reason(detail: str) -> str:
    return detail.removeprefix("Skipped: ")[:200] or "no reason given"


def _around(text: str, match: re.Match) -> str:
    start = max(0, match.start() - 60)
    return text[start : match.end() + 100].strip()


def cannot_judge(
    *,
    passed: bool,
    read: Callable[[str], str | None],
    writes_ctrf: bool,
    tests_timed_out: bool,
    test_timeout: float,
    solution_timed_out: bool = False,
    solution_timeout: float = 0.0,
) -> str:
    """Why this task's verdict cannot be given here ('' when it can). `read(name)` is the text of
    /logs/verifier/<name> (None when absent)."""
    if solution_timed_out:
        return f"cannot judge here: the solution did not finish within {solution_timeout:g} s on this machine"
    if tests_timed_out:
        return f"cannot judge here: the tests did not finish within {test_timeout:g} s on this machine"
    outcomes = ctrf_outcomes(read(CTRF))
    if outcomes is None:
        if writes_ctrf and not passed:
            return f"cannot judge here: the tests never ran (the test script wrote no {CTRF})"
        return ""
    unfinished = [t for t in outcomes if t.status in _UNFINISHED]
    failed = [t for t in outcomes if t.status == "failed"]
    causes = {t.name: _machine_cause(t.detail) for t in failed}
    if failed and not all(causes.values()):
        return ""  # a failure that is the work's: "failed" stands
    deciding = [(t.name, f"{t.status} here: {_skip_reason(t.detail)}") for t in unfinished]
    deciding = [(name, why) for name, why in causes.items() if why] + deciding
    if not deciding:
        return ""
    name, why = deciding[0]
    more = f" (and {len(deciding) - 1} more test(s))" if len(deciding) > 1 else ""
    return f"cannot judge here: {name}: {why}{more}"


def writes_ctrf(test_script: Path) -> bool:
    """Whether the task's test script asks pytest for a CTRF report."""
    try:
        return "--ctrf" in test_script.read_text(errors="replace")
    except OSError:
        return False


def summarize(results: list[Any]) -> dict[str, float | int]:
    """Counts by verdict. Only passed and failed are verdicts: the pass rate is over them, not over
    the tasks whose environment broke (error), that this machine cannot judge (a test could not
    run here to its end), that needed the internet, or that it cannot host (skipped). `results`:
    the runner's TaskResults."""
    judged = [r for r in results if r.status in ("passed", "failed")]
    passed = sum(r.passed for r in judged)
    return {
        "tasks": len(results),
        "judged": len(judged),
        "passed": passed,
        "failed": sum(r.status == "failed" for r in judged),
        "errors": sum(r.status == "error" for r in results),
        "cannot_judge": sum(r.status == "cannot-judge" for r in results),
        "needs_internet": sum(r.status == "needs-internet" for r in results),
        "skipped": sum(r.status == "skipped" for r in results),
        "pass_rate": passed / len(judged) if judged else 0.0,
        "seconds": round(sum(r.seconds for r in results), 3),
        "steps": sum(r.steps for r in results),
        "tokens": sum(r.tokens for r in results),
    }
