"""A step's exact paths, as the step boundary hands them over (tools/safety/boundary.py), read for its
record: which are recorded as files and which as a repository's refs (git state), their Entries
(contents kept in the undo store as they are read), and the repositories the step made among them.
Captured holds a step's paths before it was applied; tools/undo/checkpoints.py compares them after.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from clover.tools.undo import gitstate
from clover.tools.undo.treescan import CACHE_DIRS, GITDIR_SKIP, Entry, Scanner, identity, is_gitdir


@dataclass
class Captured:
    """A step's paths before it was applied (Checkpoints.capture): the ones recorded as files,
    the repositories whose refs it may move, and their states."""

    plain: list[str]
    refdirs: set[str]
    entries: dict[str, Entry | None]


def split_paths(scanner: Scanner, paths: list[str]) -> tuple[list[str], set[str]]:
    """Paths recorded as files, and repositories whose refs a path of theirs changes (recorded
    as git state). Left out: regenerable caches, and a user's repository's object store
    (history is only added to, and never removed by a step)."""
    plain, refdirs = [], set()
    for path in paths:
        if set(path.split("/")) & CACHE_DIRS:
            continue
        home = scanner.user_gitdir(path)
        if home is not None:
            gitdir, inner = home
            top = inner.split("/", 1)[0]
            if top == "objects" or top in GITDIR_SKIP or inner.endswith(".lock"):
                continue
            if gitstate.is_ref_storage(inner):
                refdirs.add(gitdir)
                continue
        plain.append(path)
    return plain, refdirs


def read_entries(scanner: Scanner, root: str, plain: list[str], refdirs: set[str]) -> dict[str, Entry | None]:
    """The state now of each plain path (None: absent) and of each ref of the `refdirs` repositories."""
    out = {path: scanner.entry(path) for path in plain}
    for gitdir in refdirs:
        refs = gitstate.read_refs(os.path.join(root, gitdir)) or {}
        out.update({f"{gitdir}/{name}": Entry("r", 0, target) for name, target in refs.items()})
    wanted = set(plain)
    return {p: e for p, e in out.items() if e is not None or p in wanted}


def new_repos(root: str, before: Captured) -> dict[str, str]:
    """Git directories among the captured paths that were not there before: path -> identity."""
    made = {}
    for path in before.plain:
        if before.entries.get(path) is not None:
            continue
        full = os.path.join(root, path)
        with contextlib.suppress(OSError):
            if os.path.isdir(full) and is_gitdir(set(os.listdir(full)), full):
                made[path] = identity(full)
    return made
