"""`clover eval swebench run | grade | report` (mounted by the main app as `clover eval swebench`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from clover.cli_common import fail
from clover.evals.swebench.grade_cli import grade_exit_code, grade_local, grade_official, print_grade

swebench_app = typer.Typer(
    help="SWE-bench: run the agent on instances, grade predictions, report.", no_args_is_help=True
)


def _user_errors() -> tuple[type[Exception], ...]:
    from clover.evals.swebench.dataset import DatasetError
    from clover.evals.swebench.grade_official import OfficialGraderError
    from clover.evals.swebench.local_spec import SpecError
    from clover.evals.swebench.report import ReportError
    from clover.evals.swebench.workspace import WorkspaceError
    from clover.settings import SettingsError

    return (DatasetError, WorkspaceError, SettingsError, OfficialGraderError, ReportError, SpecError)


def _ids(values: list[str] | None) -> list[str]:
    return [v for value in values or [] for v in value.replace(",", " ").split()]


def _instances(
    dataset: str, split: str, instances: list[str] | None, slice_: str | None, filter_: str | None
):
    from clover.evals.swebench.dataset import load_instances, select

    chosen = select(load_instances(dataset, split), _ids(instances), slice_, filter_)
    if not chosen:
        from clover.evals.swebench.dataset import DatasetError

        raise DatasetError("no instances selected")
    return chosen


DATASET_HELP = "verified | lite | full | a Hugging Face id | a local .json/.jsonl/.parquet file"


@swebench_app.command("run")
def run_cmd(
    output: Path = typer.Option(..., "-o", "--output", help="Output directory (resumable)."),
    dataset: str = typer.Option("verified", "--dataset", help=DATASET_HELP),
    split: str = typer.Option("test", "--split"),
    instances: Optional[list[str]] = typer.Option(
        None, "--instances", help="Instance ids (repeat or comma-separate)."
    ),
    slice_: Optional[str] = typer.Option(None, "--slice", help="a:b over the selected instances."),
    filter_: Optional[str] = typer.Option(None, "--filter", help="Regex on instance_id."),
    workers: int = typer.Option(1, "-w", "--workers", min=1),
    model: Optional[str] = typer.Option(None, "--model"),
    base_url: Optional[str] = typer.Option(None, "--base-url"),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Agent step limit per instance."),
    time_limit: Optional[float] = typer.Option(None, "--time-limit", help="Seconds per instance."),
    env: str = typer.Option("local", "--env", help="local | docker"),
    repo_cache: Optional[Path] = typer.Option(None, "--repo-cache", help="Directory of repository mirrors."),
    repo_map: Optional[list[str]] = typer.Option(
        None, "--repo-map", help="owner/name=PATH of a local mirror."
    ),
    offline: bool = typer.Option(False, "--offline", help="Never clone from GitHub."),
    keep_workspaces: bool = typer.Option(False, "--keep-workspaces"),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Run the agent on each instance; writes preds.json, trajectories and run.json to -o DIR."""
    from clover.evals.swebench.runner import RunConfig, run_batch
    from clover.evals.swebench.workspace import docker_problem, parse_repo_map
    from clover.settings import load_settings

    try:
        if env not in ("local", "docker"):
            fail(f"--env must be local or docker, not {env!r}")
        if env == "docker" and (problem := docker_problem()):
            fail(problem)
        chosen = _instances(dataset, split, instances, slice_, filter_)
        settings = load_settings(
            None,
            {"model": model, "base_url": base_url, "max_steps": max_steps, "time_limit": time_limit},
            mode="yolo",
        )
        config = RunConfig(
            output_dir=output,
            settings=settings,
            workers=workers,
            env=env,
            cache_dir=str(repo_cache) if repo_cache else None,
            repo_map=parse_repo_map(repo_map),
            online=not offline,
            keep_workspaces=keep_workspaces,
            dataset=dataset,
        )
        summary = run_batch(chosen, config, progress=progress)
    except _user_errors() as exc:
        fail(str(exc))
    typer.echo(
        f"{summary.done} run, {summary.skipped} already done, {summary.errors} errors "
        f"-> {output / 'preds.json'}"
    )
    if summary.first_error:
        typer.echo(f"first error: {summary.first_error}", err=True)
    if summary.message:
        typer.echo(summary.message, err=True)
    if summary.unfinished or summary.errors:
        raise typer.Exit(1)


