"""Block diffusion vs autoregressive decoding inside the real agent: `clover fix` on SynthFix held-out.

    clover bench [--model DIR] [--count 20] [--block-size 32,1] [--out DIR]

For each held-out instance and each decoder (B = 32 with threshold τ, and B = 1, the AR baseline, on
the same weights) the agent runs headless (yolo) in a fresh clone of the instance repo at
base_commit, with the real tools. Its diff is graded in another fresh clone: the test files the
test_patch touches are reset, test_patch is applied, pytest runs; resolved = every FAIL_TO_PASS and
PASS_TO_PASS test passes. Decoders alternate per task (A,B then B,A) so warm-up and machine load
fall on both alike. `--oracle gold|empty` replaces the agent by the gold / an empty patch: it checks
the grading itself, no model is loaded.

Output: DIR/instances/ (repos + instances.jsonl), DIR/tasks/<decoder>/<id>.json (+ .traj.jsonl),
DIR/summary.json and DIR/summary.md. The agents work in WORK_DIR/<id> (workspace.py: a fresh
temporary directory unless --work-dir pins one) and see the test runs' real durations unless
--fixed-timings asks otherwise; the summary's `labels` say which.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from clover.evals.bench.stats import Decoder, summarize, trajectory_stats, write_markdown
from clover.evals.bench.workspace import WorkDirBusy, fresh_work_dir, hold, pinned_work_dir, task_workspace
from clover.evals.grading import fresh_clone, grade  # one grader core (also SynthFix, SWE-bench)
from clover.model.config import CloverConfig
from clover.settings import DECODE_ORDERS

MODES = ("agent", "gold", "empty")
SPLITS = ("heldout", "handwritten", "frozen")


class BenchError(Exception):
    """A bad option or an unusable model; the message is one line for the user."""


@dataclass
class BenchConfig:
    out: Path
    model: str = "embedded"
    count: int = 20
    seed: int = 0
    block_sizes: list[int] = field(default_factory=lambda: [0, 1])  # 0: the checkpoint's own
    threshold: float = 0.9
    max_steps: int = 12
    max_tokens: int = 4096  # per assistant turn
    time_limit: float = 1800.0  # per task
    workers: int = 1
    device: str | None = None
    think: bool = True
    mode: str = "agent"  # agent | gold | empty
    test_timeout: float = 120.0
    split: str = "heldout"
    keep_workspaces: bool = False
    work_dir: Path | None = None  # where the agents work (workspace.py); None: a fresh temporary directory
    grounding: list[bool] = field(default_factory=lambda: [True])  # grounded tool values; [True, False]: both
    order: str = "auto"  # decode_order of the diffusion decoders; auto: the checkpoint's own
    drafts: int | None = None  # the drafts setting (context drafts' n-gram length, 0 off); None: the default
    stable_timings: bool = False  # test durations in command output written as a fixed one (stable.py)
    fused_rounds: bool = False  # verify decoders: one forward per round (model/verify.py)
    test_guard: bool = True  # `clover fix`'s test guard (test_guard.py); off: the model's change as it is
    extra: dict[str, str] = field(default_factory=dict)  # --set KEY=VALUE: further agent settings

    def __post_init__(self) -> None:
        # Work trees are cloned and graded with other working directories: a relative --out
        # (the default, runs/bench) made every task a "harness error".
        self.out = Path(self.out).absolute()
        self.work_dir = Path(self.work_dir).absolute() if self.work_dir else pinned_work_dir()

    def labels(self) -> dict[str, str]:
        """How the figures were taken, for the summary: real timings and paths, or fixed ones."""
        return {
            "timings": "fixed (stable.py: every duration 0.01s)" if self.stable_timings else "real",
            "work_dir": f"pinned: {self.work_dir}"
            if self.work_dir
            else "fresh temporary directory (real paths)",
            "test_guard": "on (a change breaking a passing test is reported; the embedded model's rolled back)"
            if self.test_guard
            else "off",
        }

    def decoders(self) -> list[Decoder]:
        return [Decoder(b, self.threshold, g, self.order) for g in self.grounding for b in self.block_sizes]

    def settings(self, decoder: Decoder):
        """The agent's settings for one decoder: `clover fix --yes` with this block size."""
        from clover.settings import Settings, SettingsError

        values = {
            "model": self.model,
            "mode": "yolo",
            "max_steps": self.max_steps,
            "max_tokens": self.max_tokens,
            "time_limit": self.time_limit,
            "block_size": decoder.block_size,
            "threshold": decoder.threshold,
            "decode_order": decoder.order,
            "think": self.think,
            "device": self.device,
            "temperature": 0.0,
            "grounded": decoder.grounded,
            "checkpoints": False,  # undo snapshots would fill ~/.cache for throwaway clones
            "drafts": self.drafts,  # None: the setting's default
            "fused_rounds": self.fused_rounds,
        }
        # a key the bench set from one of its options (None: left to the setting's default, so
        # `clover bench`, which has no --drafts, can still take `--set drafts=0`)
        owned = sorted(k for k in self.extra if values.get(k) is not None)
        if owned:
            raise BenchError(f"--set {owned[0]}: the bench sets it (use its own option)")
        try:
            return Settings().merged({**values, **self.extra}, "bench --set")
        except SettingsError as exc:
            raise BenchError(str(exc)) from None

    def validate(self) -> None:
        if self.mode not in MODES:
            raise BenchError(f"--oracle must be gold or empty, not {self.mode!r}")
        for name in ("count", "max_steps", "max_tokens", "workers"):
            if getattr(self, name) < 1:
                raise BenchError(f"--{name.replace('_', '-')} must be >= 1")
        if not self.block_sizes or any(b < 1 for b in self.block_sizes):
            raise BenchError("--block-size needs block sizes >= 1, e.g. 32,1")
        if len(set(self.block_sizes)) != len(self.block_sizes):
            raise BenchError("--block-size lists a block size twice")
        if not 0.0 <= self.threshold <= 1.0:
            raise BenchError("--threshold must be between 0 and 1")
        if self.split not in SPLITS:
            raise BenchError(f"--split must be one of {', '.join(SPLITS)}")
        if self.order not in DECODE_ORDERS:
            raise BenchError(f"--order must be one of {', '.join(DECODE_ORDERS)}")
        if not self.grounding or len(set(self.grounding)) != len(self.grounding):
            raise BenchError("--grounding takes on, off or on,off")
        for d in self.decoders():
            self.settings(d)


