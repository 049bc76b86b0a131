"""The steps of `clover eval swebench grade` (cli.py declares the command): grading with the official
harness or the local, UNOFFICIAL grader, an official run's verdicts set beside the local ones, the
report's line and warnings, and the command's exit status."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer


def grade_local(
    chosen: list,
    preds: dict | None,
    out: Path,
    label: str,
    *,
    workers: int,
    progress: bool,
    official: Path | None,
    repo_cache: Path | None,
    repo_map: list[str] | None,
    online: bool,
    keep: bool,
    timeout: int | None,
    test_network: bool,
) -> dict:
    """The local, UNOFFICIAL grader's report on `preds` (None: calibrate), with an official run's
    verdicts set beside it when `official` names one."""
    from clover.evals.swebench.grade_local import GradeConfig
    from clover.evals.swebench.local_batch import grade_batch
    from clover.evals.swebench.workspace import parse_repo_map

    config = GradeConfig(
        output_dir=out,
        cache_dir=str(repo_cache) if repo_cache else None,
        repo_map=parse_repo_map(repo_map),
        online=online,
        keep=keep,
        test_timeout=float(timeout or 1800),
        test_network=test_network,
    )
    official_data = _read_official(official) if official else None
    report = grade_batch(chosen, preds, config, workers=workers, label=label, progress=progress)
    if official_data is not None:
        _set_beside_official(report, official_data, out)
    return report


def print_grade(report: dict, out: Path) -> None:
    """The grade's line, a calibration's table of what can be judged here, the unjudged warned of."""
    typer.echo(grade_line(report) + f" -> {out / 'report.json'}")
    if "judgeable_ids" in report:
        from clover.evals.swebench.calibration import render_table

        typer.echo(
            f"judgeable here (gold resolves, empty does not): {len(report['judgeable_ids'])}/"
            f"{len(report['calibration'])}"
        )
        typer.echo(render_table(report.get("by_repository", {})))
    _warn_unjudged(report)


def _read_official(path: Path) -> dict:
    from clover.evals.swebench.report import ReportError

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ReportError(f"--official {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("resolved_ids", data.get("resolved")), list):
        raise ReportError(f"--official {path}: no list of resolved instances (resolved_ids or resolved)")
    return data


def _set_beside_official(report: dict, data: dict, out: Path) -> None:
    """Each local verdict beside the official one: in report.json, and as a table by repository."""
    from clover.evals.swebench.calibration import (
        agreement,
        agreement_by_repository,
        official_verdicts,
        render_table,
    )
    from clover.evals.swebench.runner import write_json_atomic

    graded = [*report.get("completed_ids", []), *report.get("error_ids", [])]
    rows = agreement(report, official_verdicts(data, graded))
    report["agreement"] = rows
    report["agreement_by_repository"] = agreement_by_repository(rows)
    write_json_atomic(out / "report.json", report)
    typer.echo("beside the official verdicts (judged correctly = the same verdict):")
    typer.echo(render_table(report["agreement_by_repository"]))
    for iid, row in rows.items():
        if row["kind"] == "wrong":
            typer.echo(f"wrong: {iid}: official {row['official']}, local {row['local']}", err=True)


# `clover eval swebench grade`'s exit status: what the figure covers.
GRADE_EXIT = {"judged": 0, "error": 1, "cannot_judge": 3}


def grade_line(report: dict) -> str:
    """One line: resolved over the instances judged in full, the rest counted apart."""
    if report.get("official"):
        return f"resolved {report.get('resolved_instances', 0)}/{report.get('submitted_instances', 0)}"
    judged = report.get("judged_instances", 0)
    return (
        f"resolved {report.get('resolved_instances', 0)}/{judged} judged in full (UNOFFICIAL local grader); "
        f"cannot judge here {report.get('cannot_judge_instances', 0)}; errors {report.get('error_instances', 0)}"
    )


def grade_exit_code(report: dict) -> int:
    """0: every instance judged in full; 1: an instance errored, or a verdict differs from a known
    one (calibrating, or --official); 3: no error, but some instance cannot be judged here."""
    from clover.evals.swebench.calibration import WRONG

    calibration = report.get("calibration", {})
    wrong = any(c.get("why_kind") in WRONG for c in calibration.values()) or any(
        row["kind"] == "wrong" for row in report.get("agreement", {}).values()
    )
    if report.get("error_instances") or wrong:
        return GRADE_EXIT["error"]
    if report.get("cannot_judge_instances") or any(c.get("why_not") for c in calibration.values()):
        return GRADE_EXIT["cannot_judge"]
    return GRADE_EXIT["judged"]


def _warn_unjudged(report: dict) -> None:
    """Instances this grader cannot judge here, and tests that could not run beside a verdict
    they cannot change: on stderr."""
    unjudged = report.get("cannot_judge") or {
        i: c["why_not"] for i, c in report.get("calibration", {}).items() if c.get("why_not")
    }
    if unjudged:
        typer.echo(f"warning: {len(unjudged)} instance(s) cannot be judged here:", err=True)
        for iid, why in unjudged.items():
            typer.echo(f"  {iid}: {why}", err=True)
    excluded = report.get("excluded_tests") or {
        i: c["excluded_tests"] for i, c in report.get("calibration", {}).items() if c.get("excluded_tests")
    }
    excluded = {i: tests for i, tests in excluded.items() if i not in unjudged}
    if excluded:
        typer.echo(
            f"note: {len(excluded)} instance(s) unresolved by tests that ran; these could not run here "
            "and cannot change that:",
            err=True,
        )
        for iid, tests in excluded.items():
            for test, why in tests.items():
                typer.echo(f"  {iid}: {test} ({why})", err=True)


def grade_official(predictions, preds, dataset, split, chosen, out, workers, run_id, modal, timeout):
    from clover.evals.swebench.grade_official import (
        OfficialGraderError,
        check_backend,
        official_command,
        run_official,
        write_predictions,
    )

    if predictions == "calibrate":
        raise OfficialGraderError(
            "calibrate is for the local grader; the official harness is calibrated already"
        )
    check_backend(modal)  # before anything is written: no predictions.json for a run that cannot start
    ids = {i["instance_id"] for i in chosen}
    path = (
        "gold"
        if predictions == "gold"
        else str(write_predictions({k: v for k, v in preds.items() if k in ids}, out / "predictions.json"))
    )
    cmd = official_command(
        dataset=dataset,
        predictions_path=path,
        run_id=run_id or time.strftime("clover-%Y%m%d-%H%M%S"),
        max_workers=workers,
        instance_ids=sorted(ids),
        split=split,
        modal=modal,
        timeout=timeout,
    )
    typer.echo("$ " + " ".join(cmd), err=True)
    return run_official(cmd, out, modal)
