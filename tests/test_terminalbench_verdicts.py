"""A Terminal-Bench verdict never rests on less than the whole test: a skipped test beside a pass,
tests or a solution that ran out of time here, failures that are all timeouts or network errors,
and tests that never ran are "cannot judge here: <test>: <reason>", counted apart from passed and
failed; a failure of the work itself still decides "failed". The runs are real tasks on the host
image (tasks written to tmp_path); the CTRF reports are written by the tasks' own test scripts, in
the layout pytest-json-ctrf writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clover.evals.terminalbench.cli import run_exit_code, terminalbench_app
from clover.evals.terminalbench.container import container_problem
from clover.evals.terminalbench.launch import Launch
from clover.evals.terminalbench.local_runner import run_tasks
from clover.evals.terminalbench.tasks import find_tasks
from clover.evals.terminalbench.verdicts import cannot_judge, summarize
from clover.settings import Settings

SETTINGS = Settings(mode="yolo", checkpoints=False, live=False, command_timeout=30)
needs_container = pytest.mark.skipif(
    container_problem() is not None, reason=f"no local container: {container_problem()}"
)


def ctrf(*tests: tuple[str, str, str]) -> str:
    """A CTRF report as pytest-json-ctrf writes it: (name, status, trace) per test."""
    rows = [
        {"name": f"test_outputs.py::{name}", "status": status, "trace": trace, "message": ""}
        for name, status, trace in tests
    ]
    return json.dumps({"results": {"tool": {"name": "pytest"}, "summary": {}, "tests": rows}})


def _judge(report: str | None, passed: bool, **kw) -> str:
    return cannot_judge(
        passed=passed,
        read=lambda name: report if name == "ctrf.json" else None,
        writes_ctrf=True,
        tests_timed_out=kw.get("tests_timed_out", False),
        test_timeout=60,
        solution_timed_out=kw.get("solution_timed_out", False),
        solution_timeout=120,
    )


def test_a_skipped_test_beside_a_pass_leaves_the_verdict_open():
    report = ctrf(("test_a", "passed", ""), ("test_jobs", "skipped", "E   Skipped: needs 64 CPUs"))
    assert (
        _judge(report, True) == "cannot judge here: test_outputs.py::test_jobs: skipped here: needs 64 CPUs"
    )
    assert _judge(ctrf(("test_a", "passed", "")), True) == ""


def test_failures_that_are_all_timeouts_or_network_errors_are_not_judged():
    slow = "E   subprocess.TimeoutExpired: Command '['python', 'test.py']' timed out after 60 seconds"
    net = "E   urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>"
    why = _judge(ctrf(("test_slow", "failed", slow), ("test_fetch", "failed", net)), False)
    assert why.startswith("cannot judge here: test_outputs.py::test_slow: ran out of time on this machine")
    assert why.endswith("(and 1 more test(s))")
    assert "needs the network" in _judge(ctrf(("test_fetch", "failed", net)), False)


def test_a_failure_of_the_work_decides_failed_whatever_the_others_would_do():
    slow = "E   subprocess.TimeoutExpired: Command 'x' timed out after 60 seconds"
    wrong = "E   AssertionError: assert 3 == 4"
    assert _judge(ctrf(("test_slow", "failed", slow), ("test_sum", "failed", wrong)), False) == ""
    # a test about timeouts that fails an assert is the work's failure too
    assert _judge(ctrf(("test_timeout_handling", "failed", "E   assert handle_timeout() == 3")), False) == ""


def test_tests_that_never_ran_or_did_not_finish_are_not_judged():
    assert _judge(None, False).startswith("cannot judge here: the tests never ran")
    assert _judge(None, True) == ""  # a pass without the report: the reward is the verdict
    assert "did not finish within 60 s" in _judge(ctrf(("test_a", "passed", "")), True, tests_timed_out=True)
    assert "the solution did not finish within 120 s" in _judge(None, False, solution_timed_out=True)


def _task(root: Path, name: str, test_sh: str, solve_sh: str = "true", verifier_timeout: float = 30) -> None:
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    (task / "instruction.md").write_text("Nothing to do.\n")
    (task / "task.toml").write_text(
        f'schema_version = "1.4"\n[verifier]\ntimeout_sec = {verifier_timeout}\n[agent]\ntimeout_sec = 5.0\n'
        '[environment]\nbuild_timeout_sec = 60.0\nnetwork_mode = "none"\n'
    )
    (task / "tests" / "test.sh").write_text("#!/bin/bash\n" + test_sh)
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\n" + solve_sh + "\n")


def _write_ctrf(report: str) -> str:
    """Shell lines that write `report` where the tests' CTRF report goes (as `pytest --ctrf` does)."""
    return f"cat > /logs/verifier/ctrf.json <<'EOF'\n{report}\nEOF\n"


