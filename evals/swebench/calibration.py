"""Calibration of the local grader against the official verdicts, which on SWE-bench Verified are
known without running anything: every gold patch resolves its instance, every empty patch does not.

Per instance the local grader either agrees (it can judge the instance here), or says why it
cannot with the cause's kind (install, a package pip cannot have, the network, too few CPUs, no
test ran and why), or disagrees without a known cause: a wrong verdict, counted as such."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from clover.evals.swebench.judge import cannot_judge, failure_messages, strip_ansi

# Kinds that mean "the grader agrees with the official harness nowhere here" rather than "cannot".
WRONG = ("gold-fails", "empty-resolves")


def why_not_judgeable(gold: dict[str, Any], empty: dict[str, Any], gold_log: str = "") -> tuple[str, str]:
    """(kind, cause) of an instance the grader cannot judge here, or ("", "") when it can."""
    for report in (gold, empty):
        if reason := cannot_judge(report):
            return str(report.get("cannot_judge_kind") or report.get("error_kind") or "environment"), reason
    if not gold.get("resolved"):
        if not gold.get("patch_successfully_applied"):
            return "gold-fails", "the gold patch or the test patch does not apply here"
        if gold.get("tests_run") == 0:
            return "no-tests", f"none of the judged tests ran under the gold patch: {last_error(gold_log)}"
        tests = gold.get("tests_status", {})
        failing = [t for k in ("FAIL_TO_PASS", "PASS_TO_PASS") for t in tests.get(k, {}).get("failure", [])]
        messages = failure_messages(gold_log)
        shown = [f"{t} ({messages[t][:100]})" if t in messages else t for t in failing[:5]]
        return "gold-fails", "gold patch does not resolve here" + (
            f"; failing: {', '.join(shown)}" if failing else ""
        )
    if empty.get("resolved"):
        return "empty-resolves", "empty patch also resolves (the tests do not catch the bug here)"
    return "", ""


def last_error(log: str) -> str:
    """The line that says why a test run stopped before any test: pytest's `ERROR: ...` or a
    Python exception, else the last line of the test output."""
    body = strip_ansi(log.split(">>>>> Start Test Output", 1)[-1].split(">>>>> End Test Output", 1)[0])
    lines = [
        ln.strip() for ln in body.splitlines() if ln.strip() and not ln.startswith(("+ ", "[exit", "# "))
    ]
    errors = [ln for ln in lines if re.match(r"^(ERROR:|E\s|\w+(Error|Exception)\b|error:)", ln)]
    return ((errors or lines or ["(no output)"])[-1])[:200]


def repository(instance_id: str) -> str:
    """`pytest-dev__pytest-5262` -> `pytest-dev/pytest`."""
    return instance_id.rsplit("-", 1)[0].replace("__", "/", 1)


def by_repository(
    calibration: dict[str, dict[str, Any]], wrong: tuple[str, ...] = WRONG
) -> dict[str, dict[str, Any]]:
    """Per repository: rows, judged correctly, cannot judge (by cause kind), wrong."""
    table: dict[str, dict[str, Any]] = {}
    for iid, entry in sorted(calibration.items()):
        row = table.setdefault(
            repository(iid), {"rows": 0, "correct": 0, "cannot_judge": Counter(), "wrong": 0}
        )
        row["rows"] += 1
        kind = entry.get("why_kind", "")
        if entry.get("judgeable"):
            row["correct"] += 1
        elif kind in wrong:
            row["wrong"] += 1
        else:
            row["cannot_judge"][kind or "unknown"] += 1
    return {repo: {**row, "cannot_judge": dict(row["cannot_judge"])} for repo, row in table.items()}


def render_table(table: dict[str, dict[str, Any]]) -> str:
    """A markdown table (it goes into notes and issues as it is)."""
    lines = [
        "| repository | rows | judged correctly | cannot judge (cause) | wrong |",
        "|---|---|---|---|---|",
    ]
    total = Counter()
    for repo, row in table.items():
        causes = ", ".join(f"{n} {kind}" for kind, n in sorted(row["cannot_judge"].items())) or "0"
        lines.append(f"| {repo} | {row['rows']} | {row['correct']} | {causes} | {row['wrong']} |")
        total.update(
            rows=row["rows"],
            correct=row["correct"],
            wrong=row["wrong"],
            cannot=sum(row["cannot_judge"].values()),
        )
    if table:
        pct = 100 * total["correct"] / total["rows"]
        lines.append(
            f"| all | {total['rows']} | {total['correct']} ({pct:.0f}%) | {total['cannot']} | {total['wrong']} |"
        )
    return "\n".join(lines)


def official_verdicts(data: dict[str, Any], ids: list[str]) -> dict[str, bool]:
    """{instance: resolved} by an official run's report: swebench's (`resolved_ids`) or the
    experiments repository's results.json (`resolved`). A graded instance it does not list as
    resolved is unresolved, as the official score counts it."""
    resolved = set(data.get("resolved_ids") or data.get("resolved") or [])
    return {i: i in resolved for i in ids}


def agreement(report: dict[str, Any], official: dict[str, bool]) -> dict[str, dict[str, str]]:
    """Per instance: the local verdict beside the official one, and how they relate: `agree`,
    `wrong` (both gave a verdict, and they differ), or the kind of why this grader could not
    judge it here (error kinds, cannot-judge kinds)."""
    notes = report.get("cannot_judge", {})
    kinds = report.get("cannot_judge_kinds", {})
    out = {}
    for iid, resolved in sorted(official.items()):
        wanted = "resolved" if resolved else "unresolved"
        if iid in report.get("error_ids", []):
            local, kind = "error", kinds.get(iid, "environment")
        elif iid in report.get("cannot_judge_ids", []):
            local, kind = "cannot judge", kinds.get(iid, "skipped")
        else:
            local = "resolved" if iid in report.get("resolved_ids", []) else "unresolved"
            kind = "agree" if local == wanted else "wrong"
        out[iid] = {"official": wanted, "local": local, "kind": kind, "why": notes.get(iid, "")}
    return out


def agreement_by_repository(rows: dict[str, dict[str, str]]) -> dict[str, dict[str, Any]]:
    """The calibration table's shape, for verdicts against an official run."""
    return by_repository(
        {
            iid: {
                "judgeable": row["kind"] == "agree",
                "why_kind": "wrong-verdict" if row["kind"] == "wrong" else row["kind"],
            }
            for iid, row in rows.items()
        },
        wrong=("wrong-verdict",),
    )
