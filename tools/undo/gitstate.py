"""A repository's refs as git state, not as files: what undo records and puts back for them.

A ref lives in a loose file (`refs/heads/main`), a line of `packed-refs`, or both; `git gc`,
`git pack-refs` and a branch deletion move it between them without changing what it names. So
undo does not record those files: for each git directory it records every ref by name, with what
it names (an object id, or `ref: <name>` for a symbolic ref such as HEAD), read through libgit2,
and it puts a ref back the same way (a ref created, moved or deleted through libgit2, which
keeps packed-refs and the loose files consistent). Objects are never written or removed here.

Paths: a ref's entry sits at `<git directory>/<ref name>` (`.git/refs/heads/main`, `.git/HEAD`),
where its loose file would be, so records and undo plans name it as a user would.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from typing import Any

HEAD = "HEAD"
SYMBOLIC = "ref: "


def is_ref_path(inner: str) -> bool:
    """Whether `inner` (a path inside a git directory) is where a ref is recorded."""
    return inner == HEAD or inner.startswith("refs/")


def is_ref_storage(inner: str) -> bool:
    """Files that hold refs (recorded as refs, never as files): loose refs, packed-refs, HEAD."""
    return inner in (HEAD, "packed-refs") or inner == "refs" or inner.startswith("refs/")


@contextlib.contextmanager
def opened(gitdir: str) -> Iterator[Any]:
    """The repository at `gitdir` (no discovery upwards, no work tree needed)."""
    import pygit2

    flags = pygit2.enums.RepositoryOpenFlag.NO_SEARCH
    repo = pygit2.Repository(gitdir, flags)
    try:
        yield repo
    finally:
        with contextlib.suppress(Exception):
            repo.free()


def _target(ref: Any) -> str:
    import pygit2

    if ref.type == pygit2.enums.ReferenceType.SYMBOLIC:
        return SYMBOLIC + str(ref.target)
    return str(ref.target)


def read_refs(gitdir: str) -> dict[str, str] | None:
    """Every ref of the repository at `gitdir` and HEAD: name -> what it names; None when libgit2
    cannot read the repository (the caller then records nothing for its refs)."""
    import pygit2

    try:
        with opened(gitdir) as repo:
            out = {}
            for name in repo.references:
                with contextlib.suppress(pygit2.GitError, KeyError, ValueError):
                    out[name] = _target(repo.references[name])
            with contextlib.suppress(pygit2.GitError, KeyError, ValueError):
                out[HEAD] = _target(repo.lookup_reference(HEAD))
            return out
    except (pygit2.GitError, OSError, ValueError, KeyError):
        return None


def read_ref(gitdir: str, name: str) -> str | None:
    import pygit2

    try:
        with opened(gitdir) as repo:
            return _target(repo.lookup_reference(name))
    except (pygit2.GitError, OSError, ValueError, KeyError):
        return None


def _no_links_on_the_way(gitdir: str, name: str) -> None:
    """libgit2 opens the ref's files by path: refuse when a directory on the way is a link (a
    step swapped `refs/heads` for a link elsewhere), so nothing is written outside the repository."""
    path = gitdir
    for part in ["", *name.split("/")[:-1]]:
        path = os.path.join(path, part) if part else path
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
            raise OSError(f"{path} is not a plain directory: the ref is not written through it")


def write_ref(gitdir: str, name: str, target: str, message: str = "clover undo") -> None:
    """Make ref `name` name `target` (an object id, or `ref: <name>`); the object must exist."""
    import pygit2

    _no_links_on_the_way(gitdir, name)
    try:
        with opened(gitdir) as repo:
            if target.startswith(SYMBOLIC):
                dest = target[len(SYMBOLIC) :]
                if name == HEAD:
                    repo.set_head(dest)
                else:
                    repo.create_reference_symbolic(name, dest, True, message=message)
                return
            oid = pygit2.Oid(hex=target)
            if oid not in repo:
                raise OSError(f"{name} would name {target[:12]}, which the repository does not have")
            if name == HEAD:
                repo.set_head(oid)
            else:
                repo.create_reference_direct(name, oid, True, message=message)
    except (pygit2.GitError, ValueError, KeyError) as exc:
        raise OSError(f"{name}: {exc}") from None


def delete_ref(gitdir: str, name: str) -> None:
    """Remove ref `name` (its loose file and its packed line); HEAD is never removed."""
    import pygit2

    if name == HEAD:
        raise OSError("HEAD is never removed")
    _no_links_on_the_way(gitdir, name)
    try:
        with opened(gitdir) as repo:
            repo.references.delete(name)
    except KeyError:
        return
    except (pygit2.GitError, ValueError) as exc:
        raise OSError(f"{name}: {exc}") from None


def names_missing(gitdir: str, target: str) -> bool:
    """Whether `target` is an object id the repository does not have (a symbolic target never is)."""
    import pygit2

    if target.startswith(SYMBOLIC):
        return False
    try:
        with opened(gitdir) as repo:
            return pygit2.Oid(hex=target) not in repo
    except (pygit2.GitError, OSError, ValueError):
        return False


__all__ = [
    "HEAD",
    "SYMBOLIC",
    "delete_ref",
    "is_ref_path",
    "is_ref_storage",
    "names_missing",
    "read_ref",
    "read_refs",
    "write_ref",
]
