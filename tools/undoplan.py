"""Undo and redo of recorded agent steps: what a step changed, and what reverting it would do.

A Record is one agent step's change list: for each path it changed, its state before and after
(treescan Entries), plus git directories it moved (`.git` -> `.g`: same objects/ inode) and
repositories it created. Undoing a group of records (one request) walks each path's changes newest
first: a change is undone only while the path still holds that change's "after"; the first one
where it does not is a CONFLICT (the user, or something else, changed the path since): the path is
left as it is and listed. `force` overrides a conflict after the user's version is saved. Redo is
the mirror image (oldest first, "before" expected, "after" restored).

Nothing outside the records is touched: a path the agent did not change is never written; a file
is deleted only where a step created it and it still holds exactly what the step left; a
directory is removed only when empty; a repository a step created is removed whole or not at all.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clover.tools.treescan import Entry, Scan
from clover.tools.undowrite import Writer


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


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")


def _same(a: Entry | None, b: Entry | None) -> bool:
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
        inner_b = {p[len(move.src) :]: b_rest.pop(p) for p in list(b_rest) if _under(p, move.src)}
        inner_a = {p[len(move.dst) :]: a_rest.pop(p) for p in list(a_rest) if _under(p, move.dst)}
        for rel in sorted(set(inner_b) | set(inner_a)):
            if rel and not _same(inner_b.get(rel), inner_a.get(rel)):
                changes.append(Change(move.dst + rel, inner_b.get(rel), inner_a.get(rel)))
    for path in sorted(set(b_rest) | set(a_rest)):
        if not _same(b_rest.get(path), a_rest.get(path)):
            changes.append(Change(path, b_rest.get(path), a_rest.get(path)))
    return changes, moves, new_repos


# ----------------------------------------------------------------------------- planning


@dataclass
class Action:
    """What one path becomes. `links`: the record changes it completes. `conflict`: why the path
    is left alone (then `links` are the changes that stay). `save`: the user's version, kept
    before a forced overwrite."""

    path: str
    current: Entry | None
    target: Entry | None
    links: list[Change]
    conflict: str = ""
    save: Entry | None = None

    def key(self) -> tuple[Any, ...]:
        return (self.path, self.current, self.target, self.conflict)


@dataclass
class Plan:
    redo: bool
    records: list[Record]
    actions: list[Action]
    conflicts: list[Action]
    moves: list[tuple[Move, str]]  # (move, why it cannot be done, or "")
    settled: list[Change]  # already in the wanted state: marked done, nothing written

    @property
    def empty(self) -> bool:
        return not (self.actions or self.conflicts or self.moves or self.settled)

    def key(self) -> tuple[Any, ...]:
        return (
            tuple(a.key() for a in self.actions),
            tuple(a.key() for a in self.conflicts),
            tuple((m.src, m.dst, why) for m, why in self.moves),
        )


def plan(
    records: list[Record],
    current: Callable[[str], Entry | None],
    exists_under: Callable[[str], list[str]],
    *,
    redo: bool = False,
    force: bool = False,
    others: list[Record] = (),
    touched: dict[str, int] | None = None,
    midway: dict[str, Entry | None] | None = None,
) -> Plan:
    """The undo (or redo) of `records` (one group) against the tree as `current` reads it;
    `exists_under(dir)` lists the paths a directory holds now. `others`: every other record; a
    path a later record (an earlier one, for a redo) changed, and that is not undone (redone)
    itself, is not this group's to revert: its state now is not this group's doing. `touched`:
    when a path was last seen changed by someone else than an agent step (the journal's clock);
    a change made (or undone) before that is not reverted over it, even where the path looks
    as the change left it (the user changed it and back). `midway`: paths an undo (redo) of this
    group removed on the way to writing them and was killed before it wrote: what they held."""
    touched = touched or {}
    ordered = sorted(records, key=lambda r: r.id, reverse=not redo)
    want = "undone" if redo else "applied"
    blocking: dict[str, list[int]] = {}  # path -> ids of other records whose change to it stands
    for rec in others:
        for ch in rec.changes:
            if ch.state == ("applied" if not redo else "undone"):
                blocking.setdefault(ch.path, []).append(rec.id)
    moves = [m for rec in ordered for m in rec.moves if m.state == want]
    moved = {m.dst: m.src for m in moves if redo}  # redo: the content is at the source until it moves

    def locate(path: str) -> Entry | None:
        for dst, src in moved.items():
            if _under(path, dst):
                return current(src + path[len(dst) :])
            if _under(path, src):
                return None
        return current(path)

    chains: dict[str, list[tuple[int, Change]]] = {}
    for rec in ordered:
        for ch in rec.changes:
            if ch.state == want:
                chains.setdefault(ch.path, []).append((rec.id, ch))
    actions, conflicts, settled = [], [], []
    for path, id_links in chains.items():
        links = [ch for _id, ch in id_links]
        cur = locate(path)
        held = any((other > id_links[0][0]) != redo for other in blocking.get(path, []))
        if not held and _same(cur, links[-1].after if redo else links[-1].before):
            settled += links  # already as the undo (redo) leaves it: an undo cut short, or by hand
            continue
        expected, done, why, save = cur, [], "", None
        if cur is None and midway and path in midway:
            expected = midway[path]  # carry on from where the cut-short undo was
        for rec_id, ch in id_links:
            if any((other > rec_id) != redo for other in blocking.get(path, [])):
                why = (
                    "changed by a later request that is not undone"
                    if not redo
                    else ("an earlier request's change to it is undone")
                )
                break
            have, then = (ch.before, ch.after) if redo else (ch.after, ch.before)
            if touched.get(path, -1) >= ch.at and not force:
                why = (
                    _conflict_reason(expected, have, redo)
                    if not _same(have, expected)
                    else (
                        ("changed since the undo" if redo else "changed since the agent's step")
                        + ", and back"
                    )
                )
                break
            if not _same(have, expected):
                why = _conflict_reason(expected, have, redo)
                if not (force and _savable(expected, cur)):
                    break
                save, why = expected, ""
            expected = then
            done.append(ch)
        if done and expected is not None and expected.kind == "b" and not _same(cur, expected):
            why, done = "its content was not kept (a file over the size cap)", []
        if done:
            if _same(cur, expected):
                settled += done
            else:
                actions.append(Action(path, cur, expected, done, save=save))
        if why:
            conflicts.append(Action(path, cur, None, [ch for ch in links if ch not in done], conflict=why))
    if not redo:
        _repositories_whole(ordered, actions, conflicts, exists_under)
    _directories_emptied(actions, conflicts, exists_under)
    freed = {a.path for a in actions if a.target is None}
    checked = []
    for m in moves:
        src, dst = (m.src, m.dst) if redo else (m.dst, m.src)
        here = current(src)
        why = "" if here is not None and here.kind == "d" else f"{src} is not a directory any more"
        if not why and current(dst) is not None and dst not in freed:
            why = f"{dst} exists"
        checked.append((m, why))
    actions.sort(key=lambda a: a.path)
    conflicts.sort(key=lambda a: a.path)
    return Plan(redo, ordered, actions, conflicts, checked, settled)


def _savable(user: Entry | None, current: Entry | None) -> bool:
    """Whether a forced overwrite can keep the user's version first (a directory cannot be
    replaced; a file too big to keep only while it is still on disk, to be copied)."""
    if user is None:
        return True
    return user.kind in ("f", "l", "x") or (user.kind == "b" and user is current)


def _conflict_reason(found: Entry | None, wanted: Entry | None, redo: bool) -> str:
    since = "since the undo" if redo else "since the agent's step"
    if found is None:
        return f"deleted {since}"
    if wanted is None:
        return f"made again {since}"
    return f"changed {since}"


def _repositories_whole(
    records: list[Record],
    actions: list[Action],
    conflicts: list[Action],
    exists_under: Callable[[str], list[str]],
) -> None:
    """A repository a step created goes only as a whole: if anything in it would stay (a file the
    step did not make, a conflict), every path of it is left alone."""
    for rec in records:
        for repo in rec.new_repos:
            removing = {a.path for a in actions if _under(a.path, repo) and a.target is None}
            stays = [p for p in exists_under(repo) if p not in removing]
            if not (stays or any(_under(c.path, repo) for c in conflicts)):
                continue
            why = f"the repository {repo} holds what the step did not make: left whole"
            for a in [a for a in actions if _under(a.path, repo)]:
                actions.remove(a)
                conflicts.append(Action(a.path, a.current, None, a.links, conflict=why))


def _directories_emptied(
    actions: list[Action], conflicts: list[Action], exists_under: Callable[[str], list[str]]
) -> None:
    """A directory is removed (or replaced) only when nothing would be left in it: one that holds
    a path this plan does not remove (the user's file) is a conflict in the plan, not a failure
    when it is applied; so is every directory above it."""

    def removes_dir(a: Action) -> bool:
        return a.current is not None and a.current.kind == "d" and (a.target is None or a.target.kind != "d")

    for a in sorted([a for a in actions if removes_dir(a)], key=lambda a: a.path.count("/"), reverse=True):
        removed = {x.path for x in actions if x.target is None or removes_dir(x)}
        if any(p != a.path and p not in removed for p in exists_under(a.path)):
            actions.remove(a)
            conflicts.append(
                Action(a.path, a.current, None, a.links, conflict="it holds files the step did not make")
            )


def verb(before: Entry | None, after: Entry | None) -> str:
    """How a path went from `before` to `after`, in a word or two."""
    if before is None:
        return "created"
    if after is None:
        return "deleted"
    if before.kind != after.kind:
        return f"{_KINDS[before.kind]} -> {_KINDS[after.kind]}"
    if (
        before.kind != "l"
        and before.mode != after.mode
        and before.oid == after.oid
        and before.extra == after.extra
    ):
        return f"chmod {before.mode:o} -> {after.mode:o}"
    return "modified"


_KINDS = {"f": "file", "l": "symlink", "d": "directory", "b": "file", "x": "index", "r": "ref"}


# ----------------------------------------------------------------------------- applying


@dataclass
class Outcome:
    done: list[Action] = field(default_factory=list)
    conflicts: list[Action] = field(default_factory=list)
    saved: list[str] = field(default_factory=list)  # where the user's versions were kept
    moved: list[Move] = field(default_factory=list)
    failed_moves: list[tuple[Move, str]] = field(default_factory=list)


def _depth(a: Action) -> int:
    return a.path.count("/")


def apply(p: Plan, writer: Writer, save_dir: Callable[[], str], clock: int = 0) -> Outcome:
    """Carry out a plan: the user's versions saved first, then removals (deepest first), writes
    (shallowest first), directory bits (deepest first); the repository moves after all that for
    an undo, before it for a redo. A path that cannot be done becomes a conflict and its changes
    keep their state."""
    out = Outcome(conflicts=list(p.conflicts))
    if p.redo:
        _moves(p, writer, out)
    for a in p.actions:
        if a.save is not None:
            out.saved.append(_save(writer, a, save_dir()))
    failed: set[str] = set()
    for a in sorted(p.actions, key=_depth, reverse=True):
        cur, target = a.current, a.target
        if cur is None or (target is not None and (cur.kind == "d") == (target.kind == "d")):
            continue  # nothing there, or replaced in place below (a file atomically, a directory kept)
        try:
            writer.remove(a.path, cur)
        except OSError as exc:
            failed.add(a.path)
            _fail(out, a, "not empty: it holds files the step did not make" if cur.kind == "d" else str(exc))
    for a in sorted(p.actions, key=_depth):
        if a.path in failed or a.target is None:
            continue
        try:
            writer.write(a.path, a.target)
        except OSError as exc:
            failed.add(a.path)
            _fail(out, a, str(exc))
    for a in sorted(p.actions, key=_depth, reverse=True):
        if a.path not in failed and a.target is not None and a.target.kind == "d":
            with contextlib.suppress(OSError):
                writer.chmod_dir(a.path, a.target.mode)
    state = "applied" if p.redo else "undone"
    for a in p.actions:
        if a.path not in failed:
            for ch in a.links:
                ch.state, ch.at = state, clock
            out.done.append(a)
    for ch in p.settled:
        ch.state, ch.at = state, clock
    if not p.redo:
        _moves(p, writer, out)
    return out


def replaces_kind(a: Action) -> bool:
    """Whether applying `a` removes the path before writing it (a directory for a file or back)."""
    return (
        a.current is not None and a.target is not None and (a.current.kind == "d") != (a.target.kind == "d")
    )


def _fail(out: Outcome, a: Action, why: str) -> None:
    out.conflicts.append(Action(a.path, a.current, None, a.links, conflict=why))


def _moves(p: Plan, writer: Writer, out: Outcome) -> None:
    for m, why in p.moves:
        src, dst = (m.src, m.dst) if p.redo else (m.dst, m.src)
        if not why and writer.exists(dst):
            why = f"{dst} exists"
        if not why:
            try:
                writer.rename(src, dst)
            except OSError as exc:
                why = f"{src} -> {dst}: {exc.strerror or exc}"
        if why:
            out.failed_moves.append((m, why))
        else:
            m.state = "applied" if p.redo else "undone"
            out.moved.append(m)


def _save(writer: Writer, a: Action, where: str) -> str:
    """Keep the user's version of a path about to be overwritten; return where it went."""
    dest = os.path.join(where, a.path)
    assert a.save is not None
    writer.save(a.path, a.save, dest)
    return dest
