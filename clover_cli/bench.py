"""`clover bench`: block diffusion vs autoregressive decoding inside `clover fix`, on SynthFix held-out.

The engine lives in evals/bench/ (imported only when the command runs: it needs the model).
Register with `app.command("bench")(bench_command)`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def bench_command(
    model: Annotated[
        str, typer.Option("--model", "-m", help="Checkpoint directory ('embedded': the shipped Clover).")
    ] = "embedded",
    count: Annotated[int, typer.Option("--count", "-n", help="Held-out SynthFix instances.")] = 20,
    seed: Annotated[int, typer.Option("--seed", help="SynthFix seed.")] = 0,
    block_size: Annotated[
        str,
        typer.Option(
            "--block-size",
            help="Comma-separated block sizes; 1 is the AR baseline, `model` the checkpoint's own.",
        ),
    ] = "model,1",
    threshold: Annotated[
        float, typer.Option("--threshold", help="Confidence threshold τ of the diffusion decoder.")
    ] = 0.9,
    order: Annotated[
        str,
        typer.Option(
            "--order",
            help=(
                "Which passing positions a diffusion round keeps: any, the run from the left, the "
                "draft's run a causal pass confirms (verify), or auto (the checkpoint's own)."
            ),
        ),
    ] = "auto",
    split: Annotated[
        str,
        typer.Option(
            "--split",
            help=(
                "heldout (SynthFix), handwritten (evals/handwritten) or frozen (evals/frozen); --count "
                "caps the last two."
            ),
        ),
    ] = "heldout",
    max_steps: Annotated[int, typer.Option("--max-steps", help="Agent step limit per task.")] = 12,
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", help="Generated tokens per assistant turn.")
    ] = 4096,
    time_limit: Annotated[float, typer.Option("--time-limit", help="Seconds per task.")] = 1800.0,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Per-task JSON, summary.json and summary.md go here.")
    ] = Path("runs/bench"),
    workers: Annotated[
        int, typer.Option("--workers", "-w", help="Parallel tasks (each worker loads the model).")
    ] = 1,
    device: Annotated[str | None, typer.Option("--device", help="cpu, cuda, cuda:N or auto.")] = None,
    think: Annotated[bool, typer.Option("--think/--no-think", help="Thinking mode.")] = True,
    oracle: Annotated[
        str | None,
        typer.Option("--oracle", help="gold | empty: grade that patch instead of running the agent."),
    ] = None,
    keep_workspaces: Annotated[
        bool, typer.Option("--keep-workspaces", help="Keep the agents' work trees (under OUT/work).")
    ] = False,
    work_dir: Annotated[
        Path | None,
        typer.Option(
            "--work-dir",
            help=(
                "Pin where the agents work (the path is in the model's prompt: pinned runs repeat "
                "exactly, one run at a time; the summary says so). Default: a fresh temporary directory, a real path."
            ),
        ),
    ] = None,
    grounding: Annotated[
        str,
        typer.Option(
            "--grounding",
            help="Tool values grounded in the workspace: on, off, or on,off (both, side by side).",
        ),
    ] = "on",
    fixed_timings: Annotated[
        bool,
        typer.Option(
            "--fixed-timings",
            help=(
                "Show the agent every test run's duration as 0.01s, so a run repeats exactly (default: "
                "the real durations; the summary says which)."
            ),
        ),
    ] = False,
    drafts: Annotated[
        int | None,
        typer.Option(
            "--drafts",
            help="Context drafts for block decoding: n-gram length, 0 off (default: the setting's default).",
        ),
    ] = None,
    test_guard: Annotated[
        bool,
        typer.Option(
            "--test-guard/--no-test-guard",
            help=(
                "clover fix's test guard: the repository's tests before and after each task (default on; "
                "off for model-only figures)."
            ),
        ),
    ] = True,
    fused_rounds: Annotated[
        bool,
        typer.Option(
            "--fused-rounds",
            help="Verify decoding: each round's check also drafts the next round (one forward per round).",
        ),
    ] = False,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help=(
                "KEY=VALUE: another agent setting for every task, e.g. grounded_spans=off (repeatable; "
                "CLOVER_* variables and config files do not reach the bench)."
            ),
        ),
    ] = None,
) -> None:
    """Run `clover fix` on SynthFix held-out with block diffusion (B=32) and with B=1 (AR), side by side."""
    from clover.cli_common import fail
    from clover.evals.bench.run import (
        BenchConfig,
        model_error_types,
        parse_block_sizes,
        parse_grounding,
        parse_settings,
        run_bench,
    )
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
