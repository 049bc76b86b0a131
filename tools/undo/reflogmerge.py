"""Undoing a step's change to a reflog (`logs/HEAD`, `logs/refs/heads/*`, and the stash list,
`logs/refs/stash`) without losing what the user's own git wrote to it since.

A reflog is a list of entries, one a line; a step adds entries (a commit, a checkout, a stash)
or removes them (`git stash drop`, `git reflog expire`). So its undo is not "put the old file
back": it removes the entries the step added and puts back the ones it removed, keeping every
entry written since by anyone else, in time order. A user's `git stash` after the agent's
`git stash drop` leaves both stashes in the list after the undo.
"""

from __future__ import annotations

import re
from collections import Counter

_WHEN = re.compile(rb"^[0-9a-f]{40,64} [0-9a-f]{40,64} .*? (\d+) [+-]\d{4}(\t|$)")


def merge(current: bytes, before: bytes, after: bytes) -> bytes:
    """`current` with the entries `before` -> `after` added taken out and the ones it removed put
    back (the undo of that change; swap `before` and `after` for its redo)."""
    had, has = Counter(before.splitlines()), Counter(after.splitlines())
    added, removed = has - had, had - has
    out: list[bytes] = []
    for line in current.splitlines():
        if added[line] > 0:
            added[line] -= 1
            continue
        out.append(line)
    out += list(removed.elements())
    out.sort(key=_time)  # stable: entries of one second keep their order
    return b"".join(line + b"\n" for line in out)


def _time(line: bytes) -> int:
    m = _WHEN.match(line)
    return int(m.group(1)) if m else 0


def is_reflog(inner: str) -> bool:
    """Whether `inner` (a path inside a git directory) is a reflog."""
    return inner == "logs" or inner.startswith("logs/")


__all__ = ["is_reflog", "merge"]
