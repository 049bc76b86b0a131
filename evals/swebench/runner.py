"""Batch runner: one agent per instance in worker processes, each in a clean work tree at
base_commit, with resume (finished ids skipped, errored ones redone) and atomic result files.

Output directory:
  DIR/<id>/result.json       per-instance result (exit status, runtime, steps, tokens, patch)
  DIR/<id>/<id>.traj.jsonl   the agent's trajectory as written, and <id>.traj.json converted
  DIR/preds.json, preds.jsonl, run.json
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from clover.core.model_protocol import Model
from clover.evals.swebench.dataset import Instance
from clover.evals.swebench.worker_signals import sigterm_interrupts, stop_workers, worker_signals
from clover.evals.swebench.workspace import RepoCache, extract_patch, files_of_test_patch, make_workspace
from clover.settings import Settings

# Exit statuses that mean the harness or the model server failed, not the agent: redone on resume.
RETRY_STATUSES = {"error", "model_error", "interrupted"}
# Backend stats that are ratios per turn (not summable across a run).
RATIO_STATS = ("tokens_per_forward", "tok_per_s", "rounds_per_block")

TASK = """Resolve the following issue in the repository at {root}.
Change the source so that the issue is fixed; do not modify the existing tests.

<issue>
{problem}
</issue>"""


@dataclass
class RunConfig:
    output_dir: Path
    settings: Settings
    workers: int = 1
    env: str = "local"  # local | docker
    cache_dir: str | None = None
    repo_map: dict[str, str] = field(default_factory=dict)
    online: bool = True
    work_dir: str | None = None  # where work trees go (default DIR/.work)
    keep_workspaces: bool = False
    model: Model | None = None  # a ready model (tests, scripted); else built from settings in the worker
    dataset: str = ""

    @property
    def model_name(self) -> str:
        return (self.model.name if self.model is not None else "") or self.settings.model


def write_json_atomic(path: Path, data: Any) -> None:
    """Write to a temporary file beside `path`, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def result_path(out: Path, instance_id: str) -> Path:
    return out / instance_id / "result.json"


