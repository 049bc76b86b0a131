"""`clover bench`: block diffusion vs autoregressive decoding inside `clover fix`, on SynthFix held-out.

The engine lives in evals/bench/ (imported only when the command runs: it needs the model).
Register with `app.command("bench")(bench_command)`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

# The command's options, one alias each (as main.py's), so that its signature reads as the list of them.
ModelOpt = Annotated[
    str, typer.Option("--model", "-m", help="Checkpoint directory ('embedded': the shipped Clover).")
]
CountOpt = Annotated[int, typer.Option("--count", "-n", help="Held-out SynthFix instances.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="SynthFix seed.")]
BlockSizeOpt = Annotated[
    str,
    typer.Option(
        "--block-size",
        help="Comma-separated block sizes; 1 is the AR baseline, `model` the checkpoint's own.",
    ),
]
ThresholdOpt = Annotated[
    float, typer.Option("--threshold", help="Confidence threshold τ of the diffusion decoder.")
]
OrderOpt = Annotated[
    str,
    typer.Option(
        "--order",
        help=(
            "Which passing positions a diffusion round keeps: any, the run from the left, the "
            "draft's run a causal pass confirms (verify), or auto (the checkpoint's own)."
        ),
    ),
]
SplitOpt = Annotated[
    str,
    typer.Option(
        "--split",
        help=(
            "heldout (SynthFix), handwritten (evals/handwritten) or frozen (evals/frozen); --count "
            "caps the last two."
        ),
    ),
]
MaxStepsOpt = Annotated[int, typer.Option("--max-steps", help="Agent step limit per task.")]
MaxTokensOpt = Annotated[int, typer.Option("--max-tokens", help="Generated tokens per assistant turn.")]
TimeLimitOpt = Annotated[float, typer.Option("--time-limit", help="Seconds per task.")]
OutOpt = Annotated[
    Path, typer.Option("--out", "-o", help="Per-task JSON, summary.json and summary.md go here.")
]
WorkersOpt = Annotated[
    int, typer.Option("--workers", "-w", help="Parallel tasks (each worker loads the model).")
]
DeviceOpt = Annotated[str | None, typer.Option("--device", help="cpu, cuda, cuda:N or auto.")]
ThinkOpt = Annotated[bool, typer.Option("--think/--no-think", help="Thinking mode.")]
OracleOpt = Annotated[
    str | None,
    typer.Option("--oracle", help="gold | empty: grade that patch instead of running the agent."),
]
KeepWorkspacesOpt = Annotated[
    bool, typer.Option("--keep-workspaces", help="Keep the agents' work trees (under OUT/work).")
]
WorkDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--work-dir",
        help=(
            "Pin where the agents work (the path is in the model's prompt: pinned runs repeat "
            "exactly, one run at a time; the summary says so). Default: a fresh temporary directory, a real path."
        ),
    ),
]
GroundingOpt = Annotated[
    str,
    typer.Option(
        "--grounding",
        help="Tool values grounded in the workspace: on, off, or on,off (both, side by side).",
    ),
]
FixedTimingsOpt = Annotated[
    bool,
    typer.Option(
        "--fixed-timings",
        help=(
            "Show the agent every test run's duration as 0.01s, so a run repeats exactly (default: "
            "the real durations; the summary says which)."
        ),
    ),
]
DraftsOpt = Annotated[
    int | None,
    typer.Option(
        "--drafts",
        help="Context drafts for block decoding: n-gram length, 0 off (default: the setting's default).",
    ),
]
TestGuardOpt = Annotated[
    bool,
    typer.Option(
        "--test-guard/--no-test-guard",
        help=(
            "clover fix's test guard: the repository's tests before and after each task (default on; "
            "off for model-only figures)."
        ),
    ),
]
FusedRoundsOpt = Annotated[
    bool,
    typer.Option(
        "--fused-rounds",
        help="Verify decoding: each round's check also drafts the next round (one forward per round).",
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help=(
            "KEY=VALUE: another agent setting for every task, e.g. grounded_spans=off (repeatable; "
            "CLOVER_* variables and config files do not reach the bench)."
        ),
    ),
]


def bench_command(
    model: ModelOpt = "embedded",
    count: CountOpt = 20,
    seed: SeedOpt = 0,
    block_size: BlockSizeOpt = "model,1",
    threshold: ThresholdOpt = 0.9,
    order: OrderOpt = "auto",
    split: SplitOpt = "heldout",
    max_steps: MaxStepsOpt = 12,
    max_tokens: MaxTokensOpt = 4096,
    time_limit: TimeLimitOpt = 1800.0,
    out: OutOpt = Path("runs/bench"),
    workers: WorkersOpt = 1,
    device: DeviceOpt = None,
    think: ThinkOpt = True,
    oracle: OracleOpt = None,
    keep_workspaces: KeepWorkspacesOpt = False,
    work_dir: WorkDirOpt = None,
    grounding: GroundingOpt = "on",
    fixed_timings: FixedTimingsOpt = False,
    drafts: DraftsOpt = None,
    test_guard: TestGuardOpt = True,
    fused_rounds: FusedRoundsOpt = False,
    set_: SetOpt = None,
) -> None:
    """Run `clover fix` on SynthFix held-out with block diffusion (B=32) and with B=1 (AR), side by side."""
    from clover.cli_common import fail
    from clover.evals.bench.config import (
        BenchConfig,
        model_error_types,
        parse_block_sizes,
        parse_grounding,
        parse_settings,
    )
    from clover.evals.bench.run import run_bench
    from clover.evals.bench.stats import print_report

    try:
        cfg = BenchConfig(
            out=out,
            model=model,
            count=count,
            seed=seed,
            block_sizes=parse_block_sizes(block_size),
            threshold=threshold,
            max_steps=max_steps,
            max_tokens=max_tokens,
            time_limit=time_limit,
            workers=workers,
            device=device,
            think=think,
            mode=oracle or "agent",
            keep_workspaces=keep_workspaces,
            work_dir=work_dir,
            grounding=parse_grounding(grounding),
            order=order,
            split=split,
            stable_timings=fixed_timings,
            drafts=drafts,
            fused_rounds=fused_rounds,
            extra=parse_settings(set_ or []),
            test_guard=test_guard,
        )
        summary = run_bench(cfg, log=lambda line: typer.echo(line, err=True))
    except model_error_types() as exc:
        text = str(exc).strip()
        fail(text.splitlines()[0] if text else type(exc).__name__)
    print_report(summary)
    typer.echo(f"wrote {out / 'summary.json'} and {out / 'summary.md'}")
