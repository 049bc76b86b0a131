"""`clover fix ISSUE.md`: the agent, headless, leaves a fix (diff or commit) and a report.

Exit codes: 0 the agent finished, 1 it gave up or hit a limit, 2 usage or configuration error."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clover import gitdiff
from clover.agent import RunResult
from clover.cli_common import fail, settings_or_exit, state_dir, warn
from clover.core.protocols import ModelError, StreamEvent


@dataclass
class FixOptions:
    issue: Path
    repo: Path
    commit: bool = False
    patch_out: Path | None = None
    output_format: str = "text"
    trajectory: Path | None = None


def run_fix(opts: FixOptions, flags: dict[str, Any]) -> int:
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
    if opts.patch_out and not opts.patch_out.absolute().parent.is_dir():
        fail(f"--patch-out: directory not found: {opts.patch_out.absolute().parent}")
    root = opts.repo.resolve()
    settings = settings_or_exit(root, flags, mode="ask")
    git = gitdiff.is_git_repo(root)
    if not git:
        warn(f"{root} is not a git repository: no diff and no --commit (clover undo still works)")

    from clover.runner import build_environment, build_model, checkpointer, run_agent
    from clover.tools.sandbox import SandboxUnavailable

    try:
        model = build_model(settings)
        env = build_environment(settings, root)
    except (ModelError, SandboxUnavailable) as exc:
        fail(str(exc))
    trajectory = opts.trajectory or state_dir() / "runs" / f"fix-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    from clover.test_guard import guard_for_fix

    guard = guard_for_fix(settings, env, model)  # the repository's tests before the agent (test_guard.py)
    before = gitdiff.worktree_tree(root) if git else None
    printer = _stream_printer() if opts.output_format == "stream-json" else None
    result = run_agent(task, settings=settings, env=env, model=model, kind="fix",
                       trajectory_path=trajectory, on_event=printer,
                       before_step=checkpointer(settings, root))
    if result.exit_status == ModelError.exit_status and result.steps <= 1:
        # The model never answered: nothing was done, so leave nothing behind.
        Path(trajectory).unlink(missing_ok=True)
        fail(result.error.removeprefix("model error: ModelError: "))

    after = gitdiff.worktree_tree(root) if before else None
    patch = gitdiff.diff_trees(root, before, after) if before and after else ""
    checked = guard.finish(root, patch)
    if checked.rolled_back:  # the change broke a passing test: nothing of it is left to write or commit
        after, patch = before, ""
    if opts.patch_out:
        try:
            opts.patch_out.write_text(patch, encoding="utf-8")
        except OSError as exc:  # the run's result is still reported below
            warn(f"cannot write {opts.patch_out}: {exc.strerror or exc}")
    if opts.commit and patch and before and after:
        _commit(root, result, gitdiff.changed_paths(root, before, after))
    _report(opts.output_format, result, patch, trajectory, git, checked)
    return 0 if result.exit_status == "submitted" and not checked.rolled_back else 1


def _commit(root: Path, result: RunResult, paths: list[str]) -> None:
    """Commit only what the agent changed: the user's own uncommitted work stays uncommitted."""
    title = (result.final_text.strip().splitlines() or ["clover fix"])[0][:72]
    try:
        gitdiff.commit_paths(root, paths, f"{title}\n\nMade by clover fix ({result.steps} steps).")
    except RuntimeError as exc:
        warn(f"the fix was not committed: {exc}")


def _report(fmt: str, result: RunResult, patch: str, trajectory: Path, git: bool = True, checked: Any = None) -> None:
    summary = {
        "status": result.exit_status,
        "patch": patch,
        "final_text": result.final_text,
        "error": result.error,
        "steps": result.steps,
        "tokens": result.tokens,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "seconds": round(result.seconds, 3),
        "model_seconds": round(result.model_seconds, 3),
        "stats": result.stats,
        "trajectory": str(trajectory),
        "test_guard": checked.to_json() if checked is not None else None,
    }
    if fmt == "json":
        print(json.dumps(summary, indent=2))
        return
    if fmt == "stream-json":
        print(json.dumps({"type": "result", **summary}), flush=True)
        return
    if result.final_text:
        print(result.final_text.strip() + "\n")
    print(patch if patch else "(no changes)" if git else "(no diff: not a git repository)")
    line = (
        f"[{result.exit_status}] {result.steps} steps, {result.tokens} tokens, "
        f"{result.seconds:.1f} s (model {result.model_seconds:.1f} s)"
    )
    if result.error:
        line += f" - {result.error}"
    verified, held = int(result.stats.get("verified_edits", 0)), int(result.stats.get("held_edits", 0))
    if verified or held:  # the local decoder ran the issue's example against its edits (reproduce.py)
        line += f"; issue's example run: {verified} edit(s) chosen by it, {held} held back"
    print(line, file=sys.stderr)
    if checked is not None:
        print(f"test guard: {checked.note}", file=sys.stderr)
    print(f"trajectory: {trajectory}", file=sys.stderr)


def _stream_printer():
    def emit(event: StreamEvent) -> None:
        print(json.dumps({"type": event.kind, "text": event.text, "data": event.data}, default=str), flush=True)

    return emit