def load_results(out: Path) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for path in sorted(out.glob("*/result.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue  # unreadable: treated as not done
        if isinstance(data, dict) and data.get("instance_id"):
            results[data["instance_id"]] = data
    return results


def is_finished(result: dict[str, Any] | None) -> bool:
    return bool(result) and result.get("exit_status") not in RETRY_STATUSES


# --------------------------------------------------------------------------- one instance (worker)


def run_instance(instance: Instance, config: RunConfig) -> dict[str, Any]:
    """Run the agent on one instance; always returns (and writes) a result, errors included."""
    from clover.runner import build_environment, run_agent

    iid = instance["instance_id"]
    inst_dir = config.output_dir / iid
    inst_dir.mkdir(parents=True, exist_ok=True)
    traj_jsonl = inst_dir / f"{iid}.traj.jsonl"
    traj_jsonl.unlink(missing_ok=True)  # a redo starts a fresh trajectory
    start = time.monotonic()
    result: dict[str, Any] = {"instance_id": iid, "model_name_or_path": config.model_name, "model_patch": ""}
    work_root = Path(config.work_dir) if config.work_dir else config.output_dir / ".work"
    workspace = work_root / iid
    env: Any = None
    try:
        if config.env == "docker":
            from clover.evals.swebench.docker_env import DockerEnvironment

            env = DockerEnvironment(
                iid,
                f"clover-{iid.replace('__', '-')}-{os.getpid()}",
                timeout=config.settings.command_timeout,
                output_limit=config.settings.output_limit,
            )
        else:
            cache = RepoCache(config.cache_dir, config.repo_map, online=config.online)
            make_workspace(instance, workspace, cache)
            env = build_environment(config.settings, workspace)
        task = TASK.format(root=env.root, problem=instance["problem_statement"].strip())
        run = run_agent(
            task,
            settings=config.settings,
            env=env,
            model=config.model,
            kind="fix",
            trajectory_path=traj_jsonl,
        )
        exclude = files_of_test_patch(instance)
        patch = (
            env.diff(exclude)
            if config.env == "docker"
            else extract_patch(workspace, instance["base_commit"], exclude)
        )
        forwards = run.stats.get("forwards", 0.0)
        # The agent sums each turn's stats: a per-turn ratio summed is meaningless, so only the
        # additive counters stay and tokens_per_forward is the one figure (this run's tokens / forwards).
        stats = {k: v for k, v in run.stats.items() if k not in RATIO_STATS}
        result.update(
            exit_status=run.exit_status,
            error=run.error,
            model_patch=patch,
            steps=run.steps,
            prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens,
            tokens=run.tokens,
            tokens_per_forward=round(run.completion_tokens / forwards, 3) if forwards else None,
            model_seconds=round(run.model_seconds, 3),
            stats=stats,
        )
    except Exception as exc:  # one instance's failure must not end the batch: record it, redo on resume
        lines = str(exc).strip().splitlines()
        result.update(
            exit_status="error",
            error=f"{type(exc).__name__}: {lines[0] if lines else ''}",
            traceback=traceback.format_exc(limit=8),
        )
    finally:
        if config.env == "docker" and env is not None:
            env.close()
        if not config.keep_workspaces:
            shutil.rmtree(workspace, ignore_errors=True)
    result["runtime"] = round(time.monotonic() - start, 3)
    result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    write_trajectory_json(inst_dir, iid, traj_jsonl, result)
    write_json_atomic(result_path(config.output_dir, iid), result)
    return result


def write_trajectory_json(inst_dir: Path, iid: str, traj_jsonl: Path, result: dict[str, Any]) -> None:
    from clover.trajectory import Trajectory

    try:
        records = Trajectory.read(traj_jsonl) if traj_jsonl.is_file() else []
    except (OSError, json.JSONDecodeError):
        records = []
    info = {k: v for k, v in result.items() if k not in ("model_patch", "instance_id", "traceback")}
    info["submission"] = result.get("model_patch", "")
    write_json_atomic(
        inst_dir / f"{iid}.traj.json",
        {"instance_id": iid, "trajectory_format": "clover-jsonl-1", "info": info, "records": records},
    )


# --------------------------------------------------------------------------- the batch (main process)


@dataclass
class BatchSummary:
    total: int
    skipped: int = 0
    done: int = 0
    errors: int = 0
    unfinished: list[str] = field(default_factory=list)
    message: str = ""
    first_error: str = ""  # e.g. a model that cannot be built fails every instance the same way


def run_batch(instances: list[Instance], config: RunConfig, *, progress: bool = True) -> BatchSummary:
    out = config.output_dir
    out.mkdir(parents=True, exist_ok=True)
    config = dataclasses.replace(
        config, settings=dataclasses.replace(config.settings, mode="yolo", live=False)
    )
    previous = load_results(out)
    todo = [i for i in instances if not is_finished(previous.get(i["instance_id"]))]
    summary = BatchSummary(total=len(instances), skipped=len(instances) - len(todo))
    started = time.strftime("%Y-%m-%dT%H:%M:%S")
    write_outputs(out, config, started)
    if not todo:
        summary.message = "nothing to do: every instance has a result"
        return summary
    bar = _Bar(len(todo), config.workers, enabled=progress)
    pending: dict[Future, str] = {}
    queue = list(todo)  # submitted one per free worker: nothing sits queued when Ctrl-C comes
    pool = ProcessPoolExecutor(
        max_workers=config.workers, mp_context=get_context("spawn"), initializer=worker_signals
    )
    broken = False
    restore = sigterm_interrupts()

    def submit_next() -> None:
        nonlocal broken
        try:
            fut = pool.submit(run_instance, queue[0], config)
        except (BrokenProcessPool, RuntimeError):  # the pool broke: the rest stays queued (unfinished)
            broken = True
            return
        pending[fut] = queue.pop(0)["instance_id"]

    try:
        with bar:
            for _ in range(min(config.workers, len(queue))):
                submit_next()
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    iid = pending.pop(fut)
                    try:
                        result = fut.result()
                    except (BrokenProcessPool, KeyboardInterrupt):  # a worker died or was interrupted
                        summary.unfinished.append(iid)
                        broken = True
                        continue
                    failed = result.get("exit_status") in RETRY_STATUSES
                    if failed and not summary.first_error:
                        summary.first_error = f"{iid}: {result.get('error', '')}"
                    summary.done += 1
                    summary.errors += failed
                    bar.advance(failed, len(pending) + len(queue))
                    if queue and not broken:
                        submit_next()
                write_outputs(out, config, started)
        pool.shutdown(wait=True)
    except KeyboardInterrupt:
        # Ctrl-C reaches the workers too; SIGTERM reaches only this process, so it is passed on.
        # Running instances record "interrupted" and remove their work trees; queued ones never
        # start; a worker that does not stop within worker_signals.STOP_GRACE is killed: none outlives the run.
        stop_workers(pool)
        summary.unfinished.extend(pending.values())
        summary.message = "interrupted: run the same command again to resume"
    finally:
        restore()
        summary.unfinished.extend(i["instance_id"] for i in queue)
        write_outputs(out, config, started)
    if summary.unfinished and not summary.message:
        summary.message = (
            f"a worker process died; {len(summary.unfinished)} instance(s) unfinished: "
            "run the same command again to resume"
        )
    return summary


def write_outputs(out: Path, config: RunConfig, started: str) -> None:
    """preds.json / preds.jsonl / run.json from the per-instance result files on disk. An
    interrupted instance has no prediction (its patch is whatever the agent had half done)."""
    results = load_results(out)
    preds = {
        iid: {
            "instance_id": iid,
            "model_name_or_path": r.get("model_name_or_path", config.model_name),
            "model_patch": r.get("model_patch", ""),
        }
        for iid, r in results.items()
        if r.get("exit_status") != "interrupted"
    }
    write_json_atomic(out / "preds.json", preds)
    write_text_atomic(
        out / "preds.jsonl", "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in preds.values())
    )
    per = {
        iid: {k: v for k, v in r.items() if k not in ("model_patch", "traceback", "instance_id")}
        for iid, r in results.items()
    }
    s = config.settings
    write_json_atomic(
        out / "run.json",
        {
            "model": config.model_name,
            "dataset": config.dataset,
            "env": config.env,
            "workers": config.workers,
            "limits": {"max_steps": s.max_steps, "time_limit": s.time_limit, "token_limit": s.token_limit},
            "started": started,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "totals": totals(results),
            "instances": per,
        },
    )


def totals(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    vals = list(results.values())
    statuses: dict[str, int] = {}
    for r in vals:
        statuses[r.get("exit_status", "?")] = statuses.get(r.get("exit_status", "?"), 0) + 1
    return {
        "instances": len(vals),
        "errors": sum(r.get("exit_status") in RETRY_STATUSES for r in vals),
        "with_patch": sum(bool(r.get("model_patch")) for r in vals),
        "exit_statuses": statuses,
        "runtime": round(sum(r.get("runtime", 0.0) for r in vals), 3),
        "steps": sum(r.get("steps", 0) for r in vals),
        "tokens": sum(r.get("tokens", 0) for r in vals),
    }


class _Bar:
    """A rich progress bar with running / done / errors counts (silent when disabled)."""

    def __init__(self, total: int, workers: int, enabled: bool) -> None:
        self.enabled, self.workers, self.done, self.errors = enabled, workers, 0, 0
        self.progress = None
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(
                TextColumn("swebench"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[counts]}"),
                TimeElapsedColumn(),
            )
            self.task = self.progress.add_task("run", total=total, counts=self._counts(min(workers, total)))

    def _counts(self, running: int) -> str:
        return f"running {running}  done {self.done}  errors {self.errors}"

    def advance(self, failed: bool, remaining: int) -> None:
        self.done += 1
        self.errors += bool(failed)
        if self.progress is not None:
            self.progress.update(self.task, advance=1, counts=self._counts(min(self.workers, remaining)))

    def __enter__(self) -> _Bar:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
