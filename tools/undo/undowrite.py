"""Putting a recorded state back on disk for an undo or a redo, without following links.

The work tree may have changed since the step (the user, another process): a directory on the way
to a path can now be a symlink to anywhere. So every write, removal, chmod and rename here reaches
its directory one component at a time from the work tree's root with O_NOFOLLOW (tools/safeio.py):
a link in the way fails that one path, which the undo then lists as a conflict; nothing is ever
written, removed or chmod-ed outside the work tree. A file is replaced atomically (a temp file in
the same directory, renamed over it); a directory is only ever removed when empty.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from typing import Any

from clover.tools import safeio
from clover.tools.undo import gitstate
from clover.tools.undo.treescan import Entry

_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Writer:
    """Puts Entries on disk under `root`, reading contents from `repo` (pygit2)."""

    def __init__(self, root: str, repo: Any) -> None:
        self.root, self.repo = root, repo

    @contextlib.contextmanager
    def _at(self, rel: str) -> Iterator[tuple[int, str]]:
        """(descriptor of rel's directory, rel's last name), reached without following links."""
        with contextlib.ExitStack() as stack:
            try:
                where = stack.enter_context(safeio.open_parent(os.path.join(self.root, rel), [self.root]))
            except FileNotFoundError:
                raise FileNotFoundError(f"its directory {os.path.dirname(rel) or '.'} is gone") from None
            yield where

    def data(self, entry: Entry) -> bytes:
        return self.repo[entry.extra if entry.kind == "x" else entry.oid].data

    def remove(self, rel: str, entry: Entry) -> None:
        if entry.kind == "r":
            gitdir, name = self._ref(rel)
            gitstate.delete_ref(gitdir, name)
            return
        with self._at(rel) as (dfd, name):
            if entry.kind == "d":
                os.rmdir(name, dir_fd=dfd)  # only ever an empty directory
            else:
                os.unlink(name, dir_fd=dfd)

    def write(self, rel: str, entry: Entry) -> None:
        """Make `rel` hold `entry`: a file or a link atomically, through a temp name beside it; a
        ref through libgit2 (tools/undo/gitstate.py)."""
        if entry.kind == "r":
            gitdir, name = self._ref(rel)
            gitstate.write_ref(gitdir, name, entry.oid)
            return
        with self._at(rel) as (dfd, name):
            if entry.kind == "d":
                try:
                    info = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                except FileNotFoundError:
                    info = None
                if info is None or not stat.S_ISDIR(info.st_mode):
                    os.mkdir(name, 0o700, dir_fd=dfd)
                    if entry.mode & 0o700 == 0o700:  # its bits now: an undo cut short leaves it as recorded
                        self.chmod_dir(rel, entry.mode)
                    # (one the owner cannot write gets its bits once its content is in: apply's last pass)
                return
            tmp = f".clover-undo-{uuid.uuid4().hex[:12]}"
            try:
                _make(self.data(entry), entry, tmp, dfd)
                os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                raise

    def _ref(self, rel: str) -> tuple[str, str]:
        """(the git directory's absolute path, the ref name) for a ref's path; the directories on
        the way are reached without following links."""
        parts = rel.split("/")
        for cut in range(len(parts) - 1, -1, -1):
            inner = "/".join(parts[cut:])
            if not gitstate.is_ref_path(inner):
                continue
            top = "/".join(parts[:cut])
            full = os.path.join(self.root, top) if top else self.root
            if top:
                info = safeio.stat_nofollow(full, [self.root])
                if not stat.S_ISDIR(info.st_mode):
                    continue
            if os.path.isfile(os.path.join(full, "HEAD")) and os.path.isdir(os.path.join(full, "objects")):
                return full, inner
        raise FileNotFoundError(f"{rel}: no repository holds this ref now")

    def chmod_dir(self, rel: str, mode: int) -> None:
        with self._at(rel) as (dfd, name):
            fd = os.open(name, _NOFOLLOW_DIR, dir_fd=dfd)
            try:
                os.fchmod(fd, mode)
            finally:
                os.close(fd)

    def exists(self, rel: str) -> bool:
        try:
            with self._at(rel) as (dfd, name):
                os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError:
            return False
        return True

    def rename(self, src: str, dst: str) -> None:
        with self._at(src) as (sfd, sname), self._at(dst) as (dfd, dname):
            os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)

    def save(self, rel: str, entry: Entry, dest: str) -> None:
        """Keep the user's version of `rel` (as `entry` recorded it) at `dest`, in Clover's store."""
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if entry.kind == "b":  # not kept in the object store: copied from disk while it is still there
            with self._at(rel) as (dfd, name):
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
            with os.fdopen(fd, "rb") as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
            os.chmod(dest, entry.mode)
            return
        parent = os.open(os.path.dirname(dest), _NOFOLLOW_DIR)
        try:
            _make(self.data(entry), entry, os.path.basename(dest), parent)
        finally:
            os.close(parent)


def _make(data: bytes, entry: Entry, name: str, dfd: int) -> None:
    """Create `name` (absent) in directory `dfd` as a symlink or a file holding `data`."""
    if entry.kind == "l":
        os.symlink(os.fsdecode(data), name, dir_fd=dfd)
        return
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, entry.mode)
    finally:
        os.close(fd)
