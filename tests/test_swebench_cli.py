"""`clover eval swebench run | grade | report` end to end on a fixture repository."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from clover.evals.swebench.cli import swebench_app
from clover.evals.swebench.report import collect
from tests.swebench_fixtures import fix_script, write_dataset

runner = CliRunner()


def test_run_grade_report(tmp_path):
    pytest.importorskip("swebench")
    dataset, _ = write_dataset(tmp_path, 1)
    script = tmp_path / "fix.json"
    script.write_text(json.dumps(fix_script()))
    out = tmp_path / "run"
    res = runner.invoke(swebench_app, ["run", "--dataset", str(dataset), "-o", str(out), "--model",
                                       f"scripted:{script}", "--step-limit", "5", "--offline", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "1 run, 0 already done, 0 errors" in res.output
    run = json.loads((out / "run.json").read_text())
    assert run["dataset"] == str(dataset) and run["limits"]["max_steps"] == 5
    assert run["model"] == f"scripted:{script}"

    res = runner.invoke(swebench_app, ["grade", "--predictions", str(out / "preds.json"), "--grader", "local",
                                       "--offline", "--no-progress"])  # dataset: the run's
    assert res.exit_code == 0, res.output
    assert "resolved 1/1 (UNOFFICIAL local grader)" in res.output
    assert (out / "grade_local" / "report.json").is_file()

    data = collect(out)
    assert data["totals"]["resolved"] == 1 and data["totals"]["resolved_rate"] == 1.0
    assert data["rows"][0]["steps"] == 2 and data["grader"] == "local"
    res = runner.invoke(swebench_app, ["report", str(out)])
    assert res.exit_code == 0, res.output
    assert "UNOFFICIAL" in res.output and "1/1 (100.0%)" in res.output and "fixture__calc-1" in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--dataset", "missing.jsonl", "-o", "x"], "error: dataset 'missing.jsonl': no such file"),
        (["run", "--dataset", "{ds}", "-o", "x", "--env", "podman"], "error: --env must be local or docker"),
        (["run", "--dataset", "{ds}", "-o", "x", "--slice", "a:b"], "error: --slice 'a:b'"),
        (["run", "--dataset", "{ds}", "-o", "x", "--instances", "nope"], "error: unknown instance id(s): nope"),
        (["grade", "--predictions", "gold", "--grader", "sb"], "error: --grader must be swebench or local"),
        (["grade", "--predictions", "nope.json", "--dataset", "{ds}"], "error: predictions 'nope.json': no such file"),
        (["grade", "--predictions", "calibrate", "--grader", "swebench", "--dataset", "{ds}"], "error: calibrate is for"),
        (["report", "{tmp}"], "error: "),
    ],
)
def test_bad_input_is_one_line(tmp_path, args, message):
    dataset, _ = write_dataset(tmp_path, 1)
    args = [a.format(ds=dataset, tmp=tmp_path) for a in args]
    res = runner.invoke(swebench_app, args)
    assert res.exit_code == 2, res.output
    assert res.output.startswith(message) and res.output.count("\n") == 1 and "Traceback" not in res.output


def test_docker_env_without_docker_is_one_line(tmp_path, monkeypatch):
    dataset, _ = write_dataset(tmp_path, 1)
    monkeypatch.setenv("PATH", "/nonexistent")
    res = runner.invoke(swebench_app, ["run", "--dataset", str(dataset), "-o", str(tmp_path / "o"), "--env", "docker"])
    assert res.exit_code == 2 and res.output.startswith("error: --env docker needs Docker")
    assert res.output.count("\n") == 1
