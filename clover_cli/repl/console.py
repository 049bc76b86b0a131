"""The terminal the chat writes to: its console (colour on a terminal, plain text elsewhere, and
either way no drawn text can act on the terminal) and the user's pager on it."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from typing import IO

from rich.console import Console

from clover.terminal_text import GuardedConsole


def make_console(tty: bool, file: IO[str] | None = None) -> Console:
    """A terminal console with colour, or plain text (no ANSI escapes) for pipes and files; either
    way no text it draws can act on the terminal (terminal_text.GuardedConsole)."""
    if tty:
        return GuardedConsole(file=file, highlight=False)
    return GuardedConsole(
        file=file or sys.stdout,
        force_terminal=False,
        color_system=None,
        highlight=False,
        width=100,
        soft_wrap=True,
        emoji=False,
    )


def page(text: str, out: IO[str]) -> bool:
    """Show `text` in the user's pager ($PAGER, else less) on the terminal `out`; False when there is
    none to run (the caller prints the text instead)."""
    command = shlex.split(os.environ.get("PAGER") or "less")
    if not command or command[0] == "cat" or shutil.which(command[0]) is None:
        return False
    env = {**os.environ, "LESS": os.environ.get("LESS") or "-R"}
    out.flush()
    try:
        subprocess.run(command, input=text.encode("utf-8", "replace"), stdout=out, env=env, check=False)
    except (OSError, ValueError):  # e.g. `out` has no file descriptor
        return False
    return True
