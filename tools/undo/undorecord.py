"""What an agent step changed, as the undo journal records it: a Record per step, listing for each
path its Change (treescan Entries before and after, and whether it is applied or undone), the git
directories the step moved (`.git` -> `.g`: same objects/ inode) and the repositories it created.
`diff_scans` makes the lists from two scans of the tree. tools/undo/undoplan.py plans their undo.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clover.tools.undo.treescan import Entry, Scan


@dataclass
class Change:
    path: str
    before: Entry | None
    after: Entry | None
    state: str = "applied"  # "undone" once an undo reverted it
    at: int = 0  # the journal's clock when it was made, undone or redone last

    def dump(self) -> list[Any]:
        return [
            self.path,
            self.before and self.before.dump(),
            self.after and self.after.dump(),
            self.state,
            self.at,
        ]

    @classmethod
    def load(cls, data: list[Any]) -> Change:
        return cls(str(data[0]), Entry.load(data[1]), Entry.load(data[2]), str(data[3]), int(data[4]))


@dataclass
class Move:
    """A git directory the step moved (same objects/ inode at a new path)."""

    src: str
    dst: str
    state: str = "applied"


@dataclass
class Record:
    id: int
    session: str
    request: int
    label: str
    step: int
    created: float
    changes: list[Change]
    moves: list[Move] = field(default_factory=list)
    new_repos: list[str] = field(default_factory=list)

    @property
    def group(self) -> tuple[str, int]:
        return (self.session, self.request)

    def dump(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session": self.session,
            "request": self.request,
            "label": self.label,
            "step": self.step,
            "created": self.created,
            "changes": [c.dump() for c in self.changes],
            "moves": [[m.src, m.dst, m.state] for m in self.moves],
            "new_repos": self.new_repos,
        }

    @classmethod
    def load(cls, d: dict[str, Any]) -> Record:
        return cls(
            int(d["id"]),
            str(d["session"]),
            int(d["request"]),
            str(d["label"]),
            int(d["step"]),
            float(d["created"]),
            [Change.load(c) for c in d["changes"]],
            [Move(*m) for m in d.get("moves", [])],
            list(d.get("new_repos", [])),
        )


def under(path: str, top: str) -> bool:
    """Whether `path` is `top` or lies inside it."""
    return path == top or path.startswith(top + "/")


def same(a: Entry | None, b: Entry | None) -> bool:
    """Whether two states of a path (None: absent) are the same."""
    return a is None and b is None or (a is not None and a.same(b))


def diff_scans(before: Scan, after: Scan) -> tuple[list[Change], list[Move], list[str]]:
    """What changed from `before` to `after`: changes, git-directory moves, new repositories."""
    b_ids = {i: p for p, i in before.gitdirs.items() if i}
    moves = [
        Move(b_ids[i], p)
        for p, i in after.gitdirs.items()
        if i in b_ids and b_ids[i] != p and after.gitdirs.get(b_ids[i]) != i
    ]
    new_repos = sorted(p for p, i in after.gitdirs.items() if i and i not in b_ids)
    changes: list[Change] = []
    b_rest, a_rest = dict(before.entries), dict(after.entries)
    for move in moves:  # inside a moved repository, compare old location with new
        inner_b = {p[len(move.src) :]: b_rest.pop(p) for p in list(b_rest) if under(p, move.src)}
        inner_a = {p[len(move.dst) :]: a_rest.pop(p) for p in list(a_rest) if under(p, move.dst)}
        for rel in sorted(set(inner_b) | set(inner_a)):
            if rel and not same(inner_b.get(rel), inner_a.get(rel)):
                changes.append(Change(move.dst + rel, inner_b.get(rel), inner_a.get(rel)))
    for path in sorted(set(b_rest) | set(a_rest)):
        if not same(b_rest.get(path), a_rest.get(path)):
            changes.append(Change(path, b_rest.get(path), a_rest.get(path)))
    return changes, moves, new_repos
