"""The local grader never claims a verdict that a test it could not run might change: an instance
whose deciding FAIL_TO_PASS or PASS_TO_PASS test needs the network or more CPUs than this machine
has is "cannot judge here: <test>: <reason>", apart from resolved and unresolved in the
per-instance report, the summary, `report` and the exit code; a failure among the tests that did
run still decides "unresolved"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("swebench")

from clover.evals.swebench.cli import swebench_app  # noqa: E402
from clover.evals.swebench.dataset import validate  # noqa: E402
from clover.evals.swebench.grade_local import GradeConfig, evaluate_log  # noqa: E402
from clover.evals.swebench.local_batch import grade_batch, summarize  # noqa: E402
from clover.evals.swebench.local_spec import default_spec  # noqa: E402
from clover.evals.swebench.report import collect  # noqa: E402
from tests.swebench_fixtures import make_instance  # noqa: E402

F2P = "t.py::fixed"
NET = "net.py::test_fetch"
CPU = "par.py::test_jobs"
NET_LINE = (
    f"FAILED {NET} - requests.exceptions.ConnectionError: HTTPSConnectionPool(host='httpbin.org', "
    "port=443): Max retries exceeded"
)
CPU_LINE = "SKIPPED [1] par.py:12: needs at least 64 CPUs (os.cpu_count() == 2)"


def _report(lines: list[str], f2p: list[str], p2p: list[str]) -> dict:
    inst = {"instance_id": "x", "repo": "local/x", "FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p, "test_patch": ""}
    log = ">>>>> Start Test Output\n" + "\n".join(lines) + "\n>>>>> End Test Output\n"
    return evaluate_log(log, inst, default_spec(inst, Path("/nonexistent")), "p")


def test_a_pass_to_pass_test_that_needs_the_network_decides_cannot_judge():
    report = _report([f"PASSED {F2P}", "PASSED t.py::kept", NET_LINE], [F2P], ["t.py::kept", NET])
    assert report["resolved"] is None and report["verdict"] == "cannot judge"
    assert report["cannot_judge"].startswith(
        f"cannot judge here: {NET}: needs the network: requests.exceptions"
    )
    assert report["cannot_judge_kind"] == "network"
    assert list(report["excluded_tests"]) == [NET] and "graded_on_subset" not in report


def test_a_test_skipped_for_too_few_cpus_decides_cannot_judge():
    report = _report([f"PASSED {F2P}", CPU_LINE], [F2P], [CPU])
    assert report["resolved"] is None and report["cannot_judge_kind"] == "cpu"
    assert report[
        "cannot_judge"
    ] == f"cannot judge here: {CPU}: too few CPUs here: needs at least 64 CPUs " + ("(os.cpu_count() == 2)")


def test_the_deciding_fail_to_pass_test_is_named_first_and_the_others_counted():
    report = _report([CPU_LINE, NET_LINE], [NET], [CPU])
    assert report["cannot_judge"].startswith(f"cannot judge here: {NET}: needs the network")
    assert report["cannot_judge"].endswith("(and 1 more test(s) that cannot run here)")


def test_a_failure_among_the_tests_that_ran_still_decides_unresolved():
    # No test that could not run can turn a failing one into a pass: the verdict stands.
    report = _report(
        [f"PASSED {F2P}", "FAILED t.py::broken - assert 1 == 2", NET_LINE], [F2P], ["t.py::broken", NET]
    )
    assert report["resolved"] is False and report["verdict"] == "unresolved"
    assert report["tests_status"]["PASS_TO_PASS"]["failure"] == ["t.py::broken"]
    assert list(report["excluded_tests"]) == [NET] and "cannot_judge" not in report


def test_a_judged_test_skipped_without_a_reason_is_not_a_pass():
    # swebench's rule counts a skipped test as neither passing nor failing; every judged test passed
    # in the official image, so a skip here leaves the verdict open.
    report = _report([f"PASSED {F2P}", "SKIPPED t.py::quiet"], [F2P], ["t.py::quiet"])
    assert report["resolved"] is None
    assert report["cannot_judge"] == "cannot judge here: t.py::quiet: skipped here: the log gives no reason"


def test_tests_that_ran_out_of_time_here_are_not_judged():
    inst = {
        "instance_id": "x",
        "repo": "local/x",
        "FAIL_TO_PASS": [F2P],
        "PASS_TO_PASS": [],
        "test_patch": "",
    }
    log = ">>>>> Start Test Output\nPASSED t.py::fixed\n>>>>> Tests Timed Out\n"
    report = evaluate_log(log, inst, default_spec(inst, Path("/nonexistent")), "p")
    assert report["resolved"] is None and report["cannot_judge_kind"] == "timeout"
    assert report["patch_successfully_applied"] is True


def test_the_summary_counts_resolved_only_over_instances_judged_in_full():
    reports = {
        "a": {"resolved": True, "verdict": "resolved"},
        "b": {"resolved": False, "verdict": "unresolved"},
        "c": {"resolved": None, "verdict": "cannot judge", "cannot_judge": "cannot judge here: t: x"},
        "d": {"resolved": False, "error": "InstallError: x", "error_kind": "install"},
    }
    summary = summarize(reports, 4, "model")
    assert (summary["resolved_ids"], summary["unresolved_ids"], summary["cannot_judge_ids"]) == (
        ["a"],
        ["b"],
        ["c"],
    )
    assert summary["judged_instances"] == 2 and summary["error_ids"] == ["d"]


ENV_TESTS = """import os
import socket

import pytest


def test_fetch():
    socket.create_connection(("clover-grader-test.invalid", 80), timeout=5)


