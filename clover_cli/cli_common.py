"""Shared CLI plumbing: one-line errors, settings from every source, state directories."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NoReturn

import typer

from clover.settings import Settings, SettingsError, load_settings
from clover.terminal_text import visible


def fail(message: str, code: int = 2) -> NoReturn:
    """One clear line on stderr and a non-zero exit; never a traceback."""
    typer.echo(f"clover: {visible(message)}", err=True)  # messages carry file names, servers' words
    raise typer.Exit(code)


def warn(message: str) -> None:
    typer.echo(f"clover: warning: {visible(message)}", err=True)


def settings_or_exit(repo: Path, flags: dict[str, Any], **defaults: Any) -> Settings:
    try:
        settings = load_settings(repo, flags, **defaults)
    except SettingsError as exc:
        fail(str(exc))
    for notice in settings.notices:
        warn(notice)
    if why := home_workspace(repo, settings.allow_home):
        fail(why)
    if settings.api_key:
        from clover.tools.safety.redact import register_secret

        register_secret(settings.api_key)
    from clover.process_secrets import hide_from_children

    hide_from_children([settings.api_key] if settings.api_key else [])
    return settings


def home_workspace(repo: Path, allowed: bool) -> str:
    """Why `repo` may not be the workspace: it is `/`, or it is or holds the home directory, so the
    agent's tools and commands would reach ~/.ssh, ~/.bashrc and every project ("" when it may)."""
    import os

    if allowed:
        return ""
    root = os.path.realpath(repo)
    home = os.path.realpath(os.path.expanduser("~"))
    if root == "/":
        what = "the whole file system (/)"
    elif home != "/" and (home == root or home.startswith(root.rstrip("/") + "/")):
        what = "your home directory" if home == root else f"a directory holding your home directory ({home})"
    else:
        return ""
    return (
        f"{root} is {what}: the agent would work on ~/.ssh, shell start-up files and every project in it. "
        "Run Clover in a project directory, or pass --allow-home to work here anyway"
    )


def state_dir() -> Path:
    """Where sessions, histories and run trajectories live (never inside the user's repo)."""
    from clover.tools.statehome import state_home

    return Path(state_home())
