"""`python -m clover.repl`: the chat without the typer CLI (tests drive it in tmux). Unlike `clover
chat`, piped stdin is read line by line here, as a scripted session (answers to approvals included)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from clover.settings import SettingsError, load_settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clover.repl", description="Clover chat")
    parser.add_argument("--repo", default=".", help="repository to work in")
    parser.add_argument("--model")
    parser.add_argument("--base-url")
    parser.add_argument("--mode")
    parser.add_argument(
        "--resume",
        nargs="?",
        const="pick",
        default=None,
        help="session id, 'last', or nothing: pick one from a list",
    )
    parser.add_argument(
        "--continue",
        "-c",
        dest="continue_",
        action="store_true",
        help="continue the most recent session in this directory",
    )
    parser.add_argument("--no-live", action="store_true")
    parser.add_argument("--think", choices=("on", "off"))
    args = parser.parse_args(argv)
    from clover.termination import stop_on_termination

    stop_on_termination()  # as `clover chat` (main.py): SIGTERM / SIGHUP end it as Ctrl-C ends a step
    repo = Path(args.repo)
    if not repo.is_dir():
        print(f"clover: not a directory: {repo}", file=sys.stderr)
        return 2
    flags = {
        "model": args.model,
        "base_url": args.base_url,
        "mode": args.mode,
        "think": None if args.think is None else args.think == "on",
        "live": False if args.no_live else None,
    }
    try:
        settings = load_settings(repo, flags)
    except SettingsError as exc:
        print(f"clover: {exc}", file=sys.stderr)
        return 2
    from clover.repl.app import run_chat

    resume = "continue" if args.continue_ else args.resume
    return run_chat(settings, repo.resolve(), resume=resume, live=not args.no_live)


if __name__ == "__main__":
    from clover.repl.leave import leave

    leave(main())