def test_jobs():
    if (os.cpu_count() or 1) < 4096:
        pytest.skip(f"needs at least 4096 CPUs (os.cpu_count() == {os.cpu_count()})")
"""


def _env_instance(root: Path) -> dict:
    """The fixture instance plus a test file whose tests need the network or 4096 CPUs, listed as
    PASS_TO_PASS (they passed in the official image, as such tests do)."""
    row = make_instance(root)
    added = "".join(f"+{line}\n" for line in ENV_TESTS.splitlines())
    row["test_patch"] += (
        "diff --git a/tests/test_env.py b/tests/test_env.py\nnew file mode 100644\n"
        f"--- /dev/null\n+++ b/tests/test_env.py\n@@ -0,0 +1,{len(ENV_TESTS.splitlines())} @@\n{added}"
    )
    p2p = [*json.loads(row["PASS_TO_PASS"]), "tests/test_env.py::test_fetch", "tests/test_env.py::test_jobs"]
    row["PASS_TO_PASS"] = json.dumps(p2p)
    return row


def test_a_real_run_whose_deciding_tests_need_the_network_and_more_cpus(tmp_path):
    row = _env_instance(tmp_path)
    inst = validate(row, "fixture")
    wrong = inst["patch"].replace("+    return a + b", "+    return a + b + 1")
    preds = {inst["instance_id"]: {"model_patch": inst["patch"]}}
    config = GradeConfig(output_dir=tmp_path / "g", online=False, test_network=False)
    summary = grade_batch([inst], preds, config, progress=False)
    report = json.loads((tmp_path / "g" / inst["instance_id"] / "report.json").read_text())[
        inst["instance_id"]
    ]
    assert report["resolved"] is None and report["verdict"] == "cannot judge", report
    assert report["cannot_judge"].startswith(
        "cannot judge here: tests/test_env.py::test_fetch: needs the network"
    )
    assert report["excluded_tests"]["tests/test_env.py::test_jobs"].startswith(
        "too few CPUs here: needs at least 4096"
    )
    assert summary["cannot_judge_ids"] == [inst["instance_id"]] and summary["resolved_instances"] == 0
    assert summary["judged_instances"] == 0 and list(summary["cannot_judge"]) == [inst["instance_id"]]

    # The same instance under a patch that breaks a test that did run: unresolved, judged.
    config2 = GradeConfig(output_dir=tmp_path / "g2", online=False, test_network=False)
    summary2 = grade_batch([inst], {inst["instance_id"]: {"model_patch": wrong}}, config2, progress=False)
    assert summary2["unresolved_ids"] == [inst["instance_id"]] and summary2["judged_instances"] == 1


def test_the_cli_exit_code_and_report_keep_cannot_judge_apart(tmp_path):
    dataset = tmp_path / "dataset.jsonl"
    rows = [_env_instance(tmp_path / "a"), make_instance(tmp_path / "b", "fixture__calc-2")]
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["grade", "--predictions", "gold", "--dataset", str(dataset), "--offline", "--no-progress"]
    res = CliRunner().invoke(swebench_app, [*args, "--no-test-network", "-o", str(tmp_path / "g")])
    assert res.exit_code == 3, res.output
    assert (
        "resolved 1/1 judged in full (UNOFFICIAL local grader); cannot judge here 1; errors 0" in res.output
    )
    assert (
        "fixture__calc-1: cannot judge here: tests/test_env.py::test_fetch: needs the network" in res.output
    )
    data = collect(tmp_path / "g")
    verdicts = {row["instance_id"]: row["verdict"] for row in data["rows"]}
    assert verdicts == {"fixture__calc-1": "cannot judge", "fixture__calc-2": "resolved"}
    assert (data["totals"]["graded"], data["totals"]["resolved"], data["totals"]["cannot_judge"]) == (1, 1, 1)
    shown = CliRunner().invoke(swebench_app, ["report", str(tmp_path / "g")])
    assert "resolved 1/1 (100.0%) (1 cannot judge here, not counted)" in shown.output

    # Only the judgeable instance: every instance judged in full, exit 0.
    res = CliRunner().invoke(
        swebench_app, [*args, "--instances", "fixture__calc-2", "-o", str(tmp_path / "h")]
    )
    assert res.exit_code == 0, res.output


def test_verdicts_beside_an_official_run_count_cannot_judge_apart_and_a_wrong_one_fails(tmp_path):
    dataset = tmp_path / "dataset.jsonl"
    rows = [_env_instance(tmp_path / "a"), make_instance(tmp_path / "b", "fixture__calc-2")]
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    official = tmp_path / "results.json"
    official.write_text(json.dumps({"resolved": ["fixture__calc-1", "fixture__calc-2"]}))
    args = ["grade", "--predictions", "gold", "--dataset", str(dataset), "--offline", "--no-progress"]
    args += ["--no-test-network", "--official", str(official)]
    res = CliRunner().invoke(swebench_app, [*args, "-o", str(tmp_path / "g")])
    assert res.exit_code == 3, res.output  # nothing wrong; one instance cannot be judged here
    report = json.loads((tmp_path / "g" / "report.json").read_text())
    assert report["agreement"]["fixture__calc-1"]["kind"] == "network"
    assert report["agreement"]["fixture__calc-2"] == {
        "official": "resolved",
        "local": "resolved",
        "kind": "agree",
        "why": "",
    }
    assert "| all | 2 | 1 (50%) | 1 | 0 |" in res.output

    official.write_text(json.dumps({"resolved_ids": []}))  # as if the official harness said unresolved
    res = CliRunner().invoke(swebench_app, [*args, "-o", str(tmp_path / "h")])
    assert res.exit_code == 1 and "wrong: fixture__calc-2: official unresolved, local resolved" in res.output