PASS = "echo 1 > /logs/verifier/reward.txt\n"
FAIL = "echo 0 > /logs/verifier/reward.txt\n"


@needs_container
def test_real_runs_keep_what_was_not_judged_apart(tmp_path):
    tasks = tmp_path / "tasks"
    cpu = ctrf(("test_a", "passed", ""), ("test_jobs", "skipped", "E   Skipped: needs 64 CPUs"))
    _task(tasks, "skipped-test", "# pytest --ctrf /logs/verifier/ctrf.json\n" + _write_ctrf(cpu) + PASS)
    _task(tasks, "slow-tests", "sleep 30\n" + PASS, verifier_timeout=1)
    _task(tasks, "slow-solution", PASS, solve_sh="sleep 30")
    _task(
        tasks, "never-ran", "apt-get install -y no-such-package >/dev/null 2>&1 && pytest --ctrf x\n" + FAIL
    )
    wrong = ctrf(("test_sum", "failed", "E   AssertionError: assert 3 == 4"))
    _task(tasks, "real-failure", "# pytest --ctrf\n" + _write_ctrf(wrong) + FAIL)
    _task(tasks, "plain-pass", PASS)
    results = {
        r.id: r
        for r in run_tasks(
            find_tasks(tasks),
            settings=SETTINGS,
            model_factory=None,
            out_dir=tmp_path / "out",
            workers=2,
            launch=Launch(image="host"),
        )
    }
    verdicts = {task: (r.status, r.reason) for task, r in results.items()}
    assert verdicts["skipped-test"] == (
        "cannot-judge",
        "cannot judge here: test_outputs.py::test_jobs: skipped here: needs 64 CPUs",
    )
    assert verdicts["slow-tests"] == (
        "cannot-judge",
        "cannot judge here: the tests did not finish within 1 s on this machine",
    )
    assert (
        verdicts["slow-solution"][1]
        == "cannot judge here: the solution did not finish within 5 s on this machine"
    )
    assert verdicts["never-ran"][1].startswith("cannot judge here: the tests never ran")
    assert verdicts["real-failure"][0] == "failed" and verdicts["plain-pass"] == ("passed", "")
    summary = summarize(list(results.values()))
    assert (summary["judged"], summary["passed"], summary["cannot_judge"]) == (2, 1, 4)
    assert summary["pass_rate"] == 0.5 and run_exit_code(summary) == 3
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["summary"]["cannot_judge"] == 4


@needs_container
def test_a_run_in_which_nothing_was_judged_exits_non_zero(tmp_path):
    tasks = tmp_path / "tasks"
    _task(tasks, "from-a-url", PASS)
    (tasks / "from-a-url" / "environment" / "Dockerfile").write_text(
        "FROM ubuntu:24.04\nADD https://example.invalid/x.tar /x.tar\n"
    )
    res = CliRunner().invoke(
        terminalbench_app, ["--tasks", str(tasks), "--oracle", "--image", "host", "-o", str(tmp_path / "o")]
    )
    assert res.exit_code == 1, res.output
    assert "passed 0/0 judged" in res.output and "skipped 1" in res.output


def test_exit_codes_say_what_the_figure_covers():
    base = {"tasks": 3, "judged": 3, "errors": 0}
    assert run_exit_code(base) == 0
    assert run_exit_code({**base, "judged": 2}) == 3
    assert run_exit_code({**base, "judged": 2, "errors": 1}) == 1
    assert run_exit_code({**base, "judged": 0}) == 1
