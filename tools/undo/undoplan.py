"""Undo and redo of recorded agent steps (Records, tools/undo/undorecord.py): what reverting them would
do, and doing it.

Undoing a group of records (one request) walks each path's changes newest first: a change is
undone only while the path still holds that change's "after"; the first one where it does not is a
CONFLICT (the user, or something else, changed the path since): the path is left as it is and
listed. `force` overrides a conflict after the user's version is saved. Redo is
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

from clover.tools.undo.treescan import Entry
from clover.tools.undo.undorecord import Change, Move, Record, same, under
from clover.tools.undo.undowrite import Writer

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
    blocking = _blocking(others, redo)
    moves = [m for rec in ordered for m in rec.moves if m.state == want]
    moved = {m.dst: m.src for m in moves if redo}  # redo: the content is at the source until it moves

    def locate(path: str) -> Entry | None:
        for dst, src in moved.items():
            if under(path, dst):
                return current(src + path[len(dst) :])
            if under(path, src):
                return None
        return current(path)

    actions, conflicts, settled = [], [], []
    for path, id_links in _chains(ordered, want).items():
        links = [ch for _id, ch in id_links]
        cur = locate(path)
        held = any((other > id_links[0][0]) != redo for other in blocking.get(path, []))
        if not held and same(cur, links[-1].after if redo else links[-1].before):
            settled += links  # already as the undo (redo) leaves it: an undo cut short, or by hand
            continue
        expected = cur
        if cur is None and midway and path in midway:
            expected = midway[path]  # carry on from where the cut-short undo was
        expected, done, why, save = _walk_chain(
            id_links, cur, expected, blocking.get(path, []), touched.get(path, -1), redo, force
        )
        if done and expected is not None and expected.kind == "b" and not same(cur, expected):
            why, done = "its content was not kept (a file over the size cap)", []
        if done:
            if same(cur, expected):
                settled += done
            else:
                actions.append(Action(path, cur, expected, done, save=save))
        if why:
            conflicts.append(Action(path, cur, None, [ch for ch in links if ch not in done], conflict=why))
    if not redo:
        _repositories_whole(ordered, actions, conflicts, exists_under)
    _directories_emptied(actions, conflicts, exists_under)
    checked = _check_moves(moves, redo, current, {a.path for a in actions if a.target is None})
    actions.sort(key=lambda a: a.path)
    conflicts.sort(key=lambda a: a.path)
    return Plan(redo, ordered, actions, conflicts, checked, settled)


def _blocking(others: list[Record], redo: bool) -> dict[str, list[int]]:
    """path -> ids of the other records whose change to it stands (applied; undone, for a redo)."""
    blocking: dict[str, list[int]] = {}
    for rec in others:
        for ch in rec.changes:
            if ch.state == ("applied" if not redo else "undone"):
                blocking.setdefault(ch.path, []).append(rec.id)
    return blocking


def _chains(ordered: list[Record], want: str) -> dict[str, list[tuple[int, Change]]]:
    """path -> (record id, change) of each change in state `want`, in the order the walk takes."""
    chains: dict[str, list[tuple[int, Change]]] = {}
    for rec in ordered:
        for ch in rec.changes:
            if ch.state == want:
                chains.setdefault(ch.path, []).append((rec.id, ch))
    return chains


def _walk_chain(
    id_links: list[tuple[int, Change]],
    cur: Entry | None,
    expected: Entry | None,
    blocked: list[int],
    seen: int,
    redo: bool,
    force: bool,
) -> tuple[Entry | None, list[Change], str, Entry | None]:
    """One path's changes walked from `expected` (what the path holds now, or held before a cut-short
    undo removed it): the state the ones that can be reverted (re-applied) leave, those changes, why
    the walk stopped ("" where it did not), and the user's version to save first (`force`).
    `blocked`: ids of other records whose change to the path stands; `seen`: when the path was last
    seen changed by someone else than an agent step (-1: never)."""
    done: list[Change] = []
    why, save = "", None
    for rec_id, ch in id_links:
        if any((other > rec_id) != redo for other in blocked):
            why = (
                "changed by a later request that is not undone"
                if not redo
                else ("an earlier request's change to it is undone")
            )
            break
        have, then = (ch.before, ch.after) if redo else (ch.after, ch.before)
        if seen >= ch.at and not force:
            why = (
                _conflict_reason(expected, have, redo)
                if not same(have, expected)
                else (("changed since the undo" if redo else "changed since the agent's step") + ", and back")
            )
            break
        if not same(have, expected):
            why = _conflict_reason(expected, have, redo)
            if not (force and _savable(expected, cur)):
                break
            save, why = expected, ""
        expected = then
        done.append(ch)
    return expected, done, why, save


def _check_moves(
    moves: list[Move], redo: bool, current: Callable[[str], Entry | None], freed: set[str]
) -> list[tuple[Move, str]]:
    """Each repository move with why it cannot be done now ("" where it can). `freed`: paths the
    plan removes, so a move's destination there is free."""
    checked = []
    for m in moves:
        src, dst = (m.src, m.dst) if redo else (m.dst, m.src)
        here = current(src)
        why = "" if here is not None and here.kind == "d" else f"{src} is not a directory any more"
        if not why and current(dst) is not None and dst not in freed:
            why = f"{dst} exists"
        checked.append((m, why))
    return checked


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
            removing = {a.path for a in actions if under(a.path, repo) and a.target is None}
            stays = [p for p in exists_under(repo) if p not in removing]
            if not (stays or any(under(c.path, repo) for c in conflicts)):
                continue
            why = f"the repository {repo} holds what the step did not make: left whole"
            for a in [a for a in actions if under(a.path, repo)]:
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