# --------------------------------------------------------------------------- one task


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
            if hasattr(model, "settings"):
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


# --------------------------------------------------------------------------- the whole run

_worker: TaskRunner | None = None


def _init_worker(cfg: BenchConfig) -> None:
    global _worker
    _worker = TaskRunner(cfg)
    _worker.model_for(cfg.decoders()[0])  # load once per worker, before any task's clock starts


def _run_in_worker(row: dict, decoder: Decoder) -> dict[str, Any]:
    assert _worker is not None
    return _worker.run(row, decoder)


def schedule(rows: list[dict], decoders: list[Decoder]) -> list[tuple[dict, Decoder]]:
    """Every task under every decoder; the decoder order flips from one task to the next."""
    jobs = []
    for i, row in enumerate(rows):
        order = decoders if i % 2 == 0 else decoders[::-1]
        jobs += [(row, d) for d in order]
    return jobs


def run_bench(cfg: BenchConfig, model: Any = None, log=print) -> dict[str, Any]:
    """Generate the instances, run every job, write the per-task files and the summary; returns it."""
    from clover.evals.synthfix import generate, write_jsonl

    resolve_model_defaults(cfg)
    cfg.validate()
    started = time.perf_counter()
    runner = TaskRunner(cfg, model)
    in_process = cfg.workers == 1 or cfg.mode != "agent"
    if cfg.mode == "agent":  # a missing or broken checkpoint fails before any work
        if in_process:
            runner.model_for(cfg.decoders()[0])
        elif not cfg.model.startswith("scripted:"):
            from clover.backends.local import checkpoint_dir

            checkpoint_dir(cfg.model)
    cfg.out.mkdir(parents=True, exist_ok=True)
    if cfg.split == "handwritten":  # the hand-written set (evals/handwritten), never used for training
        from clover.evals.handwritten import materialize

        rows = materialize(cfg.out / "instances", cfg.count)
    elif cfg.split == "frozen":  # the frozen set (evals/frozen): never trained or tuned on, only reported
        from clover.evals.frozen import materialize as materialize_frozen

        rows = materialize_frozen(cfg.out / "instances", cfg.count)
    else:
        rows = generate(cfg.out / "instances", cfg.split, cfg.count, cfg.seed)
    write_jsonl(rows, cfg.out / "instances" / "instances.jsonl")
    jobs = schedule(rows, cfg.decoders())
    records: list[dict[str, Any]] = []

    def done(rec: dict[str, Any]) -> None:
        records.append(rec)
        log(
            f"[{len(records)}/{len(jobs)}] {rec['decoder']:<14} {rec['instance_id']}: "
            f"{'resolved' if rec['resolved'] else 'unresolved'} ({rec['exit_status']}, {rec['steps']} steps, "
            f"{rec['seconds']:.1f} s)"
        )

    pinned = cfg.work_dir is not None
    work_dir = cfg.work_dir or fresh_work_dir()
    runner.work_dir = work_dir
    try:
        with hold(work_dir):
            if in_process:
                for row, decoder in jobs:
                    done(runner.run(row, decoder))
            else:
                ctx = get_context("spawn")  # torch and fork do not mix
                with ProcessPoolExecutor(
                    cfg.workers,
                    mp_context=ctx,
                    initializer=_init_worker,
                    initargs=(dataclasses.replace(cfg, work_dir=work_dir),),
                ) as pool:
                    # one task's decoders far apart: its workspace serves one job at a time
                    n = len(cfg.decoders())
                    futures = [
                        pool.submit(_run_in_worker, *jobs[i])
                        for k in range(n)
                        for i in range(k, len(jobs), n)
                    ]
                    for fut in futures:
                        done(fut.result())
    except WorkDirBusy as busy:
        raise BenchError(
            f"another clover bench is working in {busy}; wait for it, or run beside it with "
            "--work-dir DIR (results then compare only with runs from that directory)"
        ) from None
    finally:
        if not pinned:
            shutil.rmtree(work_dir, ignore_errors=True)
    summary = summarize(records, cfg.decoders())
    summary["labels"] = cfg.labels()
    summary["config"] = {
        k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(cfg).items()
    }
    summary["instances"] = [r["instance_id"] for r in rows]
    summary["wall_seconds"] = time.perf_counter() - started
    (cfg.out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    write_markdown(summary, cfg.out / "summary.md")
    return summary


def parse_block_sizes(text: str) -> list[int]:
    """`model,1` -> [0, 1]: 0 stands for the checkpoint's own block size (resolve_model_defaults)."""
    parts = [x for x in text.replace(" ", "").split(",") if x]
    sizes = [0 if x == "model" else int(x) if x.isdigit() and int(x) >= 1 else -1 for x in parts]
    if not sizes or -1 in sizes:
        raise BenchError(
            f"--block-size takes block sizes >= 1 or `model`, like model,1 or 32,1, not {text!r}"
        )
    return sizes


def resolve_model_defaults(cfg: BenchConfig) -> None:
    """Block size 0 and order `auto` become the checkpoint's own (its config.json decode_block_size,
    else block_size, and decode_order: what `clover fix` decodes with by default), so every row
    names what it ran."""
    if 0 not in cfg.block_sizes and cfg.order != "auto":
        return
    model_config = CloverConfig()  # a scripted model: the config's defaults
    if cfg.mode == "agent" and not cfg.model.startswith("scripted:"):
        from clover.backends.local import checkpoint_dir
        from clover.core.protocols import ModelError

        try:  # as the loader reads it (an autoregressive Hugging Face checkpoint has block size 1)
            model_config = CloverConfig.load(checkpoint_dir(cfg.model) / "config.json")
        except (OSError, ValueError, ModelError) as exc:
            raise BenchError(f"cannot read the checkpoint's config.json: {exc}") from None
    block, order = model_config.default_block(), model_config.decode_order
    # `model,1` on a checkpoint whose own default is B = 1 is one decoder, not a repeated one
    cfg.block_sizes = list(dict.fromkeys(b or block for b in cfg.block_sizes))
    if cfg.order == "auto":
        cfg.order = order


def parse_grounding(text: str) -> list[bool]:
    """`on`, `off` or `on,off` (both, side by side) -> the grounded flags."""
    flags = {"on": True, "off": False}
    parts = [x.strip().lower() for x in text.split(",") if x.strip()]
    if not parts or any(p not in flags for p in parts):
        raise BenchError(f"--grounding takes on, off or on,off, not {text!r}")
    return [flags[p] for p in parts]


def parse_settings(pairs: list[str]) -> dict[str, str]:
    """`KEY=VALUE` options -> {key: value}; the values are checked as settings later."""
    extra: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BenchError(f"--set takes KEY=VALUE (a setting, e.g. grounded_spans=off), not {pair!r}")
        extra[key.strip().replace("-", "_")] = value.strip()
    return extra


def model_error_types() -> tuple[type[BaseException], ...]:
    from clover.core.protocols import ModelError

    return (BenchError, ModelError, OSError, RuntimeError)


def main(argv: list[str] | None = None) -> int:
    """`python -m clover.evals.bench`: `clover bench` itself (one option parser, the same options,
    defaults and one-line errors); the exit code is returned."""
    import typer

    from clover.bench import bench_command

    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command()(bench_command)
    try:
        app(args=argv, prog_name="python -m clover.evals.bench")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
