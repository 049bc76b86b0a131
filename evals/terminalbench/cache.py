"""The runner's build cache (image roots, interpreters, tool binaries): one folder per key, built
once, shared safely by concurrent runs.

A key's folder appears only complete: it is built under a temporary name while its lock file is
held (flock, so a run that dies releases it), then renamed into place with a `.complete` stamp
written last; a waiting run takes the finished folder. A folder without the stamp (a crash before
the rename cannot leave one; a hand-made copy can) is rebuilt.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

STAMP = ".complete"


def cache_dir() -> Path:
    """$CLOVER_TBENCH_CACHE, else $XDG_CACHE_HOME/clover/tbench (~/.cache/clover/tbench)."""
    explicit = os.environ.get("CLOVER_TBENCH_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clover" / "tbench"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path`.lock, across processes and threads (each open is its own lock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def is_complete(path: Path) -> bool:
    return (path / STAMP).is_file()


def build_once(
    path: Path, build: Callable[[Path], None], *, check: Callable[[Path], str | None] | None = None
) -> Path:
    """`path`, built by `build(tmp)` unless a complete copy exists. `check(path)` returns a reason
    to distrust a complete copy (then it is rebuilt) or None."""
    if is_complete(path) and (check is None or check(path) is None):
        return path
    with locked(path):
        if is_complete(path):
            if check is None or check(path) is None:
                return path
            shutil.rmtree(path)
        elif path.exists():
            shutil.rmtree(path)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{time.monotonic_ns()}")
        try:
            build(tmp)
            (tmp / STAMP).write_text(time.strftime("%Y-%m-%dT%H:%M:%S\n"))
            os.rename(tmp, path)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return path