@swebench_app.command("grade")
def grade_cmd(
    predictions: str = typer.Option(
        ..., "--predictions", help="DIR/preds.json | gold | empty | calibrate (gold and empty)"
    ),
    grader: str = typer.Option(
        "local", "--grader", help="swebench (official, Docker/Modal) | local (UNOFFICIAL)"
    ),
    dataset: Optional[str] = typer.Option(
        None, "--dataset", help=DATASET_HELP + " (default: the run's, else verified)"
    ),
    split: str = typer.Option("test", "--split"),
    instances: Optional[list[str]] = typer.Option(None, "--instances"),
    slice_: Optional[str] = typer.Option(None, "--slice"),
    filter_: Optional[str] = typer.Option(None, "--filter"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Default: beside the predictions."),
    workers: int = typer.Option(1, "-w", "--workers", min=1),
    repo_cache: Optional[Path] = typer.Option(None, "--repo-cache"),
    repo_map: Optional[list[str]] = typer.Option(None, "--repo-map"),
    offline: bool = typer.Option(False, "--offline"),
    run_id: Optional[str] = typer.Option(None, "--run-id"),
    modal: bool = typer.Option(False, "--modal", help="swebench grader: run on Modal."),
    timeout: Optional[int] = typer.Option(None, "--timeout", help="Test timeout per instance, seconds."),
    keep: bool = typer.Option(False, "--keep", help="local grader: keep work trees and venvs."),
    test_network: bool = typer.Option(
        True,
        "--test-network/--no-test-network",
        help="local grader: --no-test-network runs the tests with loopback only.",
    ),
    official: Optional[Path] = typer.Option(
        None,
        "--official",
        help="local grader: an official run's report (swebench's, or results.json with `resolved`) "
        "to set each verdict beside; a verdict that differs exits 1.",
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Grade predictions with the official harness or the local, UNOFFICIAL grader."""
    from clover.evals.swebench.dataset import load_predictions

    try:
        if grader not in ("swebench", "local"):
            fail(f"--grader must be swebench or local, not {grader!r}")
        if official and grader != "local":
            fail("--official sets the local grader's verdicts beside the official ones: use --grader local")
        special = predictions in ("gold", "empty", "calibrate")
        dataset, out = _grade_paths(predictions, special, grader, dataset, output)
        chosen = _instances(dataset, split, instances, slice_, filter_)
        preds = None if predictions == "calibrate" else load_predictions(predictions, chosen)
        label = predictions if special else "model"
        if grader == "swebench":
            report = grade_official(
                predictions, preds, dataset, split, chosen, out, workers, run_id, modal, timeout
            )
        else:
            report = grade_local(
                chosen,
                preds,
                out,
                label,
                workers=workers,
                progress=progress,
                official=official,
                repo_cache=repo_cache,
                repo_map=repo_map,
                online=not offline,
                keep=keep,
                timeout=timeout,
                test_network=test_network,
            )
    except _user_errors() as exc:
        fail(str(exc))
    print_grade(report, out)
    raise typer.Exit(grade_exit_code(report))


def _grade_paths(
    predictions: str, special: bool, grader: str, dataset: str | None, output: Path | None
) -> tuple[str, Path]:
    """(dataset, output directory) of a grade: by default the run's dataset (else verified) and a
    directory beside the predictions."""
    pred_dir = (
        None if special else (Path(predictions) if Path(predictions).is_dir() else Path(predictions).parent)
    )
    if dataset is None:
        dataset = _run_dataset(pred_dir) or "verified"
    out = output or (
        pred_dir / f"grade_{grader}" if pred_dir else Path(f"swebench-grade-{predictions}-{grader}")
    )
    return dataset, out


def _run_dataset(pred_dir: Path | None) -> str | None:
    if pred_dir is None or not (pred_dir / "run.json").is_file():
        return None
    try:
        return json.loads((pred_dir / "run.json").read_text()).get("dataset") or None
    except (OSError, json.JSONDecodeError):
        return None


@swebench_app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory (or a grade output directory)."),
    grades: Optional[Path] = typer.Option(
        None, "--grades", help="A grade report.json (default: found in DIR)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the numbers as JSON."),
) -> None:
    """Resolved rate, runtime, steps and tokens of a run."""
    from clover.evals.swebench.report import collect, render

    try:
        data = collect(run_dir, grades)
    except _user_errors() as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    else:
        render(data)
