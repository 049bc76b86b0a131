"""Undo and git's own files: what a plan does with reflogs and refs (tools/undo/checkpoints.py builds the
plan, tools/undo/undoplan.py decides it path by path). `repo` is the undo store's object database."""

from __future__ import annotations

import os
from typing import Any

from clover.tools.undo import gitobjects, gitstate, reflogmerge, undoplan
from clover.tools.undo.treescan import Entry
from clover.tools.undo.undoplan import Plan
from clover.tools.undo.undorecord import Change


def merge_reflogs(plan: Plan, changes: list[Change], redo: bool, root: str, repo: Any) -> None:
    """A reflog the user's git wrote to since the step is not a conflict: its undo takes out
    the step's entries and puts back the ones it removed, keeping the user's
    (tools/undo/reflogmerge.py)."""
    for conflict in list(plan.conflicts):
        gitdir = gitobjects.gitdir_of(root, conflict.path)
        if gitdir is None or not reflogmerge.is_reflog(conflict.path[len(gitdir) + 1 :]):
            continue
        if conflict.conflict.startswith("changed by a later request"):
            continue  # another request's change stands: that one is undone first
        chain = [c for c in changes if c.path == conflict.path]
        chain = [c for c in chain if c.state == ("undone" if redo else "applied")]
        if not chain:
            continue
        first, last = (chain[-1], chain[0]) if redo else (chain[0], chain[-1])
        old, new = (first.after, last.before) if redo else (first.before, last.after)
        if any(e is not None and e.kind != "f" for e in (old, new, conflict.current)):
            continue
        current = b"" if conflict.current is None else repo[conflict.current.oid].data
        data = reflogmerge.merge(
            current,
            b"" if old is None else repo[old.oid].data,
            b"" if new is None else repo[new.oid].data,
        )
        mode = (conflict.current or old or new).mode  # type: ignore[union-attr]
        target = Entry("f", mode, str(repo.create_blob(data)))
        plan.conflicts.remove(conflict)
        if conflict.current is not None and conflict.current.same(target):
            plan.settled += chain
            continue
        plan.actions.append(undoplan.Action(conflict.path, conflict.current, target, chain))
    plan.actions.sort(key=lambda a: a.path)


def keep_refs_whole(plan: Plan, root: str, repo: Any) -> None:
    """A ref, HEAD, index or stash list is not written back where it would name objects its
    repository no longer has (the step deleted the history, which is not recorded): a
    conflict, even forced, so that the undo never leaves a repository git cannot read."""
    odbs: dict[str, Any] = {}
    for action in list(plan.actions):
        target = action.target
        if target is None or target.kind not in ("f", "x", "r"):
            continue
        gitdir = gitobjects.gitdir_of(root, action.path)
        if gitdir is None:
            continue
        full = os.path.join(root, gitdir)
        if target.kind == "r":
            missing = [target.oid] if gitstate.names_missing(full, target.oid) else []
        elif gitobjects.names_objects(action.path[len(gitdir) + 1 :], target.kind == "x"):
            missing = gitobjects.missing_objects(full, repo[target.oid].data, odbs)
        else:
            continue
        if missing:
            plan.actions.remove(action)
            why = (
                f"names {missing[0][:12]}, which the repository {gitdir} no longer has (the step deleted "
                "history, which is not recorded): writing it back would break the repository"
            )
            plan.conflicts.append(
                undoplan.Action(action.path, action.current, None, action.links, conflict=why)
            )
    plan.conflicts.sort(key=lambda a: a.path)
