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
    res = runner.invoke(
        swebench_app,
        [
            "run",
            "--dataset",
            str(dataset),
            "-o",
            str(out),
            "--model",
            f"scripted:{script}",
            "--max-steps",
            "5",
            "--offline",
            "--no-progress",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "1 run, 0 already done, 0 errors" in res.output
    run = json.loads((out / "run.json").read_text())
    assert run["dataset"] == str(dataset) and run["limits"]["max_steps"] == 5
    assert run["model"] == f"scripted:{script}"

    res = runner.invoke(
        swebench_app,
        [
            "grade",
            "--predictions",
            str(out / "preds.json"),
            "--grader",
            "local",
            "--offline",
            "--no-progress",
        ],
    )  # dataset: the run's
    assert res.exit_code == 0, res.output
    assert (
        "resolved 1/1 judged in full (UNOFFICIAL local grader); cannot judge here 0; errors 0" in res.output
    )
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
        (["run", "--dataset", "missing.jsonl", "-o", "x"], "clover: dataset 'missing.jsonl': no such file"),
        (["run", "--dataset", "{ds}", "-o", "x", "--env", "podman"], "clover: --env must be local or docker"),
        (["run", "--dataset", "{ds}", "-o", "x", "--slice", "a:b"], "clover: --slice 'a:b'"),
        (
            ["run", "--dataset", "{ds}", "-o", "x", "--instances", "nope"],
            "clover: unknown instance id(s): nope",
        ),
        (["grade", "--predictions", "gold", "--grader", "sb"], "clover: --grader must be swebench or local"),
        (
            ["grade", "--predictions", "nope.json", "--dataset", "{ds}"],
            "clover: predictions 'nope.json': no such file",
        ),
        (
            ["grade", "--predictions", "calibrate", "--grader", "swebench", "--dataset", "{ds}"],
            "clover: calibrate is for",
        ),
        (["report", "{tmp}"], "clover: "),
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
    res = runner.invoke(
        swebench_app, ["run", "--dataset", str(dataset), "-o", str(tmp_path / "o"), "--env", "docker"]
    )
    assert res.exit_code == 2 and res.output.startswith("clover: --env docker needs Docker")
    assert res.output.count("\n") == 1


def test_grade_exits_nonzero_and_warns_when_instances_error(tmp_path):
    pytest.importorskip("swebench")
    dataset, rows = write_dataset(tmp_path, 2)
    rows[1]["repo"] = "nobody/nothing"  # no mirror, --offline: this instance cannot be graded
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = runner.invoke(
        swebench_app,
        [
            "grade",
            "--predictions",
            "gold",
            "--dataset",
            str(dataset),
            "--offline",
            "--no-progress",
            "-o",
            str(tmp_path / "g"),
        ],
    )
    assert res.exit_code == 1, res.output
    assert "resolved 1/1 judged in full" in res.output and "errors 1" in res.output
    assert "warning: 1 instance(s) cannot be judged here:" in res.output
    assert "fixture__calc-2: environment error: WorkspaceError: no mirror of nobody/nothing" in res.output
    report = json.loads((tmp_path / "g" / "report.json").read_text())
    assert list(report["cannot_judge"]) == ["fixture__calc-2"]


def test_official_grader_writes_no_predictions_before_the_docker_check(tmp_path, monkeypatch):
    pytest.importorskip("swebench")
    dataset, rows = write_dataset(tmp_path, 1)
    preds = tmp_path / "run" / "preds.json"
    preds.parent.mkdir()
    preds.write_text(
        json.dumps(
            {
                rows[0]["instance_id"]: {
                    "instance_id": rows[0]["instance_id"],
                    "model_name_or_path": "m",
                    "model_patch": "",
                }
            }
        )
    )
    monkeypatch.setenv("PATH", "/nonexistent")
    res = runner.invoke(
        swebench_app,
        ["grade", "--predictions", str(preds), "--grader", "swebench", "--dataset", str(dataset)],
    )
    assert res.exit_code == 2 and "Docker" in res.output and res.output.count("\n") == 1
    assert not list((tmp_path / "run").rglob("predictions.json"))


def test_modal_credentials_are_checked_not_only_the_import(tmp_path):
    from clover.evals.swebench.grade_official import modal_credentials_problem

    home = {"HOME": str(tmp_path)}
    assert "run modal setup" in modal_credentials_problem(home)
    assert modal_credentials_problem({**home, "MODAL_TOKEN_ID": "ak-1", "MODAL_TOKEN_SECRET": "as-1"}) is None
    assert "both be set" in modal_credentials_problem({**home, "MODAL_TOKEN_ID": "ak-1"})
    config = tmp_path / ".modal.toml"
    config.write_text('[default]\ntoken_id = "ak-1"\n')
    assert "lacks token_secret" in modal_credentials_problem(home)
    config.write_text(
        '[a]\ntoken_id = "x"\ntoken_secret = "y"\n[b]\ntoken_id = "ak-1"\ntoken_secret = "as-1"\nactive = true\n'
    )
    assert modal_credentials_problem(home) is None
    assert "no active profile named 'c'" in modal_credentials_problem({**home, "MODAL_PROFILE": "c"})
    config.write_text("[a\n")
    assert modal_credentials_problem(home).startswith(str(config))
