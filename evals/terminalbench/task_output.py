"""Files in a task's output folders, which the container can write (/logs/* are mounted in): read
and appended to without ever following a link it left there."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def read_text(path: Path) -> str | None:
    """A regular file's text; None for anything else. The task's output folders are writable from
    inside the container: a link it leaves there is never followed (O_NOFOLLOW, no check-then-open)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        return fh.read(10_000_000).decode("utf-8", "replace")


def append(path: Path, data: bytes) -> None:
    """Append to a file in a folder the container can write: never through a link it put there."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError:
        return
    with os.fdopen(fd, "ab") as fh:
        if stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            fh.write(data)
