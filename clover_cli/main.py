"""The `clover` command. Everything heavy (torch, the openai SDK, the REPL) is imported inside the
command that needs it, so `clover --help` and `clover --version` stay fast."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clover import __version__
from clover.cli_options import (
    PICK,
    AddDirOpt,
    AllowHomeOpt,
    ApiKeyOpt,
    BaseUrlOpt,
    ContinueOpt,
    ModelOpt,
    ModeOpt,
    OutputFormatOpt,
    PrintOpt,
    ResumeOpt,
    ThinkOpt,
    ToolFormatOpt,
    YesOpt,
)
from clover.containment import DEFENCE_IN_DEPTH
from clover.exit_codes import HELP as EXIT_CODES_HELP

HEADLESS_HELP = (
    "Headless runs never ask: a call that would need approval is refused, said on stderr at once and listed "
    "in json's permission_denials. clover -p uses your permission mode (default ask: edits and commands are "
    "refused unless allow rules cover them); clover fix defaults to auto-edit (edits inside the repository "
    "run, checkpointed for clover undo; commands need allow rules). --yes allows every call (commands run in "
    "the sandbox where bubblewrap works). Every command sees the workspace through the step boundary: what it "
    "may leave is decided on what it changed (git history is never removed, git hooks and program-naming "
    f"config are applied only when you approve them). Safety: {DEFENCE_IN_DEPTH}. " + EXIT_CODES_HELP
)

app = typer.Typer(
    name="clover",
    help="Clover: a terminal coding assistant built around a local block-diffusion language model. "
    "`clover` alone opens a chat in this directory (as `clover chat`).",
    epilog=HEADLESS_HELP,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
eval_app = typer.Typer(help="Score clover on benchmarks (SWE-bench, Terminal-Bench).", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"clover {__version__}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version and exit.")
    ] = False,
    print_: PrintOpt = None,
    output_format: OutputFormatOpt = "text",
    repo: Annotated[Path, typer.Option("--repo", help="The repository to work in.")] = Path("."),
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = None,
    mode: ModeOpt = None,
    yes: YesOpt = False,
    think: ThinkOpt = None,
    tool_format: ToolFormatOpt = None,
    resume: ResumeOpt = None,
    continue_: ContinueOpt = False,
    allow_home: AllowHomeOpt = False,
) -> None:
    if ctx.invoked_subcommand is not None:
        if print_ is not None or resume is not None or continue_:
            from clover.cli_common import fail

            flag = "-p" if print_ is not None else "--resume" if resume is not None else "--continue"
            fail(
                f"{flag} goes after the command: clover {ctx.invoked_subcommand} {flag} ..., or clover {flag} ... alone"
            )
        return
    flags = {
        "model": model,
        "base_url": base_url,
        "api_key": api_key,
        "tool_format": tool_format,
        "think": think,
        "mode": "yolo" if yes else mode,
        "allow_home": allow_home or None,
    }
    raise typer.Exit(_chat(repo, flags, print_, output_format, resume, continue_))


def _chat(
    repo: Path,
    flags: dict,
    print_: str | None,
    output_format: str,
    resume: str | None,
    continue_: bool,
    live: bool = True,
) -> int:
    """`clover` and `clover chat`: the interactive chat, or one headless request when -p is given or
    stdin is piped (and no session is to be continued)."""
    import sys

    from clover.cli_common import fail, settings_or_exit

    if continue_ and resume is not None:
        fail("--continue and --resume pick the session two ways: use one")
    if print_ is not None and (continue_ or resume is not None):
        fail("-p answers one request in a new conversation; --continue and --resume are for the chat")
    if print_ is not None or (resume is None and not continue_ and not sys.stdin.isatty()):
        return _one_shot(repo, flags, print_, output_format)
    if not repo.is_dir():
        fail(f"not a directory: {repo}")
    settings = settings_or_exit(repo, flags)
    from clover.repl.app import run_chat
    from clover.repl.leave import leave

    which = "continue" if continue_ else "pick" if resume == PICK else resume
    leave(run_chat(settings, repo.resolve(), resume=which, live=live))


def _one_shot(repo: Path, flags: dict, prompt: str | None, output_format: str) -> int:
    """`clover -p`, `clover chat -p` and `... | clover chat`: one request, headless."""
    import sys

    from clover.cli_common import fail, settings_or_exit

    if not repo.is_dir():
        fail(f"not a directory: {repo}")
    settings = settings_or_exit(repo, flags)
    from clover.repl.headless import read_prompt, run_print

    return run_print(settings, repo.resolve(), read_prompt(prompt, sys.stdin), output_format)


@app.command(epilog=HEADLESS_HELP)
def fix(
    issue: Annotated[Path, typer.Argument(help="The issue to fix, as a Markdown or text file.")],
    repo: Annotated[Path, typer.Option("--repo", help="Repository to work in.")] = Path("."),
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = None,
    tool_format: ToolFormatOpt = None,
    think: ThinkOpt = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="Step limit.")] = None,
    time_limit: Annotated[
        float | None, typer.Option("--time-limit", help="Wall-time limit in seconds.")
    ] = None,
    commit: Annotated[bool, typer.Option("--commit", help="Commit the fix.")] = False,
    patch_out: Annotated[Path | None, typer.Option("--patch-out", help="Write the diff here.")] = None,
    output_format: Annotated[str, typer.Option("--output-format", help="text | json | stream-json")] = "text",
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Allow every tool call (yolo mode).")] = False,
    mode: ModeOpt = None,
    add_dir: AddDirOpt = None,
    trajectory: Annotated[
        Path | None, typer.Option("--trajectory", help="Write the JSONL trajectory here.")
    ] = None,
    allow_home: AllowHomeOpt = False,
) -> None:
    """Fix ISSUE headless: explore, reproduce, edit, test; print a report computed from the real diff
    (files, +/- lines, the last test command and its exit code), the model's own words, and the diff."""
    from clover.fix import FixOptions, run_fix

    flags = {
        "model": model,
        "base_url": base_url,
        "api_key": api_key,
        "tool_format": tool_format,
        "think": think,
        "max_steps": max_steps,
        "time_limit": time_limit,
        "mode": "yolo" if yes else mode,
        "add_dirs": add_dir or None,
        "allow_home": allow_home or None,
    }
    options = FixOptions(issue, repo, commit, patch_out, output_format, trajectory)
    raise typer.Exit(run_fix(options, flags))


