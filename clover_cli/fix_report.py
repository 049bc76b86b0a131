"""What `clover fix` says when it is done: the summary computed from the files and the calls (never
from the model's prose), the json report (Claude Code's `is_error` and `permission_denials`, and
ours), and the text report with the model's words labelled as theirs and the patch byte for byte."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from clover.agent_run import RunResult
from clover.call_log import CallLog, shorten
from clover.exit_codes import ExitCode, Outcome
from clover.terminal_text import visible
from clover.worktree_change import Change


def not_carried(held: list[tuple[str, str]], kept: list[tuple[str, str]]) -> str:
    """The summary's lines for what the step boundary did not carry over (the first five kept)."""
    lines = "".join(f"\nNot applied: {path}, {why} (held: no one could approve it)" for path, why in held)
    lines += "".join(f"\nLeft as they were: {path} ({why})" for path, why in kept[:5])
    if len(kept) > 5:
        lines += f"\nLeft as they were: {len(kept) - 5} more path(s) (listed in the json report)"
    return lines


def boundary_outcome(settled: list[dict[str, Any]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """What the step boundary did not carry over in the run: (held changes no one approved, paths
    kept as they were by rule), each (path, why), once each."""
    held: dict[str, str] = {}
    kept: dict[str, str] = {}
    for report in settled:
        for item in report.get("held", []):
            if not item["approved"]:
                held.setdefault(item["path"], item["why"])
        for path, why in report.get("kept", []):
            kept.setdefault(path, why)
    return list(held.items()), list(kept.items())


def record(
    result: RunResult,
    outcome: Outcome,
    summary: str,
    change: Change | None,
    log: CallLog,
    mode: str,
    cut: str,
    trajectory: Path,
) -> dict[str, Any]:
    """The json result (and stream-json's last line): Claude Code's `is_error` and
    `permission_denials` (tool_name, tool_use_id, tool_input, plus our `reason`), and ours."""
    return {
        "status": result.exit_status,
        "outcome": outcome.label,
        "exit_code": int(outcome.code),
        "is_error": outcome.code != ExitCode.OK,
        "summary": summary,
        "patch": change.patch if change is not None else "",
        "changes": None
        if change is None
        else {"files": [asdict(f) for f in change.files], "added": change.added, "removed": change.removed},
        "final_text": result.final_text,  # the model's words, whole
        "truncated": cut or None,
        "error": result.error,
        "mode": mode,
        **log.record(),
        "steps": result.steps,
        "tokens": result.tokens,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "seconds": round(result.seconds, 3),
        "model_seconds": round(result.model_seconds, 3),
        "stats": result.stats,
        "trajectory": str(trajectory),
    }


def summary_text(
    change: Change | None, unread: str, log: CallLog, outcome: Outcome, mode: str, guard_note: str = ""
) -> str:
    """What happened, from the files and the calls: never from the model's prose."""
    lines = [f"Change: {change.stat()}" if change is not None else f"Change: unknown ({unread})"]
    test = log.last_test
    if test is None:
        lines.append("Tests: the agent ran no test command")
    else:
        result = "timed out" if test.timed_out else f"exit {test.exit_code}"
        when = "after the last edit" if test.after_last_edit else "before the last edit"
        lines.append(f"Tests: `{shorten(test.command, 120)}` {result}, {when}")
    if guard_note:
        lines.append(f"Test guard: {guard_note}")
    if log.denials or log.errors:
        lines.append(f"Calls: {len(log.denials)} refused, {len(log.errors)} failed (listed above)")
    if outcome.code == ExitCode.REFUSED:
        lines.append(
            f"Refused in {mode} mode: --yes allows every call (commands run in the sandbox where "
            "bubblewrap works), or allow rules in the config let chosen commands run"
        )
    return "\n".join(lines)


def print_report(fmt: str, report: dict[str, Any], result: RunResult, cut: str, patch: bytes) -> None:
    if fmt == "json":
        print(json.dumps(report, indent=2))
        return
    if fmt == "stream-json":
        print_json({"type": "result", **report})
        return
    # The report is for people: file names, the model's words and the diff cannot act on the terminal.
    print(visible(report["summary"]))
    words = visible(result.final_text.strip())
    if words:
        label = "The model's words" + (f" (cut off: {cut})" if cut else "")
        lines = words.splitlines()
        print(
            f"{label}: {words}" if len(lines) == 1 else f"{label}:\n" + "\n".join(f"  {ln}" for ln in lines)
        )
    if patch:  # redirected: the files' own bytes, as --patch-out writes them; on a terminal, as text
        print(flush=True)
        raw = getattr(sys.stdout, "buffer", None)
        if raw is None or sys.stdout.isatty():
            print(visible(patch.rstrip(b"\n").decode("utf-8", "surrogateescape")))
        else:
            raw.write(patch.rstrip(b"\n") + b"\n")
            raw.flush()
    line = (
        f"[{report['outcome']}] exit {report['exit_code']} · {result.steps} steps, {result.tokens} tokens, "
        f"{result.seconds:.1f} s (model {result.model_seconds:.1f} s)"
    )
    if result.error:
        line += f" - {visible(result.error)}"
    verified, held = int(result.stats.get("verified_edits", 0)), int(result.stats.get("held_edits", 0))
    if verified or held:  # the local decoder ran the example against its edits (reproduce.py)
        line += f"; issue's example run: {verified} edit(s) chosen by it, {held} held back"
    print(line, file=sys.stderr)
    print(f"trajectory: {visible(report['trajectory'])}", file=sys.stderr)


def print_json(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, default=str), flush=True)
