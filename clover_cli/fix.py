"""`clover fix ISSUE.md`: the agent, headless, leaves a fix (diff or commit) and a report.

The report is computed, not taken from the model: the work tree's real diff (files, +/- lines) and
the last test command the agent ran with its exit code; the model's final answer follows, labelled
as its words and never shortened. Refused and failed calls are said on stderr as they happen and
listed in json (call_log.py). The exit code comes from exit_codes.py, shared with `clover -p`.

Default permission mode: auto-edit (see HEADLESS_MODE)."""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from clover.agent import Agent
from clover.agent_run import RunResult
from clover.call_log import CallLog, shorten
from clover.cli_common import fail, settings_or_exit, state_dir, warn
from clover.core.model_protocol import StreamEvent
from clover.core.stops import ModelError
from clover.exit_codes import ExitCode, Outcome, decide
from clover.fix_report import boundary_outcome, not_carried, print_json, print_report, record, summary_text
from clover.prompts import says_no_change_needed
from clover.settings import Settings
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
    log = CallLog(sys.stderr, emit=print_json if streaming else None)
    log.say(f"fixing {opts.issue} in {root} · model {_model_label(settings)} · mode {settings.mode}")
    model, env = _build(settings, root, log)
    bounds = _containment(settings, env, log)
    from clover.repl.headless import headless_agent
    from clover.runner import checkpointer
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
            print_json({"type": event.kind, "text": event.text, "data": event.data})

    agent, recording = headless_agent(
        settings,
        env,
        model,
        log,
        on_event,
        kind="fix",
        notice=log.note,
        trajectory=trajectory,
        recorder=recorder,
    )
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
        _never_answered(result, agent, trajectory, tracker, opts.output_format)

    change, unread = _change(tracker, unread)
    if change is None:  # an unknown change is not "nothing was changed" to the guard either
        checked = GuardReport(False, f"tests not compared: the change is unknown ({unread})")
    else:
        checked = guard.finish(root, change.patch_bytes or change.patch)
    if agent.trajectory is not None:  # the test guard's runs are in it too
        agent.trajectory.close()
    if checked.rolled_back:  # the change broke a passing test: nothing of it is left to write or commit
        change = Change()
    outcome = _outcome(result, change, log, recording.cut_reason())
    patch_out = _write_patch(opts.patch_out, change) if opts.patch_out else None
    if opts.commit and change is not None and change.files:
        _commit(root, result, [f.path for f in change.files])
    held, kept = boundary_outcome(agent.settled)
    summary = summary_text(change, unread, log, outcome, settings.mode, checked.note) + not_carried(
        held, kept
    )
    summary += f"\n{bounds.line().capitalize()}"
    report = record(result, outcome, summary, change, log, settings.mode, recording.cut_note(), trajectory)
    report["containment"] = bounds.to_json()
    report["held_back"] = [{"path": p, "why": w} for p, w in held]
    report["left_as_they_were"] = [{"path": p, "why": w} for p, w in kept]
    report["patch_out"] = patch_out
    report["test_guard"] = checked.to_json()
    patch = change.patch_bytes if change is not None else b""
    print_report(opts.output_format, report, result, recording.cut_note(), patch)
    return int(outcome.code)


def _containment(settings: Settings, env: Any, log: CallLog) -> Any:
    """What confines the run's commands, said first (and what a deny rule is, where there are some)."""
    from clover import containment

    bounds = containment.of(settings, env)
    log.say(bounds.line() + (f" ({containment.DEFENCE_IN_DEPTH})" if settings.deny else ""))
    for line in bounds.warnings(settings.mode):
        log.say(line)
    return bounds


def _outcome(result: RunResult, change: Change | None, log: CallLog, cut: str) -> Outcome:
    # The diff decides; where it cannot be made, whether a call that can change files ran (as for -p).
    changed = bool(change.files) if change is not None else log.mutated
    return decide(
        result.exit_status,
        refused=len(log.denials),
        changed=changed,
        needs_change=True,
        no_change_answer=says_no_change_needed(result.final_text),
        cut=cut,
    )


def _never_answered(result: RunResult, agent: Agent, trajectory: Path, tracker: Any, fmt: str) -> NoReturn:
    """The model never answered: nothing was done, so nothing is left behind but one line."""
    if agent.trajectory is not None:
        agent.trajectory.close()
    Path(trajectory).unlink(missing_ok=True)
    if tracker is not None:
        tracker.close()
    message = result.error.removeprefix("model error: ModelError: ")
    if fmt != "text":
        print_json(
            {
                **({"type": "result"} if fmt == "stream-json" else {}),
                "status": result.exit_status,
                "exit_code": int(ExitCode.BACKEND),
                "outcome": "model_error",
                "is_error": True,
                "error": message,
            }
        )
    fail(message, code=int(ExitCode.BACKEND))


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
    from clover.tools.safety.sandbox import SandboxUnavailable

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


__all__ = ["FixOptions", "HEADLESS_MODE", "run_fix"]
