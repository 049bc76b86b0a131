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

import dataclasses
import json
import shutil
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from clover.evals.bench.config import BenchConfig, BenchError, resolve_model_defaults
from clover.evals.bench.stats import Decoder, summarize, write_markdown
from clover.evals.bench.task import TaskRunner
from clover.evals.bench.workspace import WorkDirBusy, fresh_work_dir, hold

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
    from clover.evals.synthfix import write_jsonl

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
    rows = _instances(cfg)
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
                _run_in_pool(cfg, work_dir, jobs, done)
    except WorkDirBusy as busy:
        raise BenchError(
            f"another clover bench is working in {busy}; wait for it, or run beside it with "
            "--work-dir DIR (results then compare only with runs from that directory)"
        ) from None
    finally:
        if not pinned:
            shutil.rmtree(work_dir, ignore_errors=True)
    return _write_summary(cfg, records, rows, started)


def _instances(cfg: BenchConfig) -> list[dict]:
    """The run's instances, materialised under OUT/instances: the split's generated or stored ones."""
    if cfg.split == "handwritten":  # the hand-written set (evals/handwritten), never used for training
        from clover.evals.handwritten import materialize

        return materialize(cfg.out / "instances", cfg.count)
    if cfg.split == "frozen":  # the frozen set (evals/frozen): never trained or tuned on, only reported
        from clover.evals.frozen import materialize as materialize_frozen

        return materialize_frozen(cfg.out / "instances", cfg.count)
    from clover.evals.synthfix import generate

    return generate(cfg.out / "instances", cfg.split, cfg.count, cfg.seed)


def _run_in_pool(
    cfg: BenchConfig,
    work_dir: Path,
    jobs: list[tuple[dict, Decoder]],
    done: Callable[[dict[str, Any]], None],
) -> None:
    """The jobs in `cfg.workers` processes, each with its own model; `done` sees each record in job order."""
    ctx = get_context("spawn")  # torch and fork do not mix
    with ProcessPoolExecutor(
        cfg.workers,
        mp_context=ctx,
        initializer=_init_worker,
        initargs=(dataclasses.replace(cfg, work_dir=work_dir),),
    ) as pool:
        # one task's decoders far apart: its workspace serves one job at a time
        n = len(cfg.decoders())
        futures = [pool.submit(_run_in_worker, *jobs[i]) for k in range(n) for i in range(k, len(jobs), n)]
        for fut in futures:
            done(fut.result())


def _write_summary(
    cfg: BenchConfig, records: list[dict[str, Any]], rows: list[dict], started: float
) -> dict[str, Any]:
    """The run's summary (its wall time counted from `started`), written as OUT/summary.json and
    OUT/summary.md; returns it."""
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
