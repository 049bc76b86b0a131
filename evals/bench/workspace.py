"""Where the bench's agents work. A workspace's path is in the model's system prompt, and a small
model's steps move with it: the shipped 7M weights fixed 16 of the 22 hand-written bugs with
workspaces under one `--out` and 15 under another (session 25). So a task's workspace is
`WORK_DIR/<instance id>`, the same under every decoder and every `--out`, and runs that share a
work directory take turns: a second one is refused, with the option that lets it run beside."""

from __future__ import annotations

import fcntl
import getpass
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

WORK_DIR_ENV = "CLOVER_BENCH_WORK_DIR"


class WorkDirBusy(Exception):
    """Another bench run holds the work directory."""


def default_work_dir() -> Path:
    """$CLOVER_BENCH_WORK_DIR, else one directory per user under the system's temporary directory."""
    if os.environ.get(WORK_DIR_ENV):
        return Path(os.environ[WORK_DIR_ENV]).absolute()
    return Path(tempfile.gettempdir()) / f"clover-bench-{getpass.getuser()}"


@contextmanager
def hold(work_dir: Path) -> Iterator[Path]:
    """The work directory for one run; WorkDirBusy while another run (any process) holds it."""
    work_dir.mkdir(parents=True, exist_ok=True)
    with open(work_dir / ".run.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WorkDirBusy(str(work_dir)) from None
        yield work_dir


@contextmanager
def task_workspace(work_dir: Path, instance_id: str) -> Iterator[Path]:
    """`work_dir/instance_id`, held while one job uses it: with several workers, the same task under
    two decoders waits for the other instead of sharing its work tree."""
    work_dir.mkdir(parents=True, exist_ok=True)
    with open(work_dir / f".{instance_id}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield work_dir / instance_id
