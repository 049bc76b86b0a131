"""Where the bench's agents work. A task's workspace is `WORK_DIR/<instance id>`, the same under
every decoder of one run. By default WORK_DIR is a fresh temporary directory per run: a real path,
as a user's would be (figures measured at one pinned path flattered a model whose steps
move with the path in its prompt, and a user never works there). Pinning it (`--work-dir` or
$CLOVER_BENCH_WORK_DIR) repeats a run exactly, and the summary labels the figures as pinned. Runs
that share a pinned work directory take turns: a second one is refused, with the option that lets
it run beside."""

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


def pinned_work_dir() -> Path | None:
    """$CLOVER_BENCH_WORK_DIR, when set (a pinned work directory asked for by the environment)."""
    return Path(os.environ[WORK_DIR_ENV]).absolute() if os.environ.get(WORK_DIR_ENV) else None


def fresh_work_dir() -> Path:
    """A new directory under the system's temporary directory, for one run."""
    return Path(tempfile.mkdtemp(prefix=f"clover-bench-{getpass.getuser()}-"))


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
