"""Undo / redo of exactly what the agent changed, step by step, never what the user did.

Around each tool call that may change files (a read-only call is not recorded) the work tree is
scanned before and after (tools/undo/treescan.py); the difference is that step's Record: every path it
created, modified or deleted, chmod-ed, turned into a link or a directory, the `.git` state it
touched (HEAD, refs, config, hooks, the index), git directories it moved and repositories it
created, with before/after contents in the store's object database (a bare repository written
through libgit2: no git program runs). What the user changes between steps is never in a record.

Records are grouped by request (one `clover fix` run, one `-p` run, one chat message) within a
session. Undo takes the latest group (of one session, for the chat's /undo) and reverts each path
only where it still holds what the agent left (tools/undo/undoplan.py); a path changed since is a
conflict, listed and left alone, unless `force`, which first saves the user's version under
`<store>/saved/`. Redo is the mirror image.

The store (default `~/.local/state/clover/undo/<hash of root>`, private: 0700) holds `objects.git` (contents),
`journal.json` (records, the redo stack, the requests an undo ran on, repositories the agent
made), `scan-cache.json` (stat
data of files already read) and `saved/`. One writer at a time (a lock file): a chat and a
`clover undo` may run side by side.

The journal's format is tools/undo/undojournal.py's; the paths a step boundary hands over are read by
tools/undo/undocapture.py; the agent records its steps through tools/undo/undorecorder.py's Recorder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from typing import Any

from clover.tools.statehome import private_dir
from clover.tools.undo import undocapture, undogit, undojournal, undoplan, undorecord
from clover.tools.undo.signalsafe import held_signals
from clover.tools.undo.treescan import Entry, Scan, Scanner
from clover.tools.undo.undocapture import Captured
from clover.tools.undo.undojournal import Group
from clover.tools.undo.undoplan import Outcome, Plan
from clover.tools.undo.undorecord import Record

__all__ = ["Checkpoints", "SnapshotError"]


class SnapshotError(Exception):  # not model.load.CheckpointError (weights)
    """Nothing to undo/redo, a store that cannot be used, files changed mid-undo: one line for the user."""


def default_store(root: str) -> str:
    """The store of a work tree: private, under Clover's state (tools/statehome.py), not a cache."""
    digest = hashlib.sha256(("v4:" + os.path.realpath(root)).encode()).hexdigest()[:16]
    return os.path.join(private_dir("undo"), digest)


