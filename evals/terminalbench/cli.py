"""`clover eval terminalbench`: run Terminal-Bench task directories on this machine (no Docker: each
task in a local container, see container.py).

For Harbor itself (Docker or cloud sandboxes, the published datasets) see README.md beside this
file: `harbor run -a clover.evals.terminalbench.harbor_agent:CloverAgent ...`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from clover.cli_common import fail

if TYPE_CHECKING:
    from clover.settings import Settings

terminalbench_app = typer.Typer(
    help="Terminal-Bench task directories (Harbor or TB1 format), run locally without Docker.",
    invoke_without_command=True,
)


def model_factory_for(settings):
    """One fresh model per task. `scripted:DIR` replays DIR/<task id>.json for each task."""
    from clover.runner import build_model

    spec = settings.model
    if spec.startswith("scripted:") and Path(spec[len("scripted:") :]).expanduser().is_dir():
        directory = Path(spec[len("scripted:") :]).expanduser()

        def per_task(task):
            from clover.backends.scripted import ScriptedModel

            return ScriptedModel(directory / f"{task.id}.json")

        return per_task
    build_model(settings)  # fail early, once, on a bad model or server
    one: Settings = settings
    return lambda task: build_model(one)


@terminalbench_app.callback()
def run(
    tasks_dir: Path = typer.Option(..., "--tasks", help="A task directory, or a directory of them."),
    task_ids: Optional[list[str]] = typer.Option(None, "--task", help="Task id to run (repeatable)."),
    concurrency: int = typer.Option(1, "-n", "--concurrency", min=1, help="Tasks run in parallel."),
    oracle: bool = typer.Option(False, "--oracle", help="Run solution/solve.sh instead of the agent."),
    model: Optional[str] = typer.Option(
        None, "--model", help="Model name, checkpoint dir or scripted:FILE|DIR."
    ),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible server."),
    max_steps: Optional[int] = typer.Option(None, "--max-steps"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Results directory."),
    keep: bool = typer.Option(
        False, "--keep", help="Keep each task's container state (OUTPUT/<task>/container)."
    ),
    timeout_multiplier: float = typer.Option(
        1.0,
        "--timeout-multiplier",
        min=0.1,
        help="Scale every task's build, agent and test timeouts (as Harbor's): for a slow or shared machine.",
    ),
    image: Optional[str] = typer.Option(
        None,
        "--image",
        envvar="CLOVER_TBENCH_IMAGE",
        help="Run every task on this image instead of its FROM; 'host': this machine's own system (no "
        "root to build; faster, less faithful).",
    ),
    install_prereqs: bool = typer.Option(
        False,
        "--install-prereqs",
        help="Install the missing system packages first (apt-get, as root), then run.",
    ),
) -> None:
    """Run each task: build its directory, run the agent (or the oracle), run the tests, score.

    Exit status: 0 every task judged (passed or failed); 1 none judged, or an environment error;
    2 bad input or a missing prerequisite (all listed at once); 3 some tasks could not be judged
    here (cannot judge, needs the internet, skipped)."""
    tasks, settings, factory = _load(tasks_dir, task_ids, oracle, model, base_url, max_steps)
    ensure_prerequisites(tasks, image, install_prereqs)
    out = output or Path("clover-terminalbench") / time.strftime("%Y%m%d-%H%M%S")
    results = _run_with_progress(
        tasks,
        settings=settings,
        model_factory=factory,
        out_dir=out,
        workers=concurrency,
        keep=keep,
        image=image,
        timeout_multiplier=timeout_multiplier,
    )
    raise typer.Exit(run_exit_code(_report(results, out)))


def _load(
    tasks_dir: Path,
    task_ids: list[str] | None,
    oracle: bool,
    model: str | None,
    base_url: str | None,
    max_steps: int | None,
) -> tuple[list, Settings, Callable | None]:
    """(tasks, settings, model factory: None for the oracle); a bad task, setting or model fails here,
    before any work."""
    from clover.cli_common import settings_or_exit
    from clover.core.stops import ModelError
    from clover.evals.terminalbench.tasks import TaskError, find_tasks
    from clover.settings import SettingsError

    try:
        tasks = find_tasks(tasks_dir, [i for v in task_ids or [] for i in v.replace(",", " ").split()])
        settings = settings_or_exit(
            Path.cwd(), {"model": model, "base_url": base_url, "max_steps": max_steps}, mode="yolo"
        )
        settings = dataclasses.replace(settings, mode="yolo", sandbox=False, live=False, checkpoints=False)
        factory = None if oracle else model_factory_for(settings)
    except (TaskError, SettingsError, ModelError) as exc:
        fail(str(exc))
    return tasks, settings, factory


def _run_with_progress(tasks: list, *, image: str | None, **run_options: Any) -> list:
    """run_tasks with a progress bar on stderr and a line per finished task."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from clover.evals.terminalbench.launch import Launch
    from clover.evals.terminalbench.local_runner import run_tasks

    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("terminal-bench", total=len(tasks))

        def done(result) -> None:
            progress.advance(bar)
            progress.console.print(
                f"  {result.id}: {result.status}" + (f" ({result.reason})" if result.reason else "")
            )

        return run_tasks(tasks, launch=Launch(image=image), on_done=done, **run_options)


def _report(results: list, out: Path) -> dict:
    """The results' table and summary line; returns the summary."""
    from rich.console import Console
    from rich.table import Table

    from clover.evals.terminalbench.local_runner import summarize

    table = Table("task", "status", "reward", "seconds", "steps", "tokens", "note")
    for r in results:
        table.add_row(
            r.id,
            r.status,
            "" if r.reward is None else f"{r.reward:g}",
            f"{r.seconds:.1f}",
            str(r.steps),
            str(r.tokens),
            r.reason[:80],
        )
    Console().print(table)
    summary = summarize(results)
    typer.echo(
        f"passed {summary['passed']}/{summary['judged']} judged ({100 * summary['pass_rate']:.1f}%), "
        f"failed {summary['failed']}; not judged: errors {summary['errors']}, cannot judge here "
        f"{summary['cannot_judge']}, needs the internet {summary['needs_internet']}, skipped {summary['skipped']}; "
        f"{summary['steps']} steps, {summary['tokens']} tokens, {summary['seconds']:.1f} s; "
        f"results in {out / 'results.json'}"
    )
    return summary


def run_exit_code(summary: dict) -> int:
    """0: every task judged; 1: none judged, or an environment error; 3: some not judged here."""
    if summary["judged"] == 0 or summary["errors"]:
        return 1
    return 3 if summary["judged"] < summary["tasks"] else 0


def ensure_prerequisites(tasks, image: str | None, install: bool) -> None:
    """Every prerequisite checked once, before any task: all that is missing listed at once (exit 2),
    or, with `install`, the missing packages installed first."""
    from clover.evals.terminalbench import prereqs

    missing = prereqs.check(tasks, image)
    if missing and install and prereqs.install_command(missing):
        typer.echo(f"installing: {prereqs.install_command(missing)}", err=True)
        try:
            prereqs.install(missing)
        except prereqs.InstallError as exc:
            fail(str(exc))
        missing = prereqs.check(tasks, image)
    if missing:
        typer.echo(prereqs.report(missing), err=True)
        raise typer.Exit(2)
