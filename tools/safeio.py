"""Opening files without following links: the half of containment that must hold at the syscall.

`paths.resolve_path` decides, from a fully resolved path, that a file lies inside the workspace.
Between that decision and the open, anything running in the workspace (a background job the agent
started) can swap a directory or the file for a symlink to somewhere else. So files are opened by
walking the path one component at a time from a trusted directory with `O_NOFOLLOW`, each step
relative to the previous directory's descriptor (openat-style): a link that appears anywhere on
the way fails the open instead of being followed.

Reads open with `O_NONBLOCK` and refuse anything but a regular file (a FIFO would block forever, a
device could be endless). Writes never modify the existing inode: the new content goes to a fresh
file in the same directory, which is renamed over the old name. So a hard link whose other name
lies outside the workspace keeps its old content (the link is broken), and a symlink swapped in at
the last moment is itself replaced, never written through. The old file's permission bits carry over.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from collections.abc import Iterator, Sequence

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _split(path: str, bases: Sequence[str]) -> tuple[str, list[str]]:
    """(trusted start directory, components below it) for an absolute path: the longest base
    that contains it, else `/` (every component then checked)."""
    path = os.path.normpath(path)
    best = "/"
    for base in bases:
        base = os.path.normpath(base)
        if (path == base or path.startswith(base.rstrip("/") + "/")) and len(base) > len(best):
            best = base
    rest = os.path.relpath(path, best) if path != best else ""
    return best, [p for p in rest.split("/") if p and p != "."]


def _swapped(name: str) -> OSError:
    return OSError(errno.ELOOP, f"{name}: a symbolic link is in the way (the path changed while in use)")


@contextlib.contextmanager
def _parent_fd(path: str, bases: Sequence[str], create: bool = False) -> Iterator[tuple[int, str]]:
    """A descriptor of `path`'s directory reached without following links, and the last name."""
    start, parts = _split(path, bases)
    if not parts:
        raise IsADirectoryError(errno.EISDIR, f"{path}: is a directory")
    fd = os.open(start, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            if part == "..":
                raise OSError(errno.EINVAL, f"{path}: '..' in a path that should be resolved")
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and stat.S_ISLNK(
                    os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
                ):
                    raise _swapped(path) from None
                raise
            os.close(fd)
            fd = nxt
        yield fd, parts[-1]
    finally:
        os.close(fd)


# For callers that act on a directory entry themselves (undo's writer: rename, rmdir, fchmod).
open_parent = _parent_fd


def read_bytes(path: str, bases: Sequence[str] = ()) -> bytes:
    """The content of the regular file at absolute `path`; OSError for a link, FIFO, device."""
    with _parent_fd(path, bases) as (dfd, name):
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _swapped(path) from None
            raise
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{path}: is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{path}: not a regular file ({_kind(info.st_mode)}); not opened")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_bytes(path: str, data: bytes, bases: Sequence[str] = ()) -> None:
    """Replace (or create) the file at absolute `path` with `data`; parents are created."""
    with _parent_fd(path, bases, create=True) as (dfd, name):
        mode = 0o666 & ~_umask()
        try:
            old = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None:
            if stat.S_ISDIR(old.st_mode):
                raise IsADirectoryError(errno.EISDIR, f"{path}: is a directory")
            if stat.S_ISREG(old.st_mode):
                mode = stat.S_IMODE(old.st_mode)
            elif not stat.S_ISLNK(old.st_mode):  # a link swapped in is replaced, never followed
                raise OSError(errno.EINVAL, f"{path}: not a regular file ({_kind(old.st_mode)})")
        tmp = f".{name[:200]}.clover-{uuid.uuid4().hex[:8]}"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd
        )
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise


def stat_nofollow(path: str, bases: Sequence[str] = ()) -> os.stat_result:
    """lstat of `path`, reached without following links on the way."""
    with _parent_fd(path, bases) as (dfd, name):
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def _umask() -> int:
    global _UMASK
    if _UMASK is None:
        try:  # Linux says it without changing it
            with open("/proc/self/status") as fh:
                _UMASK = next(int(ln.split()[1], 8) for ln in fh if ln.startswith("Umask:"))
        except (OSError, StopIteration, ValueError):
            _UMASK = 0o022
    return _UMASK


_UMASK: int | None = None
