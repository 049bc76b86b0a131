"""Where Clover keeps what must outlive a run on this machine (sessions, trajectories, the undo
store, step layers): `$CLOVER_HOME`, else `$XDG_STATE_HOME/clover`, else `~/.local/state/clover`.

State, not cache: deleting `~/.cache` must not take the means to undo with it. Private: the
directory is 0700, so what the undo store keeps of the user's files (a `.env` copied before a
step changed it) is no more readable by others than the files were.
"""

from __future__ import annotations

import os


def state_home() -> str:
    base = os.environ.get("CLOVER_HOME")
    if base:
        return base
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(xdg, "clover")


def private_dir(*parts: str) -> str:
    """`state_home()/parts...`, made if missing; the state home and every part made here are 0700."""
    path = state_home()
    os.makedirs(path, mode=0o700, exist_ok=True)
    _tighten(path)
    for part in parts:
        path = os.path.join(path, part)
        os.makedirs(path, mode=0o700, exist_ok=True)
        _tighten(path)
    return path


def _tighten(path: str) -> None:
    try:
        info = os.stat(path)
        if info.st_uid == os.geteuid() and info.st_mode & 0o077:
            os.chmod(path, info.st_mode & 0o700)
    except OSError:
        pass


__all__ = ["private_dir", "state_home"]
