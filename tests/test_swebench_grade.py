"""Graders: the local (UNOFFICIAL) one on real repositories, and the official harness's command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("swebench")

from clover.evals.swebench.conda_env import conda_to_pip  # noqa: E402
from clover.evals.swebench.dataset import load_instances, validate  # noqa: E402
from clover.evals.swebench.grade_local import GradeConfig, apply_patch, evaluate_log, grade_instance  # noqa: E402
from clover.evals.swebench.grade_official import OfficialGraderError, official_command, run_official  # noqa: E402
from clover.evals.swebench.local_batch import grade_batch  # noqa: E402
from clover.evals.swebench.local_setup import Shell  # noqa: E402
from clover.evals.swebench.local_spec import SpecError, default_spec, find_python, resolve_spec  # noqa: E402
from clover.evals.swebench.workspace import RepoCache, make_workspace  # noqa: E402
from tests.swebench_fixtures import make_instance, write_dataset  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "swebench-verified.jsonl"


def test_calibration_gold_resolves_and_empty_does_not(tmp_path):
    path, _ = write_dataset(tmp_path, 1)
    insts = load_instances(str(path))
    out = tmp_path / "calib"
    report = grade_batch(insts, None, GradeConfig(output_dir=out, online=False), progress=False)
    assert report["judgeable_ids"] == ["fixture__calc-1"]
    assert report["calibration"]["fixture__calc-1"] == {
        "gold_resolved": True,
        "empty_resolved": False,
        "judgeable": True,
        "why_not": "",
        "why_kind": "",
    }
    assert report["empty"]["resolved_ids"] == [] and report["empty"]["empty_patch_ids"] == ["fixture__calc-1"]
    empty = json.loads((out / "fixture__calc-1" / "report.empty.json").read_text())["fixture__calc-1"]
    assert empty["tests_status"]["FAIL_TO_PASS"]["failure"] == ["tests/test_core.py::test_combine_adds"]
    assert empty["tests_status"]["PASS_TO_PASS"]["success"] == ["tests/test_core.py::test_double"]
    assert json.loads((out / "report.json").read_text())["note"].startswith("UNOFFICIAL")


def test_a_patch_that_does_not_apply_and_a_wrong_fix(tmp_path):
    inst = validate(make_instance(tmp_path), "fixture")
    config = GradeConfig(output_dir=tmp_path / "g", online=False)
    bogus = inst["patch"].replace("-    return a - b", "-    return a * b")
    wrong = inst["patch"].replace("+    return a + b", "+    return a + b + 1")
    res = grade_instance(inst, {"bogus": bogus, "wrong": wrong}, config)
    assert res["bogus"]["patch_successfully_applied"] is False and res["bogus"]["resolved"] is False
    assert (
        "Patch Apply Failed" in (tmp_path / "g" / inst["instance_id"] / "test_output.bogus.txt").read_text()
    )
    assert res["wrong"]["patch_successfully_applied"] is True and res["wrong"]["resolved"] is False
    assert res["wrong"]["tests_status"]["PASS_TO_PASS"]["success"] == ["tests/test_core.py::test_double"]


def test_relative_output_dir_grades_in_the_workspace_venv(tmp_path, monkeypatch):
    # `-o runs/grade` used to leave the venv's bin and the patch file relative to the caller's cwd
    # while commands ran in the work tree: every patch "failed to apply" and pip installed the
    # graded repository into the caller's own environment.
    inst = validate(make_instance(tmp_path), "fixture")
    monkeypatch.chdir(tmp_path)
    res = grade_instance(inst, {"gold": inst["patch"]}, GradeConfig(output_dir=Path("g"), online=False))
    assert res["gold"]["patch_successfully_applied"] is True and res["gold"]["resolved"] is True


def test_apply_chain_falls_back_to_fuzzy_patch(tmp_path):
    inst = validate(make_instance(tmp_path), "fixture")
    ws = make_workspace(inst, tmp_path / "ws", RepoCache(online=False))
    # Context lines no longer match exactly: git apply refuses, patch --fuzz applies.
    drifted = inst["patch"].replace('     """Return the sum of a and b."""', '     """Return the total."""')
    log = tmp_path / "log.txt"
    sh = Shell(ws, Path(sys.prefix), log)
    assert apply_patch(sh, ws, drifted)
    assert "return a + b" in (ws / "calc" / "core.py").read_text()
    assert "git apply --verbose" in log.read_text() and "patch --batch --fuzz=5" in log.read_text()
    sh2 = Shell(ws, Path(sys.prefix), log)
    assert not apply_patch(
        sh2, ws, "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n"
    )


def test_evaluate_log_uses_swebench_parser_and_rule():
    inst = {
        "instance_id": "x",
        "repo": "local/x",
        "FAIL_TO_PASS": ["t.py::a"],
        "PASS_TO_PASS": ["t.py::b", "t.py::c"],
    }
    spec = default_spec({**inst, "test_patch": ""}, Path("/nonexistent"))
    log = ">>>>> Start Test Output\nPASSED t.py::a\nPASSED t.py::b\nPASSED t.py::c\n>>>>> End Test Output\n"
    assert evaluate_log(log, inst, spec, "p")["resolved"] is True
    # swebench's rule counts a skipped test as neither passing nor failing: here it leaves the
    # verdict open (test_swebench_verdicts.py has the cases)
    skipped = log.replace("PASSED t.py::c", "SKIPPED t.py::c")
    assert evaluate_log(skipped, inst, spec, "p")["verdict"] == "cannot judge"
    failing = log.replace("PASSED t.py::b", "FAILED t.py::b - boom")
    assert evaluate_log(failing, inst, spec, "p")["resolved"] is False
    missing_marker = log.replace(">>>>> End Test Output", "")
    assert evaluate_log(missing_marker, inst, spec, "p")["patch_successfully_applied"] is False


@pytest.mark.skipif(not SHARED.is_file(), reason="shared SWE-bench Verified file absent")
def test_official_spec_for_a_verified_row(tmp_path):
    rows = [json.loads(line) for line in SHARED.read_text().splitlines() if '"psf__requests-2317"' in line]
    inst = validate(rows[0], "shared")
    spec = resolve_spec(inst, tmp_path)  # requests' packages are a plain list: no mirror needed
    assert (
        spec.official
        and spec.python == "3.9"
        and spec.base_packages == ["pytest"]
        and spec.requirements == []
    )
    assert spec.test_cmd == "pytest -rA test_requests.py" and spec.install == "python -m pip install ."
    assert spec.parser.__name__ == "parse_log_pytest_options"


def test_default_spec_and_helpers(tmp_path):
    inst = validate(make_instance(tmp_path), "fixture")
    spec = resolve_spec(inst, Path(inst["repo"]))
    assert not spec.official and spec.python is None and spec.install is None  # no setup.py / pyproject
    assert spec.test_cmd.endswith("tests/test_core.py") and spec.parser.__name__ == "parse_log_pytest"
    (Path(inst["repo"]) / "pyproject.toml").write_text("[project]\nname='calc'\n")
    assert resolve_spec(inst, Path(inst["repo"])).install == "python -m pip install -e ."
    assert conda_to_pip("numpy=1.19") == "numpy==1.19.*" and conda_to_pip("scipy==1.5.2") == "scipy==1.5.2"
    assert conda_to_pip("'pandas<2.0.0'".strip("'")) == "pandas<2.0.0"
    assert find_python(None) == sys.executable
    with pytest.raises(SpecError, match="no Python 9.99"):
        find_python("9.99")


def test_default_spec_runs_the_files_of_every_judged_test(tmp_path):
    # SynthFix lists PASS_TO_PASS tests from the whole suite; running only the test patch's files
    # reported them as failed, so even the gold patch of a SynthFix instance "did not resolve".
    (tmp_path / "tests").mkdir()
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / "tests" / name).write_text("def test_x():\n    pass\n")
    patch = "diff --git a/tests/test_a.py b/tests/test_a.py\n--- a/tests/test_a.py\n+++ b/tests/test_a.py\n"
    inst = {
        "test_patch": patch,
        "FAIL_TO_PASS": ["tests/test_a.py::test_new"],
        "PASS_TO_PASS": ["tests/test_a.py::test_x", "tests/test_b.py::test_x", "gone.py::t", "test_y (m.C)"],
    }
    cmd = default_spec(inst, tmp_path).test_cmd
    assert cmd.endswith(" tests/test_a.py tests/test_b.py")


def test_official_command_line():
    cmd = official_command(
        dataset="verified",
        predictions_path="gold",
        run_id="r1",
        max_workers=8,
        instance_ids=["psf__requests-1142"],
        modal=True,
    )
    assert cmd == [
        sys.executable,
        "-m",
        "swebench.harness.run_evaluation",
        "--dataset_name",
        "princeton-nlp/SWE-bench_Verified",
        "--split",
        "test",
        "--predictions_path",
        "gold",
        "--max_workers",
        "8",
        "--run_id",
        "r1",
        "--instance_ids",
        "psf__requests-1142",
        "--modal",
        "true",
    ]
    cmd = official_command(dataset="lite", predictions_path="out/preds.json", run_id="r2", timeout=900)
    assert cmd[cmd.index("--predictions_path") + 1] == str(Path("out/preds.json").resolve())
    assert cmd[-2:] == ["--timeout", "900"] and "--modal" not in cmd
    with pytest.raises(OfficialGraderError, match="run id"):
        official_command(dataset="verified", predictions_path="gold", run_id="bad id")


@pytest.mark.slow
def test_the_harness_knows_every_flag_we_build():
    cmd = official_command(
        dataset="verified", predictions_path="gold", run_id="r", instance_ids=["a"], modal=True, timeout=10
    )
    harness = subprocess.run([*cmd[:3], "--help"], capture_output=True, text=True, timeout=300)
    for flag in (
        "--dataset_name",
        "--predictions_path",
        "--max_workers",
        "--run_id",
        "--instance_ids",
        "--timeout",
        "--modal",
        "--split",
    ):
        assert flag in harness.stdout


def test_official_grader_without_docker_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(OfficialGraderError) as info:
        run_official(["true"], tmp_path, modal=False)
    assert "\n" not in str(info.value) and "--grader local" in str(info.value)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("CLOVER_TEST_PYPI") != "1", reason="needs PyPI: set CLOVER_TEST_PYPI=1")
def test_official_spec_path_with_python39_venv(tmp_path):
    """psf/requests 2.0's official spec (Python 3.9 venv, pip pins, `pip install .`, pytest -rA,
    requests' own log parser) on a fixture repository mapped in with --repo-map."""
    try:
        find_python("3.9")
    except SpecError:
        pytest.skip("no Python 3.9 here")
    row = make_instance(tmp_path)
    repo = Path(row["repo"])
    (repo / "setup.py").write_text(
        "from setuptools import setup\nsetup(name='calc', version='0.1', packages=['calc'])\n"
    )
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "setup.py"], cwd=repo, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    inst = validate(
        {
            **row,
            "base_commit": head,
            "repo": "psf/requests",
            "version": "2.0",
            "instance_id": "psf__requests-0",
        },
        "fixture",
    )
    config = GradeConfig(output_dir=tmp_path / "g", repo_map={"psf/requests": str(repo)})
    report = grade_batch([inst], None, config, progress=False)
    assert report["judgeable_ids"] == ["psf__requests-0"], report["calibration"]
    assert "Python 3.9" in (tmp_path / "g" / "psf__requests-0" / "test_output.gold.txt").read_text()
