"""`clover eval swebench report DIR`: per-instance and total resolved rate, runtime, steps, tokens
of a run directory, joined with the newest grade report found in it (or given)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clover.evals.swebench.runner import RETRY_STATUSES, load_results


class ReportError(ValueError):
    """One line for the user."""


def find_grade_report(run_dir: Path) -> Path | None:
    """DIR/report.json (a grade output directory), else the newest DIR/grade*/report.json."""
    if (run_dir / "report.json").is_file():
        return run_dir / "report.json"
    found = sorted(run_dir.glob("grade*/report.json"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def collect(run_dir: Path, grade_report: Path | None = None) -> dict[str, Any]:
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: no such directory")
    results = load_results(run_dir)
    grade_path = grade_report or find_grade_report(run_dir)
    grade: dict[str, Any] = {}
    if grade_path is not None:
        try:
            grade = json.loads(Path(grade_path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ReportError(f"{grade_path}: {exc}") from None
    if not results and not grade:
        raise ReportError(f"{run_dir}: no results (*/result.json) and no grade report (report.json)")
    verdicts = grade_verdicts(grade)
    ids = sorted(set(results) | set(verdicts))
    rows = []
    for iid in ids:
        r = results.get(iid, {})
        verdict = verdicts.get(iid)
        rows.append(
            {
                "instance_id": iid,
                "exit_status": r.get("exit_status", "-"),
                "verdict": verdict,
                "resolved": {"resolved": True, "unresolved": False}.get(verdict or ""),
                "runtime": r.get("runtime"),
                "steps": r.get("steps"),
                "tokens": r.get("tokens"),
                "tokens_per_forward": r.get("tokens_per_forward"),
            }
        )
    n_graded = sum(row["resolved"] is not None for row in rows)
    ran = [row for row in rows if row["runtime"] is not None]
    totals = {
        "instances": len(rows),
        "graded": n_graded,
        "cannot_judge": sum(row["verdict"] == "cannot judge" for row in rows),
        "grade_errors": sum(row["verdict"] == "error" for row in rows),
        "resolved": sum(bool(row["resolved"]) for row in rows),
        "resolved_rate": (sum(bool(row["resolved"]) for row in rows) / n_graded) if n_graded else None,
        "errors": sum(row["exit_status"] in RETRY_STATUSES for row in rows),
        "runtime_mean": _mean([row["runtime"] for row in ran]),
        "steps_mean": _mean([row["steps"] for row in ran]),
        "tokens_total": sum(row["tokens"] or 0 for row in ran),
        # One figure, as each row's: generated tokens / forwards over the whole run (a mean of
        # per-instance ratios would weigh a 3-token answer like a 3000-token one).
        "tokens_per_forward": _ratio(
            sum(r.get("completion_tokens") or 0 for r in results.values()),
            sum((r.get("stats") or {}).get("forwards") or 0 for r in results.values()),
        ),
    }
    if "judgeable_ids" in grade:
        totals["judgeable"] = len(grade["judgeable_ids"])
    return {
        "rows": rows,
        "totals": totals,
        "grade_report": str(grade_path) if grade_path else None,
        "grader": grade.get("grader"),
        "official": grade.get("official"),
    }


def grade_verdicts(grade: dict[str, Any]) -> dict[str, str]:
    """{instance: resolved | unresolved | cannot judge | error} from a grade report. Only the
    first two are verdicts; an older report without `cannot_judge_ids` has none of that kind."""
    out: dict[str, str] = {}
    for key, verdict in (
        ("empty_patch_ids", "unresolved"),  # the official harness does not run an empty patch
        ("error_ids", "error"),
        ("cannot_judge_ids", "cannot judge"),
        ("unresolved_ids", "unresolved"),
        ("resolved_ids", "resolved"),
    ):
        out.update(dict.fromkeys(grade.get(key, []), verdict))
    return out


def _ratio(num: float, den: float) -> float | None:
    return round(num / den, 3) if den else None


def _mean(values: list[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _fmt(value: Any, spec: str = "") -> str:
    if value is None:
        return "-"
    return format(value, spec) if spec else str(value)


VERDICT_MARKS = {
    "resolved": "[green]yes[/]",
    "unresolved": "[red]no[/]",
    "cannot judge": "[yellow]cannot judge[/]",
    "error": "[red]error[/]",
}


def render(data: dict[str, Any], console: Any = None, max_rows: int = 200) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    grader = data["grader"]
    title = "SWE-bench"
    if grader:
        title += f" — graded by {grader}" + ("" if data["official"] else " (UNOFFICIAL)")
    table = Table(title=title)
    for col, justify in (
        ("instance", "left"),
        ("exit", "left"),
        ("resolved", "center"),
        ("runtime s", "right"),
        ("steps", "right"),
        ("tokens", "right"),
        ("tok/fwd", "right"),
    ):
        table.add_column(col, justify=justify, no_wrap=col == "instance")  # type: ignore[arg-type]
    for row in data["rows"][:max_rows]:
        mark = VERDICT_MARKS.get(row["verdict"] or "", "-")
        table.add_row(
            row["instance_id"],
            row["exit_status"],
            mark,
            _fmt(row["runtime"], ".1f"),
            _fmt(row["steps"]),
            _fmt(row["tokens"]),
            _fmt(row["tokens_per_forward"], ".2f"),
        )
    t = data["totals"]
    rate = (
        f"{t['resolved']}/{t['graded']} ({100 * t['resolved_rate']:.1f}%)"
        if t["resolved_rate"] is not None
        else "not graded"
    )
    apart = ", ".join(
        f"{n} {label}"
        for n, label in ((t["cannot_judge"], "cannot judge here"), (t["grade_errors"], "grade errors"))
        if n
    )
    table.add_section()
    table.add_row(
        f"total ({t['instances']})",
        f"errors {t['errors']}",
        rate,
        _fmt(t["runtime_mean"], ".1f"),
        _fmt(t["steps_mean"], ".1f"),
        _fmt(t["tokens_total"]),
        _fmt(t["tokens_per_forward"], ".2f"),
    )
    console.print(table)
    console.print(
        f"resolved {rate}"
        + (f" ({apart}, not counted)" if apart else "")
        + f" · errors {t['errors']} · mean runtime {_fmt(t['runtime_mean'], '.1f')} s · "
        f"mean steps {_fmt(t['steps_mean'], '.1f')} · tokens {t['tokens_total']}",
        soft_wrap=True,
    )
    if len(data["rows"]) > max_rows:
        console.print(f"({len(data['rows']) - max_rows} more rows not shown; means cover all)")
    if "judgeable" in t:
        console.print(f"calibration: {t['judgeable']} instance(s) can be judged by this grader here")
