"""Carrying a step's accepted changes from its overlay's upper layer into the real workspace.

The changes come from tools/safety/overlay.py, already decided by tools/safety/steppolicy.py. Everything here
reaches its directory one component at a time from the workspace root without following links
(tools/safeio.py), so a symlink the step left in the tree cannot send a write elsewhere: such a
path fails alone and is reported. Removals come first (what a deleted directory held, deepest
first, never a protected path or a directory above one), then the new content, parents first:
a file is written beside its name and renamed over it (moved out of the upper layer when both
are on one file system), with its bits, its modification time and, for root, its owner.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import uuid
from dataclasses import dataclass, field

from clover.tools import safeio
from clover.tools.safety.overlay import LayerChange
from clover.tools.safety.steppolicy import Review

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class Applied:
    paths: list[str] = field(default_factory=list)  # every real path the step's changes reached
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, why) not carried over


def _covers(path: str, protected: set[str]) -> bool:
    """Whether removing `path` would remove a protected path (it is one, or lies above one)."""
    return any(p == path or p.startswith(path + "/") for p in protected)


def _inside(path: str, protected: set[str]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in protected)


def _lstat(full: str) -> os.stat_result | None:
    try:
        return os.lstat(full)
    except OSError:
        return None


def _removes(change: LayerChange, below: os.stat_result | None) -> bool:
    """Whether carrying `change` over first removes what the real tree has at its path."""
    if below is None:
        return False
    if change.kind == "delete":
        return True
    is_dir = stat.S_ISDIR(below.st_mode)
    if change.kind == "dir":
        return not is_dir or change.opaque
    return is_dir  # a file or link over a directory (a file over a file is replaced atomically)


def touched(root: str, review: Review) -> list[str]:
    """The real paths applying `review` will create, change or remove, parents first."""
    out: dict[str, None] = {}
    for change in review.apply:
        if change.kind == "special":
            continue
        full = os.path.join(root, change.path)
        below = _lstat(full)
        out[change.path] = None
        if _removes(change, below) and below is not None and stat.S_ISDIR(below.st_mode):
            for dirpath, dirnames, filenames in os.walk(full):
                rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
                for name in sorted(dirnames + filenames):
                    out[f"{rel}/{name}"] = None
    return [p for p in out if not _inside(p, review.protect)]


def apply(root: str, review: Review) -> Applied:
    """Carry `review.apply` over to the tree at `root`."""
    result = Applied(paths=touched(root, review))
    for change in review.apply:
        if change.kind == "special":
            result.failed.append((change.path, "a FIFO, socket or device is not carried over"))
            continue
        below = _lstat(os.path.join(root, change.path))
        if not _removes(change, below):
            continue
        try:
            _remove(root, change.path, review.protect, children_only=change.kind == "dir")
        except OSError as exc:
            result.failed.append((change.path, exc.strerror or str(exc)))
    failed = {p for p, _ in result.failed}
    for change in review.apply:
        if change.kind in ("delete", "special") or any(_inside(change.path, {f}) for f in failed):
            continue
        if _inside(change.path, review.protect) and change.kind != "dir":
            continue
        try:
            _write(root, change)
        except OSError as exc:
            result.failed.append((change.path, exc.strerror or str(exc)))
            failed.add(change.path)
    return result


def _remove(root: str, rel: str, protect: set[str], children_only: bool = False) -> None:
    """Remove `rel` (or only what it holds) but what `protect` names and the directories above it."""
    with safeio.open_parent(os.path.join(root, rel), [root]) as (dfd, name):
        info = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if not stat.S_ISDIR(info.st_mode):
            if not _inside(rel, protect):
                os.unlink(name, dir_fd=dfd)
            return
        if not children_only and not _covers(rel, protect):
            shutil.rmtree(name, dir_fd=dfd)
            return
        fd = os.open(name, _DIR, dir_fd=dfd)
        try:
            children = os.listdir(fd)
        finally:
            os.close(fd)
    if _inside(rel, protect):
        return
    for child in sorted(children):
        _remove(root, f"{rel}/{child}", protect)
    if not children_only and not _covers(rel, protect):
        with safeio.open_parent(os.path.join(root, rel), [root]) as (dfd, name):
            os.rmdir(name, dir_fd=dfd)


def _write(root: str, change: LayerChange) -> None:
    src = os.lstat(change.source)
    with safeio.open_parent(os.path.join(root, change.path), [root]) as (dfd, name):
        if change.kind == "dir":
            try:
                here = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                here = None
            if here is None:
                os.mkdir(name, 0o700, dir_fd=dfd)
            elif not stat.S_ISDIR(here.st_mode):
                raise OSError(errno.EEXIST, f"{change.path}: something else is there")
            fd = os.open(name, _DIR, dir_fd=dfd)
            try:
                _own(fd, src)
                os.fchmod(fd, change.mode)
            finally:
                os.close(fd)
            return
        tmp = f".clover-step-{uuid.uuid4().hex[:12]}"
        try:
            if change.kind == "link":
                os.symlink(os.readlink(change.source), tmp, dir_fd=dfd)
                with contextlib.suppress(OSError, NotImplementedError):
                    if os.geteuid() == 0:
                        os.chown(tmp, src.st_uid, src.st_gid, dir_fd=dfd, follow_symlinks=False)
            else:
                _place_file(change.source, src, tmp, dfd)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise


def _place_file(source: str, src: os.stat_result, tmp: str, dfd: int) -> None:
    """The upper layer's file as `tmp` in directory `dfd`: moved when the file systems agree
    (the layer is thrown away after the step), else copied; bits, times and owner kept."""
    try:
        os.rename(source, tmp, dst_dir_fd=dfd)
        moved = True
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        moved = False
    if not moved:
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd
        )
        try:
            with open(source, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    try:
        _own(fd, src)  # first: a change of owner clears the set-id bits
        os.fchmod(fd, stat.S_IMODE(src.st_mode))
        os.utime(fd, ns=(src.st_atime_ns, src.st_mtime_ns))
    finally:
        os.close(fd)


def _own(fd: int, src: os.stat_result) -> None:
    """Root keeps each file's owner (overlayfs copied it up with it); others own what they write."""
    if os.geteuid() == 0:
        with contextlib.suppress(OSError):
            os.fchown(fd, src.st_uid, src.st_gid)


__all__ = ["Applied", "apply", "touched"]
