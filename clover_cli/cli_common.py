"""Shared CLI plumbing: one-line errors, settings from every source, state directories."""

from __future__ import annotations

import os
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
    if settings.api_key:
        from clover.tools.redact import register_secret

        register_secret(settings.api_key)
    return settings


def state_dir() -> Path:
    """Where sessions, histories and run trajectories live (never inside the user's repo)."""
    base = os.environ.get("CLOVER_HOME")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(xdg) / "clover"