@app.command(epilog=HEADLESS_HELP)
def chat(
    resume: ResumeOpt = None,
    continue_: ContinueOpt = False,
    repo: Annotated[Path, typer.Option("--repo", help="Repository to work in.")] = Path("."),
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key: ApiKeyOpt = None,
    tool_format: ToolFormatOpt = None,
    think: ThinkOpt = None,
    mode: ModeOpt = None,
    add_dir: AddDirOpt = None,
    live: Annotated[bool, typer.Option("--live/--no-live", help="Live diffusion view.")] = True,
    print_: PrintOpt = None,
    output_format: OutputFormatOpt = "text",
    yes: YesOpt = False,
    allow_home: AllowHomeOpt = False,
) -> None:
    """Work with the agent interactively in this repository (piped stdin: one request, headless)."""
    flags = {
        "model": model,
        "base_url": base_url,
        "api_key": api_key,
        "tool_format": tool_format,
        "think": think,
        "mode": "yolo" if yes else mode,
        "add_dirs": add_dir or None,
        "live": live,
        "allow_home": allow_home or None,
    }
    raise typer.Exit(_chat(repo, flags, print_, output_format, resume, continue_, live))


@app.command()
def undo(
    repo: Annotated[Path, typer.Option("--repo", help="Repository whose agent changes to undo.")] = Path("."),
    redo: Annotated[bool, typer.Option("--redo", help="Re-apply what the last undo reverted.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask on a terminal.")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Also overwrite paths changed since the step, after saving your version."
        ),
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be done, and stop.")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List the recorded requests, newest first.")] = False,
    session: Annotated[str | None, typer.Option("--session", help="Only this session's requests.")] = None,
) -> None:
    """Revert exactly what the agent's latest request changed (paths you changed since are left
    alone and listed); prints the plan first, asks on a terminal."""
    from clover.undo_cmd import run_undo

    raise typer.Exit(
        run_undo(repo, redo=redo, yes=yes, force=force, dry_run=dry_run, list_only=list_, session=session)
    )


