"""The UNOFFICIAL local grader's batch (grade_local.py grades one instance): every instance graded,
in this process or in worker processes, and the run's report in swebench's schema; without
predictions, a calibration (gold and empty for every instance: which can be judged here)."""

from __future__ import annotations

import contextlib
from typing import Any

from clover.evals.swebench.calibration import by_repository, why_not_judgeable
from clover.evals.swebench.dataset import Instance
from clover.evals.swebench.grade_local import GradeConfig, grade_instance
from clover.evals.swebench.judge import cannot_judge
from clover.evals.swebench.runner import write_json_atomic


def _gold_log(config: GradeConfig, iid: str) -> str:
    path = config.output_dir / iid / "test_output.gold.txt"
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


def judge_notes(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per instance: why it cannot be judged here, and which tests the verdict leaves out."""
    unjudged = {i: r for i in sorted(reports) if (r := cannot_judge(reports[i]))}
    return {
        "cannot_judge": unjudged,
        "cannot_judge_kinds": {
            i: str(reports[i].get("cannot_judge_kind") or reports[i].get("error_kind") or "environment")
            for i in unjudged
        },
        "excluded_tests": {
            i: reports[i]["excluded_tests"] for i in sorted(reports) if reports[i].get("excluded_tests")
        },
    }


def summarize(reports: dict[str, dict[str, Any]], total: int, label: str) -> dict[str, Any]:
    """swebench's run-report fields, over per-instance reports {id: report}. `resolved` and
    `unresolved` count only the instances judged in full; an instance this machine cannot judge
    (a deciding test cannot run here) is counted apart, as are errors."""
    ids = sorted(reports)
    errors = [i for i in ids if reports[i].get("error")]
    empty = [i for i in ids if reports[i].get("empty_patch")]
    completed = [i for i in ids if i not in errors]
    unjudged = [i for i in completed if reports[i].get("resolved") is None]
    judged = [i for i in completed if i not in unjudged]
    resolved = [i for i in judged if reports[i].get("resolved")]
    return {
        "grader": "local",
        "official": False,
        "label": label,
        "note": "UNOFFICIAL: graded locally without Docker; official numbers need `--grader swebench`",
        "total_instances": total,
        "submitted_instances": len(ids),
        "completed_instances": len(completed),
        "judged_instances": len(judged),
        "resolved_instances": len(resolved),
        "unresolved_instances": len(judged) - len(resolved),
        "cannot_judge_instances": len(unjudged),
        "empty_patch_instances": len(empty),
        "error_instances": len(errors),
        "completed_ids": completed,
        "judged_ids": judged,
        "resolved_ids": resolved,
        "unresolved_ids": [i for i in judged if i not in resolved],
        "cannot_judge_ids": unjudged,
        "empty_patch_ids": empty,
        "error_ids": errors,
        "schema_version": 2,
    }


def grade_batch(
    instances: list[Instance],
    predictions: dict[str, dict[str, Any]] | None,
    config: GradeConfig,
    *,
    workers: int = 1,
    label: str = "model",
    progress: bool = True,
) -> dict[str, Any]:
    """Grade `predictions` ({id: pred}); None means calibrate: gold and empty for every instance."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    config.output_dir.mkdir(parents=True, exist_ok=True)
    jobs: list[tuple[Instance, dict[str, str]]] = []
    for inst in instances:
        iid = inst["instance_id"]
        if predictions is None:
            jobs.append((inst, {"gold": inst.get("patch", ""), "empty": ""}))
        elif iid in predictions:
            jobs.append((inst, {label: predictions[iid].get("model_patch") or ""}))
    results: dict[str, dict[str, Any]] = {}
    bar = _progress(len(jobs)) if progress else None
    with bar or contextlib.nullcontext():
        task = bar.add_task("grade (local, UNOFFICIAL)", total=len(jobs)) if bar else None
        if workers <= 1:  # in this process: no start-up cost
            for inst, preds in jobs:
                results[inst["instance_id"]] = grade_instance(inst, preds, config)
                if bar:
                    bar.advance(task)
        else:
            with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
                futures = {
                    pool.submit(grade_instance, inst, preds, config): inst["instance_id"]
                    for inst, preds in jobs
                }
                for fut in as_completed(futures):
                    results[futures[fut]] = fut.result()
                    if bar:
                        bar.advance(task)
    if predictions is not None:
        graded = {i: r[label] for i, r in results.items()}
        summary = {**summarize(graded, len(instances), label), **judge_notes(graded)}
    else:
        gold = {i: r["gold"] for i, r in results.items()}
        empty = {i: r["empty"] for i, r in results.items()}
        why = {i: why_not_judgeable(gold[i], empty[i], _gold_log(config, i)) for i in results}
        calib = {
            i: {
                "gold_resolved": gold[i].get("resolved", False),
                "empty_resolved": empty[i].get("resolved", False),
                "judgeable": not why[i][1],
                "why_not": why[i][1],
                "why_kind": why[i][0],
            }
            for i in sorted(results)
        }
        for i, c in calib.items():
            if gold[i].get("excluded_tests") or empty[i].get("excluded_tests"):
                c["excluded_tests"] = {
                    **empty[i].get("excluded_tests", {}),
                    **gold[i].get("excluded_tests", {}),
                }
        summary = {
            **summarize(gold, len(instances), "calibrate"),
            "judgeable_ids": [i for i, c in calib.items() if c["judgeable"]],
            "calibration": calib,
            "by_repository": by_repository(calib),
            "gold": summarize(gold, len(instances), "gold"),
            "empty": summarize(empty, len(instances), "empty"),
        }
    write_json_atomic(config.output_dir / "report.json", summary)
    return summary


def _progress(total: int) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
