"""One `clover bench` task: an (instance, decoder) job run in a fresh clone of the instance repo, by
the agent or an oracle patch, then graded in another clone."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from clover.evals.bench.config import BenchConfig
from clover.evals.bench.stats import Decoder, trajectory_stats
from clover.evals.bench.workspace import fresh_work_dir, task_workspace
from clover.evals.grading import fresh_clone, grade  # one grader core (also SynthFix, SWE-bench)


class TaskRunner:
    """Runs (instance, decoder) jobs in this process; the model is loaded once and shared by every
    decoder (a shallow copy per decoder, only the decode settings differ)."""

    def __init__(self, cfg: BenchConfig, model: Any = None) -> None:
        self.cfg, self._base, self._models = cfg, model, {}
        self.work_dir = cfg.work_dir  # run_bench sets it (a fresh directory unless one is pinned)

    def model_for(self, decoder: Decoder):
        if decoder.key not in self._models:
            settings = self.cfg.settings(decoder)
            if self._base is None:
                from clover.runner import build_model

                self._base = build_model(settings)
            model = copy.copy(self._base)
            if model.settings is not None:
                model.settings = settings
            self._models[decoder.key] = model
        return self._models[decoder.key]

    def run(self, row: dict, decoder: Decoder) -> dict[str, Any]:
        cfg = self.cfg
        iid = row["instance_id"]
        task_dir = cfg.out / "tasks" / decoder.key
        task_dir.mkdir(parents=True, exist_ok=True)
        traj = task_dir / f"{iid}.traj.jsonl"
        traj.unlink(missing_ok=True)
        model = self.model_for(decoder) if cfg.mode == "agent" else None  # loaded before the clock
        record: dict[str, Any] = {
            "instance_id": iid,
            "family": row.get("family", ""),
            **decoder.describe(),
            "exit_status": "error",
            "error": "",
            "patch": "",
            **trajectory_stats([]),
        }
        if self.work_dir is None:
            self.work_dir = fresh_work_dir()
        with task_workspace(self.work_dir, iid) as ws:
            record = self._in_workspace(row, decoder, model, ws, traj, record)
        (task_dir / f"{iid}.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
        return record

    def _in_workspace(
        self, row: dict, decoder: Decoder, model: Any, ws: Path, traj: Path, record: dict[str, Any]
    ) -> dict[str, Any]:
        cfg = self.cfg
        start = time.perf_counter()
        try:
            fresh_clone(row["repo"], row["base_commit"], ws)
            start = time.perf_counter()
            if cfg.mode == "agent":
                record.update(self._agent(row, decoder, model, ws, traj))
            else:
                record.update(exit_status=cfg.mode, patch=row["patch"] if cfg.mode == "gold" else "")
            record["seconds"] = time.perf_counter() - start
            record["grade"] = grade(row, record["patch"], cfg.test_timeout)
        except (
            OSError,
            RuntimeError,
            subprocess.SubprocessError,
        ) as exc:  # counted as unresolved, run goes on
            record["error"] = f"harness error: {type(exc).__name__}: {exc}"
            record.setdefault("seconds", time.perf_counter() - start)
            record["grade"] = {"resolved": False, "patch_applied": False, "error": record["error"]}
        finally:
            if cfg.keep_workspaces and ws.exists():  # kept where the run's other files are
                kept = cfg.out / "work" / decoder.key / ws.name
                shutil.rmtree(kept, ignore_errors=True)
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(ws, kept)
            shutil.rmtree(ws, ignore_errors=True)
        record["resolved"] = record["grade"]["resolved"]
        return record

    def _agent(self, row: dict, decoder: Decoder, model: Any, ws: Path, traj: Path) -> dict[str, Any]:
        from clover import gitdiff
        from clover.runner import build_environment, run_agent
        from clover.test_guard import start_guard
        from clover.trajectory import Trajectory

        settings = self.cfg.settings(decoder)
        before = gitdiff.worktree_tree(ws)
        env = build_environment(settings, ws)
        if self.cfg.stable_timings:
            from clover.evals.bench.stable import StableTimings

            env = StableTimings(env)
        guard = start_guard(
            env, model, lambda command: self.cfg.test_guard
        )  # `clover fix`'s; the bench runs yolo
        result = run_agent(
            row["problem_statement"],
            settings=settings,
            env=env,
            model=model,
            kind="fix",
            trajectory_path=traj,
        )
        patch = gitdiff.diff_trees(ws, before, gitdiff.worktree_tree(ws))
        checked = guard.finish(ws, patch)
        if checked.rolled_back:
            patch = ""
        out = {
            "exit_status": result.exit_status,
            "error": result.error,
            "patch": patch,
            "agent_seconds": result.seconds,
            "model_seconds": result.model_seconds,
            "test_guard": checked.to_json(),
            "undefined_names": undefined_names_added(ws, patch),
        }
        out.update(trajectory_stats(Trajectory.read(traj)))
        out["trajectory"] = str(traj)
        return out


def undefined_names_added(ws: Path, patch: str) -> list[str]:
    """`path: name` for each name a changed Python file uses, undefined, that its base commit did not."""
    from clover.evals.grading import git
    from clover.tools.pynames import newly_undefined

    found = []
    for path in dict.fromkeys(re.findall(r"^diff --git a/(\S+\.py) b/", patch, re.M)):
        old = git(ws, "show", f"HEAD:{path}", check=False).stdout
        new = (ws / path).read_text(encoding="utf-8", errors="replace") if (ws / path).is_file() else ""
        found += [f"{path}: {name}" for name in newly_undefined(path, old, new)]
    return found