@app.command()
def serve(
    model: ModelOpt = None,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8000,
) -> None:
    """Serve a local Clover as an OpenAI-compatible chat-completions API."""
    from clover.cli_common import settings_or_exit

    settings = settings_or_exit(Path("."), {"model": model})
    from clover.serve import serve as run_server

    run_server(settings, host=host, port=port)


@app.command()
def train(
    out: Annotated[Path, typer.Option("--out", help="Run directory (checkpoints, logs).")],
    config: Annotated[Path | None, typer.Option("--config", help="Model config.json to train.")] = None,
    data: Annotated[
        Path | None, typer.Option("--data", help="Packed data (python -m clover.model.training.data).")
    ] = None,
    steps: Annotated[int | None, typer.Option("--steps")] = None,
    batch: Annotated[int | None, typer.Option("--batch")] = None,
    seq: Annotated[int | None, typer.Option("--seq")] = None,
    lr: Annotated[float | None, typer.Option("--lr")] = None,
    device: Annotated[str, typer.Option("--device", help="cpu | cuda")] = "cpu",
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue from the run's last checkpoint.")
    ] = False,
    init_from: Annotated[
        str | None,
        typer.Option(
            "--init-from", help="Fine-tune: start from this model directory ('embedded': the shipped one)."
        ),
    ] = None,
    time_limit: Annotated[float | None, typer.Option("--time-limit", help="Minutes.")] = None,
    export_to: Annotated[
        Path | None, typer.Option("--export-to", help="Export the run's checkpoint as a model directory.")
    ] = None,
    tokenizer: Annotated[
        Path | None, typer.Option("--tokenizer", help="tokenizer.json for --export-to.")
    ] = None,
) -> None:
    """Train (or fine-tune) a Clover with the block-diffusion objective; see model/training/train.py."""
    from clover.train_cmd import run_train

    raise typer.Exit(
        run_train(
            out=out,
            config=config,
            data=data,
            steps=steps,
            batch=batch,
            seq=seq,
            lr=lr,
            device=device,
            resume=resume,
            init_from=init_from,
            time_limit=time_limit,
            export_to=export_to,
            tokenizer=tokenizer,
        )
    )


def _mount_bench() -> None:
    from clover.bench import bench_command

    app.command(
        "bench", help="Held-out SynthFix end to end: block diffusion vs autoregressive on the same weights."
    )(bench_command)


_mount_bench()


def _mount_eval_apps() -> None:
    # The eval sub-apps import nothing heavy at module level.
    from clover.evals.swebench.cli import swebench_app
    from clover.evals.terminalbench.cli import terminalbench_app

    eval_app.add_typer(swebench_app, name="swebench")
    eval_app.add_typer(terminalbench_app, name="terminalbench")


_mount_eval_apps()


def optional_resume_value(argv: list[str]) -> list[str]:
    """`--resume` / `-r` with no value (last, or before another option) gets PICK: the picker."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        out.append(arg)
        if arg == "--":
            return out + argv[i + 1 :]
        if arg in ("--resume", "-r") and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
            out.append(PICK)
    return out


def main() -> None:
    """Console entry: an unexpected failure is one line (the traceback goes to a log file)."""
    import sys

    from clover.termination import exit_code, stop_on_termination

    stop_on_termination()  # SIGTERM / SIGHUP end a run as Ctrl-C does (recorded, reported)
    try:
        app(args=optional_resume_value(sys.argv[1:]), prog_name="clover")
    except KeyboardInterrupt as exc:
        from clover.terminal_text import visible

        typer.echo(f"clover: {visible(str(exc)) if str(exc) else 'interrupted'}", err=True)
        raise SystemExit(exit_code(exc)) from None
    except Exception as exc:  # last resort; expected errors are handled where they happen
        import traceback

        from clover.cli_common import state_dir

        log = state_dir() / "crash.log"
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(traceback.format_exc(), encoding="utf-8")
            where = f" (details in {log})"
        except OSError:
            where = ""
        from clover.terminal_text import visible

        typer.echo(f"clover: internal error: {type(exc).__name__}: {visible(str(exc))}{where}", err=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
