"""`clover fix ISSUE.md`: the agent, headless, leaves a fix (diff or commit) and a report.

The report is computed, not taken from the model: the work tree's real diff (files, +/- lines) and
the last test command the agent ran with its exit code; the model's final answer follows, labelled
as its words and never shortened. Refused and failed calls are said on stderr as they happen and
listed in json (call_log.py). The exit code comes from exit_codes.py, shared with `clover -p`.

Default permission mode: auto-edit (see HEADLESS_MODE)."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from clover.agent import RunResult
from clover.call_log import CallLog, shorten
from clover.cli_common import fail, settings_or_exit, state_dir, warn
from clover.core.protocols import ModelError, StreamEvent
from clover.exit_codes import ExitCode, Outcome, decide
from clover.prompts import says_no_change_needed
from clover.settings import Settings
from clover.terminal_text import visible
from clover.worktree_change import Change, WorkTreeChange

# A fix is asked for a change, so file edits inside the workspace run without asking (checkpointed:
# `clover undo` reverts them). Commands run only where the user's allow rules (or --yes / --mode
# yolo) say so: a command can do anything the sandbox lets it, and bubblewrap may be missing. The
# user's own config (`mode = ...`) and --mode / --yes win over this default.
HEADLESS_MODE = "auto-edit"


@dataclass
class FixOptions:
    issue: Path
    repo: Path
    commit: bool = False
    patch_out: Path | None = None
    output_format: str = "text"
    trajectory: Path | None = None


def run_fix(opts: FixOptions, flags: dict[str, Any]) -> int:
    task, root = _check_input(opts)
    settings = settings_or_exit(root, flags, mode=HEADLESS_MODE)
    streaming = opts.output_format == "stream-json"
    log = CallLog(sys.stderr, emit=_print_json if streaming else None)
    log.say(f"fixing {opts.issue} in {root} · model {_model_label(settings)} · mode {settings.mode}")
    model, env = _build(settings, root, log)
    from clover import containment

    bounds = containment.of(settings, env)
    log.say(bounds.line() + (f" ({containment.DEFENCE_IN_DEPTH})" if settings.deny else ""))
    for line in bounds.warnings(settings.mode):
        log.say(line)

    from clover.loop_guard import LoopGuard
    from clover.repl.headless import RecordingModel
    from clover.runner import build_agent, checkpointer
    from clover.test_guard import GuardReport, guard_for_fix

    trajectory = opts.trajectory or state_dir() / "runs" / f"fix-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    tracker, unread = _tracker(root)
    recorder = checkpointer(
        settings,
        root,
        f"fix {opts.issue.name}: {task.splitlines()[0][:60]}",
        session=f"fix-{time.strftime('%Y%m%d-%H%M%S')}",
    )

    def on_event(event: StreamEvent) -> None:
        log.on_event(event)
        if streaming:
            _print_json({"type": event.kind, "text": event.text, "data": event.data})

    recording: RecordingModel | None = None

    def compacting(guarded: LoopGuard) -> RecordingModel:
        nonlocal recording
        recording = RecordingModel(guarded, notice=log.note)
        return recording

    agent = build_agent(
        settings,
        env,
        kind="fix",
        model=model,
        wrap_model=compacting,
        trajectory_path=trajectory,
        on_event=on_event,
        before_step=log.on_step,
        on_call_done=log,
        recorder=recorder,
    )
    log.bind(agent.tools)
    # the repository's tests before the agent (test_guard.py): a check, recorded in the trajectory
    guard = guard_for_fix(settings, env, model)
    try:
        result = agent.run(task)
    except BaseException:
        if agent.trajectory is not None:
            agent.trajectory.close()
        raise
    log.done()
    if result.exit_status == ModelError.exit_status and result.steps <= 1:
        # The model never answered: nothing was done, so leave nothing behind but one line.
        if agent.trajectory is not None:
            agent.trajectory.close()
        Path(trajectory).unlink(missing_ok=True)
        if tracker is not None:
            tracker.close()
        message = result.error.removeprefix("model error: ModelError: ")
        if opts.output_format != "text":
            _print_json(
                {
                    **({"type": "result"} if streaming else {}),
                    "status": result.exit_status,
                    "exit_code": int(ExitCode.BACKEND),
                    "outcome": "model_error",
                    "is_error": True,
                    "error": message,
                }
            )
        fail(message, code=int(ExitCode.BACKEND))

    change, unread = _change(tracker, unread)
    if change is None:  # an unknown change is not "nothing was changed" to the guard either
        checked = GuardReport(False, f"tests not compared: the change is unknown ({unread})")
    else:
        checked = guard.finish(root, change.patch_bytes or change.patch)
    if agent.trajectory is not None:  # the test guard's runs are in it too
        agent.trajectory.close()
    if checked.rolled_back:  # the change broke a passing test: nothing of it is left to write or commit
        change = Change()
    assert recording is not None  # build_agent wrapped the model
    cut = recording.cut_reason()
    # The diff decides; where it cannot be made, whether a call that can change files ran (as for -p).
    changed = bool(change.files) if change is not None else log.mutated
    outcome = decide(
        result.exit_status,
        refused=len(log.denials),
        changed=changed,
        needs_change=True,
        no_change_answer=says_no_change_needed(result.final_text),
        cut=cut,
    )
    patch_out = _write_patch(opts.patch_out, change) if opts.patch_out else None
    if opts.commit and change is not None and change.files:
        _commit(root, result, [f.path for f in change.files])
    held, kept = boundary_outcome(agent.settled)
    summary = _summary(change, unread, log, outcome, settings.mode, checked.note)
    summary += "".join(f"\nNot applied: {path}, {why} (held: no one could approve it)" for path, why in held)
    summary += "".join(f"\nLeft as they were: {path} ({why})" for path, why in kept[:5])
    if len(kept) > 5:
        summary += f"\nLeft as they were: {len(kept) - 5} more path(s) (listed in the json report)"
    summary += f"\n{bounds.line().capitalize()}"
    report = _record(result, outcome, summary, change, log, settings.mode, recording.cut_note(), trajectory)
    report["containment"] = bounds.to_json()
    report["held_back"] = [{"path": p, "why": w} for p, w in held]
    report["left_as_they_were"] = [{"path": p, "why": w} for p, w in kept]
    report["patch_out"] = patch_out
    report["test_guard"] = checked.to_json()
    _report(
        opts.output_format,
        report,
        result,
        recording.cut_note(),
        change.patch_bytes if change is not None else b"",
    )
    return int(outcome.code)


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


def _write_patch(path: Path, change: Change | None) -> dict[str, Any]:
    """The patch, byte for byte (a file in Latin-1 stays Latin-1, so `git apply` takes it)."""
    if change is None:
        warn(f"{path} was not written: the change is unknown")
        return {"path": str(path), "error": "the change is unknown"}
    try:
        path.write_bytes(change.patch_bytes)
    except OSError as exc:  # the run's result is still reported below
        warn(f"cannot write {path}: {exc.strerror or exc}")
        return {"path": str(path), "error": str(exc.strerror or exc)}
    return {"path": str(path), "error": None}


def _record(
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


def _check_input(opts: FixOptions) -> tuple[str, Path]:
    """Every usage problem, before anything runs (exit 2, one line)."""
    from clover.gitdiff import is_git_repo

    if opts.output_format not in ("text", "json", "stream-json"):
        fail(f"--output-format must be text, json or stream-json, not {opts.output_format!r}")
    if not opts.issue.is_file():
        fail(f"issue file not found: {opts.issue}")
    if not opts.repo.is_dir():
        fail(f"repository not found: {opts.repo}")
    try:
        task = opts.issue.read_text(encoding="utf-8", errors="replace").strip()
    except OSError as exc:
        fail(f"cannot read {opts.issue}: {exc.strerror}")
    if not task:
        fail(f"issue file is empty: {opts.issue}")
    if opts.patch_out:  # found now, not after the run: the fix would be made and its patch lost
        where = opts.patch_out.absolute()
        if not where.parent.is_dir():
            fail(f"--patch-out: directory not found: {where.parent}")
        if where.is_dir():
            fail(f"--patch-out: {where} is a directory; name a file")
        if why := _unwritable(where):
            fail(f"--patch-out: cannot write {where}: {why}")
    root = opts.repo.resolve()
    if opts.commit and not is_git_repo(root):
        fail(f"--commit needs a git repository, and {root} is not one")
    return task, root


def _unwritable(path: Path) -> str:
    """Why `path` cannot be written, found by trying (os.access says yes to root on a read-only
    mount); nothing is changed: an existing file is opened for append, a new one is made and removed."""
    try:
        if path.exists():
            with open(path, "ab"):
                pass
        else:
            with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".clover-probe-"):
                pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return ""


def _model_label(settings: Settings) -> str:
    return f"{settings.model} at {settings.base_url}" if settings.base_url else settings.model


def _build(settings: Settings, root: Path, log: CallLog) -> tuple[Any, Any]:
    """The model and the environment; a problem with either is one line and exit 2."""
    from clover.runner import build_environment, build_model
    from clover.tools.sandbox import SandboxUnavailable

    local = not settings.base_url and not settings.model.startswith("scripted:")
    try:
        if local:
            log.say(f"loading the model ({settings.model})…")
        started = time.monotonic()
        model = build_model(settings)
        if local:
            log.say(f"model loaded in {time.monotonic() - started:.1f} s")
        return model, build_environment(settings, root)
    except (ModelError, SandboxUnavailable) as exc:
        fail(str(exc))


def _tracker(root: Path) -> tuple[WorkTreeChange | None, str]:
    """The snapshot before the run, or None and why not."""
    try:
        return WorkTreeChange(root), ""
    except (RuntimeError, OSError) as exc:
        warn(f"cannot snapshot the work tree ({shorten(str(exc), 200)}): the report cannot show the change")
        return None, f"the work tree could not be read: {shorten(str(exc), 200)}"


def _change(tracker: WorkTreeChange | None, unread: str) -> tuple[Change | None, str]:
    """The run's real diff, or None and why it cannot be told (e.g. the agent broke .git/config):
    never an empty change in its place, which would say that nothing changed."""
    if tracker is None:
        return None, unread
    try:
        return tracker.result(), ""
    except (RuntimeError, OSError) as exc:
        warn(f"cannot diff the work tree ({shorten(str(exc), 200)})")
        return None, f"the work tree could not be diffed: {shorten(str(exc), 200)}"


def _summary(
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


def _commit(root: Path, result: RunResult, paths: list[str]) -> None:
    """Commit only what the agent changed: the user's own uncommitted work stays uncommitted.
    The subject is the answer's first line when it fits in 72 characters; the whole answer is the body."""
    from clover import gitdiff

    answer = result.final_text.strip()
    first = (answer.splitlines() or [""])[0].strip()
    title = first if first and len(first) <= 72 else f"clover fix: {', '.join(paths)}"
    if len(title) > 72:
        title = f"clover fix: {len(paths)} files"
    body = f"{answer}\n\n" if answer and answer != title else ""
    try:
        gitdiff.commit_paths(root, paths, f"{title}\n\n{body}Made by clover fix ({result.steps} steps).")
    except RuntimeError as exc:
        warn(f"the fix was not committed: {exc}")


def _report(fmt: str, report: dict[str, Any], result: RunResult, cut: str, patch: bytes) -> None:
    if fmt == "json":
        print(json.dumps(report, indent=2))
        return
    if fmt == "stream-json":
        _print_json({"type": "result", **report})
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
    if verified or held:  # the local decoder ran the issue's example against its edits (reproduce.py)
        line += f"; issue's example run: {verified} edit(s) chosen by it, {held} held back"
    print(line, file=sys.stderr)
    print(f"trajectory: {visible(report['trajectory'])}", file=sys.stderr)


def _print_json(obj: dict[str, Any]) -> None:
    print(json.dumps(obj, default=str), flush=True)


__all__ = ["FixOptions", "HEADLESS_MODE", "run_fix"]