class Checkpoints:
    def __init__(self, root: str, store: str | None = None) -> None:
        self.root = os.path.realpath(root)
        if not os.path.isdir(self.root):
            raise SnapshotError(f"checkpoints: {root} is not a directory")
        self.store = os.path.realpath(store or default_store(self.root))
        if self.store == self.root or self.store.startswith(self.root + os.sep):
            raise SnapshotError("checkpoints: the store must lie outside the workspace")
        try:
            os.makedirs(self.store, mode=0o700, exist_ok=True)
            os.chmod(self.store, 0o700)  # what it keeps of the user's files is theirs alone
            self.repo = self._open_objects()
        except OSError as exc:
            raise SnapshotError(f"checkpoints: cannot use {self.store}: {exc.strerror or exc}") from exc
        self.journal_path = os.path.join(self.store, "journal.json")
        self.cache_path = os.path.join(self.store, "scan-cache.json")
        self._cache_seen: tuple[int, ...] | None = None
        self._load_baseline()
        self._before: Scan | None = None

    def _open_objects(self) -> Any:
        import pygit2

        path = os.path.join(self.store, "objects.git")
        try:
            if os.path.isdir(path):
                return pygit2.Repository(
                    path, pygit2.enums.RepositoryOpenFlag.NO_SEARCH | pygit2.enums.RepositoryOpenFlag.BARE
                )
            return pygit2.init_repository(path, bare=True)
        except pygit2.GitError as exc:
            raise SnapshotError(f"checkpoints: cannot use {path}: {exc}") from exc

    # ----------------------------------------------------------------------- recording

    def begin(self) -> None:
        """Scan the tree before a step (the baseline its record is measured from); what changed
        since the last scan is the user's, noted so that no undo reverts over it."""
        with self._locked():
            self._sync_baseline()
            journal = self._load()
            self._before, seen = self._observe(journal)
            if seen:
                self._save(journal)  # the new baseline is saved by end(), once the step is recorded

    def end(self, session: str, request: int, label: str, step: int) -> Record | None:
        """Scan after the step and keep what it changed; None when it changed nothing."""
        before, self._before = self._before, None
        if before is None:
            raise SnapshotError("checkpoints: end() without begin()")
        with self._locked():
            journal = self._load()
            agent_repos = set(journal["agent_repos"])
            after = self.scanner.scan(agent_repos, new_allowed=True, known=set(before.gitdirs.values()))
            changes, moves, new_repos = undorecord.diff_scans(before, after)
            self._save_cache()
            if not (changes or moves):
                return None
            journal["agent_repos"] = sorted(agent_repos | {after.gitdirs[p] for p in new_repos})
            return self._append(journal, session, request, label, step, changes, moves, new_repos)

    def capture(self, paths: list[str]) -> Captured:
        """The state of the paths a step is about to change (the step boundary knows them exactly,
        tools/safety/boundary.py): contents kept in the store now, so that undo can bring them back."""
        with self._locked():
            self._sync_baseline()
            plain, refdirs = undocapture.split_paths(self.scanner, paths)
            return Captured(plain, refdirs, undocapture.read_entries(self.scanner, self.root, plain, refdirs))

    def commit(self, session: str, request: int, label: str, step: int, before: Captured) -> Record | None:
        """Record what the step changed of the captured paths, read now that it is applied."""
        with self._locked():
            journal = self._load()
            made = undocapture.new_repos(self.root, before)
            if made:
                journal["agent_repos"] = sorted(set(journal["agent_repos"]) | set(made.values()))
                self.scanner.agent_repos |= set(made.values())
            after = undocapture.read_entries(self.scanner, self.root, before.plain, before.refdirs)
            changes = []
            for path in sorted(set(before.entries) | set(after)):
                old, new = before.entries.get(path), after.get(path)
                if not (old is None and new is None or (old is not None and old.same(new))):
                    changes.append(undorecord.Change(path, old, new))
                self.scanner.note(path, new)
            self._save_cache()
            if not changes:
                return None
            return self._append(journal, session, request, label, step, changes, [], sorted(made))

    def _append(
        self,
        journal: dict[str, Any],
        session: str,
        request: int,
        label: str,
        step: int,
        changes: list[undorecord.Change],
        moves: list[undorecord.Move],
        new_repos: list[str],
    ) -> Record:
        journal["clock"] += 1
        for ch in changes:
            ch.at = journal["clock"]
        record = Record(
            journal["next_id"], session, request, label, step, time.time(), changes, moves, new_repos
        )
        journal["next_id"] += 1
        journal["records"].append(record)
        journal["redo"] = []  # new work: what was undone before it is not redone over it
        undojournal.trim(journal)
        self._save(journal)
        return record

    def _observe(self, journal: dict[str, Any]) -> tuple[Scan, bool]:
        """Scan now; a recorded path that differs from the last scan was changed by the user (or
        anything else that is not an agent step): `touched` keeps when it was seen. Returns the
        scan and whether anything was seen."""
        scan = self.scanner.scan(set(journal["agent_repos"]))
        previous, seen = self.scanner.previous, False
        if previous is not None:
            recorded = {c.path for r in journal["records"] for c in r.changes}
            midway = journal["pending"].get("paths", {})  # an undo cut short: not the user's doing
            for path in recorded:
                old, new = previous.get(path), scan.entries.get(path)
                if path in midway and (Entry.load(midway[path][1]) == new or new is None):
                    continue
                if not (old is None and new is None or (old is not None and old.same(new))):
                    journal["touched"][path] = journal["clock"]
                    seen = True
        return scan, seen

    # ----------------------------------------------------------------------- history

    def groups(self, session: str | None = None) -> list[Group]:
        """Oldest first."""
        return undojournal.groups(self._load(), session)

    def next_request(self, session: str) -> int:
        return max((r.request for r in self._load()["records"] if r.session == session), default=0) + 1

    # ----------------------------------------------------------------------- undo / redo

    def plan(
        self, *, redo: bool = False, session: str | None = None, force: bool = False
    ) -> tuple[Group, Plan]:
        """What an undo (redo) would do now, for the latest group (of `session`); raises
        SnapshotError when there is nothing to undo (redo)."""
        with self._locked():
            self._sync_baseline()
            journal = self._load()
            self._observe(journal)
            self._save(journal)
            self._save_cache()
            group = self._target(journal, redo, session, force)
            return group, self._plan(journal, group, redo, force)

    def apply(self, shown: Plan, *, session: str | None = None, force: bool = False) -> tuple[Group, Outcome]:
        """Carry out the undo (redo) `shown` to the user; if the files changed since it was made,
        nothing is done (SnapshotError), so nothing happens that was not shown."""
        with self._locked():
            self._sync_baseline()
            journal = self._load()
            self._observe(journal)
            group = self._target(journal, shown.redo, session, force)
            fresh = self._plan(journal, group, shown.redo, force)
            if fresh.key() != shown.key():
                self._save(journal)
                self._save_cache()
                raise SnapshotError(
                    "the files changed since the plan was shown; nothing was done (run it again)"
                )
            stamp = time.strftime("%Y%m%d-%H%M%S")
            where = os.path.join(self.store, "saved", f"{stamp}-{'redo' if shown.redo else 'undo'}")
            journal["clock"] += 1
            # Noted first, so that what an undo killed midway wrote (or removed on the way to writing,
            # where a path's kind changes) is finished by the next one, never taken for the user's.
            journal["pending"] = {
                "group": undojournal.held_key(group),
                "paths": {
                    a.path: [a.current and a.current.dump(), a.target and a.target.dump()]
                    for a in fresh.actions
                },
            }
            self._save(journal)
            outcome = undoplan.apply(
                fresh, undoplan.Writer(self.root, self.repo), lambda: where, journal["clock"]
            )
            key = [group.session, group.request]
            for stack in ("redo", "undone"):
                journal[stack] = [g for g in journal[stack] if g != key]
                if not shown.redo:
                    journal[stack].append(key)
            journal["held"].pop(undojournal.held_key(group), None)
            journal["pending"] = {}
            if fresh.conflicts and not shown.redo:  # what the plan left: once it can go, undo comes back here
                journal["held"][undojournal.held_key(group)] = sorted({c.path for c in fresh.conflicts})
            self._save(journal)
            self.scanner.scan(
                set(journal["agent_repos"])
            )  # the new baseline: what the undo wrote is not the user's
            self._save_cache()
            return group, outcome

    def undo(self, *, session: str | None = None, force: bool = False) -> Outcome:
        """Plan and apply at once (no one to show the plan to: a test, a script)."""
        _group, shown = self.plan(session=session, force=force)
        return self.apply(shown, session=session, force=force)[1]

    def redo(self, *, session: str | None = None, force: bool = False) -> Outcome:
        _group, shown = self.plan(redo=True, session=session, force=force)
        return self.apply(shown, session=session, force=force)[1]

    def _plan(self, journal: dict[str, Any], group: Group, redo: bool, force: bool) -> Plan:
        mine = {r.id for r in group.records}
        others = [r for r in journal["records"] if r.id not in mine]
        pending = journal["pending"]
        midway = (
            {
                p: Entry.load(cur)
                for p, (cur, target) in pending.get("paths", {}).items()
                if cur and target and (cur[0] == "d") != (target[0] == "d")
            }
            if (pending.get("group") == undojournal.held_key(group))
            else {}
        )
        plan = undoplan.plan(
            group.records,
            self.scanner.entry,
            self._paths_under,
            redo=redo,
            force=force,
            others=others,
            touched=journal["touched"],
            midway=midway,
        )
        changes = [c for r in group.records for c in r.changes]
        undogit.merge_reflogs(plan, changes, redo, self.root, self.repo)
        undogit.keep_refs_whole(plan, self.root, self.repo)
        return plan

    def _paths_under(self, top: str) -> list[str]:
        out = []
        for dirpath, dirnames, filenames in os.walk(os.path.join(self.root, top)):
            rel = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            out.append(rel)
            out += [
                f"{rel}/{n}"
                for n in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
                if not n.endswith(".lock")
            ]
        return out

    def _target(self, journal: dict[str, Any], redo: bool, session: str | None, force: bool = False) -> Group:
        """Undo: the latest request not undone yet, or one whose undo left a path as a conflict in
        its plan that can now be undone (the later request that held it was undone since; not an
        apply that failed, which would come back to the same request every time); with `force`, any
        with a change left. Redo: the latest undone request on the redo stack (new work clears it)."""
        groups = undojournal.groups(journal, session)

        def has(group: Group, state: str) -> bool:
            return any(c.state == state for r in group.records for c in r.changes) or any(
                m.state == state for r in group.records for m in r.moves
            )

        if redo:
            for key in reversed(journal["redo"]):
                found = [g for g in groups if [g.session, g.request] == key and has(g, "undone")]
                if found:
                    return found[0]
            raise SnapshotError("nothing to redo" + (" in this session" if session else ""))
        for group in reversed(groups):
            if not has(group, "applied"):
                continue
            if force or [group.session, group.request] not in journal["undone"]:
                return group
            held = set(journal["held"].get(undojournal.held_key(group), []))
            if held:  # a path its undo left as a conflict may be free now (a later request undone since)
                left = self._plan(journal, group, False, False)
                if any(a.path in held for a in left.actions) or any(c.path in held for c in left.settled):
                    return group
        raise SnapshotError("nothing to undo" + (" in this session" if session else ""))

    # ----------------------------------------------------------------------- state

    def _load(self) -> dict[str, Any]:
        return undojournal.load(self.journal_path)

    def _save(self, journal: dict[str, Any]) -> None:
        undojournal.save(self.journal_path, journal)

    def _save_cache(self) -> None:
        undojournal.write_json(self.cache_path, self.scanner.dump_cache())
        self._cache_seen = self._cache_identity()

    def _cache_identity(self) -> tuple[int, ...] | None:
        try:
            info = os.stat(self.cache_path)
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    def _load_baseline(self) -> None:
        self._cache_seen = self._cache_identity()
        cache = undojournal.load_json(self.cache_path, None)
        self.scanner = Scanner(self.root, self.repo, cache if isinstance(cache, dict) else None)

    def _sync_baseline(self) -> None:
        """Another process on this store (a second chat, a `clover fix`, `clover undo`) saved a
        newer scan: that is the baseline now, or its agent's steps would look like the user's
        edits here (each write replaces the file, so a new identity means a new scan)."""
        if self._cache_identity() != self._cache_seen:
            self._load_baseline()

    @contextlib.contextmanager
    def _locked(self):
        """One writer at a time per store (a chat and a `clover undo` may run side by side). Once
        the lock is held, Ctrl-C / SIGTERM / SIGHUP wait until the files and the records agree."""
        with open(os.path.join(self.store, "lock"), "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                with held_signals():
                    yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
