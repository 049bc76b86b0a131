"""What the work tree holds, path by path, with every file's content kept in an object store.

A scan maps each path (relative, '/'-separated) to an Entry: a regular file's permission bits and
content (a blob in the checkpoint store's object database, written through libgit2: no git
program, no filter), a symlink's target, a directory's bits, or, for a file over MAX_CONTENT_BYTES
or one that cannot be read, only its size, mtime and inode (kind "big": it can be deleted when it
is still exactly that, never restored). The last scan is kept with each file's stat data (size,
mtime, ctime, inode), which spares re-reading unchanged files, as git's index does (a file changed
within the clock's granularity of being read is read again next time), and shows what changed
between two scans.

Left out: regenerable caches (CACHE_DIRS, by name at any depth: node_modules, .venv, __pycache__ ...), FIFOs,
sockets and devices. Git directories are found by what they hold (HEAD, objects/, refs/), whatever their name
(`.git`, `.g`, `sub/.git`, a bare `x.git`): their state is scanned (HEAD, config, refs, packed-refs, hooks,
info, the index as its entry listing, and the stash list, which git keeps as the reflog `logs/refs/stash`),
their other `logs/`, `lfs/`, lock files never, and their `objects/` only for a repository an agent step
created (so undoing that step can remove it whole). The objects of the user's own repositories are only ever
added to and too big to copy; they are never recorded, so never deleted or rewritten by an undo."""

from __future__ import annotations

import os
import stat
import time
from typing import Any, NamedTuple

from clover.tools import safeio
from clover.tools.undo import gitstate

# Regenerable directories never scanned (big, and rebuilt by their tools).
CACHE_DIRS = frozenset(
    {
        "node_modules",
        ".venv",
        "venv",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
    }
)
MAX_CONTENT_BYTES = 256 * 1024 * 1024  # larger files are recorded by size/mtime/inode, not kept
IN_MEMORY_BYTES = 16 * 1024 * 1024  # larger ones are streamed into the store from disk
GITDIR_SKIP = frozenset({"lfs", "annex"})  # inside a git directory: large-file stores
RACY_NS = 50_000_000  # a file modified this close to being read is read again next time


class Entry(NamedTuple):
    """kind: f (file), l (symlink), d (directory), b (file not kept: big or unreadable),
    x (a git index: `oid` is its entry listing, `extra` its exact bytes)."""

    kind: str
    mode: int = 0
    oid: str = ""
    extra: str = ""

    def same(self, other: Entry | None) -> bool:
        """Whether `other` is this state for undo's purposes (an index by its entries, not its
        stat data; a directory by its bits)."""
        if other is None or other.kind != self.kind:
            return False
        if self.kind == "x":
            return self.oid == other.oid
        return self == other

    def dump(self) -> list[Any]:
        return [self.kind, self.mode, self.oid, self.extra]

    @classmethod
    def load(cls, data: list[Any] | None) -> Entry | None:
        return None if data is None else cls(str(data[0]), int(data[1]), str(data[2]), str(data[3]))


class Scan(NamedTuple):
    entries: dict[str, Entry]
    gitdirs: dict[str, str]  # path of each git directory -> identity of its objects/ (dev:inode)


def is_gitdir(names: set[str], path: str) -> bool:
    return (
        "HEAD" in names
        and os.path.isdir(os.path.join(path, "objects"))
        and os.path.isdir(os.path.join(path, "refs"))
    )


def identity(path: str) -> str:
    info = os.stat(os.path.join(path, "objects"))
    return f"{info.st_dev}:{info.st_ino}"


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


class Scanner:
    """Scans one work tree into Entries, writing contents into `repo` (a pygit2 Repository).

    `cache` holds the last full scan: every path's Entry, with the stat data (size, mtime, ctime,
    inode) under which a file's content is known not to have changed (None where a file changed
    too recently to trust it, and for directories). `previous` is the scan before the last one's
    entries (None before any): what changed between the two, no agent step running, is the user's."""

    def __init__(self, root: str, repo: Any, cache: dict[str, list[Any]] | None = None) -> None:
        self.root, self.repo = root, repo
        self.cache: dict[str, tuple[tuple[int, ...] | None, Entry]] = {}
        for rel, row in (cache or {}).items():
            try:
                self.cache[rel] = (tuple(row[0]) if row[0] else None, Entry.load(row[1]))  # type: ignore[misc]
            except (TypeError, ValueError, IndexError):
                continue
        self.scanned = cache is not None  # a baseline exists (from this process or an earlier one)
        self.agent_repos: set[str] = set()  # identities of repositories recorded whole (agent-made)
        self.previous: dict[str, Entry] | None = None
        self._now = 0  # when the running scan started: files changed since then are read again next time
        self._fresh: dict[str, tuple[tuple[int, ...] | None, Entry]] = {}

    # ------------------------------------------------------------------ whole tree

    def scan(
        self, agent_repos: set[str] = frozenset(), new_allowed: bool = False, known: set[str] = frozenset()
    ) -> Scan:
        """The whole tree. Objects are scanned for repositories in `agent_repos`, and, when
        `new_allowed`, for any repository whose identity is not in `known` (one the step made)."""
        entries: dict[str, Entry] = {}
        gitdirs: dict[str, str] = {}
        self._now, self._fresh = time.time_ns(), {}
        self.agent_repos = set(agent_repos)
        try:
            self._walk("", self.root, entries, gitdirs, (agent_repos, new_allowed, known))
            self.previous = {rel: e for rel, (_k, e) in self.cache.items()} if self.scanned else None
            self.cache, self.scanned = self._fresh, True
        finally:
            self._now, self._fresh = 0, {}
        return Scan(entries, gitdirs)

    def _walk(
        self,
        rel: str,
        full: str,
        entries: dict[str, Entry],
        gitdirs: dict[str, str],
        policy: tuple[Any, ...],
        in_gitdir: bool = False,
        whole: bool = True,
    ) -> None:
        try:
            with os.scandir(full) as it:
                children = list(it)
        except OSError:
            return
        here = is_gitdir({c.name for c in children}, full)
        refs_as_state = False
        if here:
            try:
                ident = identity(full)
            except OSError:
                ident = ""
            gitdirs[rel] = ident
            agent_repos, new_allowed, known = policy
            # a repository an agent step made is recorded whole, so that undoing the step can remove it
            in_gitdir, whole = True, ident in agent_repos or (new_allowed and ident not in known)
            refs_as_state = not whole and self._refs(rel, full, entries)
        for child in children:
            crel = _join(rel, child.name)
            if in_gitdir and (
                child.name.endswith(".lock")
                or (not whole and (child.name in GITDIR_SKIP or (here and child.name == "objects")))
                or (refs_as_state and here and gitstate.is_ref_storage(child.name))
            ):
                continue
            try:
                info = child.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                if child.name in CACHE_DIRS:
                    continue
                entries[crel] = Entry("d", stat.S_IMODE(info.st_mode))
                self._fresh[crel] = (None, entries[crel])
                self._walk(crel, child.path, entries, gitdirs, policy, in_gitdir, whole)
            elif stat.S_ISLNK(info.st_mode) or stat.S_ISREG(info.st_mode):
                entry = self._file(crel, child.path, info, here and child.name == "index")
                if entry is not None:
                    entries[crel] = entry

    def _refs(self, rel: str, full: str, entries: dict[str, Entry]) -> bool:
        """A repository's refs and HEAD as git state (tools/undo/gitstate.py), one entry per ref at its
        name; False when libgit2 cannot read them (its ref files are then scanned as files)."""
        refs = gitstate.read_refs(full)
        if refs is None:
            return False
        for name, target in refs.items():
            entries[_join(rel, name)] = Entry("r", 0, target)
            self._fresh[_join(rel, name)] = (None, entries[_join(rel, name)])  # the baseline holds refs too
        return True

    def dump_cache(self) -> dict[str, list[Any]]:
        return {rel: [key, entry.dump()] for rel, (key, entry) in self.cache.items()}

    # ------------------------------------------------------------------ one path

    def entry(self, rel: str) -> Entry | None:
        """The current state of one path (a directory: only its bits); the baseline is not changed."""
        ref = self.ref_entry(rel)
        if ref is not False:
            return ref  # type: ignore[return-value]
        full = os.path.join(self.root, rel)
        try:  # a link on the way (a directory swapped for one) means the path is not in the tree
            info = safeio.stat_nofollow(full, [self.root])
        except OSError:
            return None
        if stat.S_ISDIR(info.st_mode):
            return Entry("d", stat.S_IMODE(info.st_mode))
        if not (stat.S_ISLNK(info.st_mode) or stat.S_ISREG(info.st_mode)):
            return Entry("b", stat.S_IMODE(info.st_mode), "", "special")
        index = os.path.basename(rel) == "index" and _inside_gitdir(full)
        return self._file(rel, full, info, index)

    def ref_entry(self, rel: str) -> Entry | None | bool:
        """The state of `rel` when it names a ref of a repository whose refs are recorded as git
        state (None: no such ref); False when `rel` is not such a path."""
        found = self._ref_home(rel)
        if found is None:
            return False
        gitdir, name = found
        target = gitstate.read_ref(os.path.join(self.root, gitdir), name)
        return None if target is None else Entry("r", 0, target)

    def user_gitdir(self, rel: str) -> tuple[str, str] | None:
        """(git directory, path inside it) when `rel` lies in a repository recorded by its state
        (not one an agent step made, which is recorded whole); None elsewhere."""
        parts = rel.split("/")
        for cut in range(len(parts) - 1, -1, -1):
            top = "/".join(parts[:cut])
            full = os.path.join(self.root, top) if top else self.root
            try:
                if is_gitdir(set(os.listdir(full)), full):
                    return None if identity(full) in self.agent_repos else (top, "/".join(parts[cut:]))
            except OSError:
                continue
        return None

    def note(self, rel: str, entry: Entry | None) -> None:
        """The baseline learns a path's state after a step recorded it exactly (not by a scan), so
        the next scan does not take the step's change for the user's."""
        if entry is None:
            self.cache.pop(rel, None)
            return
        key = None
        if entry.kind in ("f", "b", "x", "l"):
            try:
                info = os.lstat(os.path.join(self.root, rel))
            except OSError:
                self.cache.pop(rel, None)
                return
            if time.time_ns() - max(info.st_mtime_ns, info.st_ctime_ns) > RACY_NS:
                key = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
        self.cache[rel] = (key, entry)

    def _ref_home(self, rel: str) -> tuple[str, str] | None:
        """(git directory, ref name) when `rel` lies where a ref of a user's repository is recorded."""
        parts = rel.split("/")
        for cut in range(len(parts) - 1, -1, -1):
            top = "/".join(parts[:cut])
            inner = "/".join(parts[cut:])
            full = os.path.join(self.root, top) if top else self.root
            if not gitstate.is_ref_path(inner):
                continue
            try:
                if not is_gitdir(set(os.listdir(full)), full) or identity(full) in self.agent_repos:
                    continue
            except OSError:
                continue
            return top, inner
        return None

    def _file(self, rel: str, full: str, info: os.stat_result, index: bool) -> Entry | None:
        key = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
        cached = self.cache.get(rel)
        if cached is not None and cached[0] == key:  # a chmod changes ctime: the bits are in the key
            entry: Entry | None = cached[1]
        else:
            entry = self._read(full, info, stat.S_IMODE(info.st_mode), index)
        if self._now and entry is not None:  # in a full scan: the new baseline
            trusted = self._now - max(info.st_mtime_ns, info.st_ctime_ns) > RACY_NS
            self._fresh[rel] = (key if trusted else None, entry)
        return entry

    def _read(self, full: str, info: os.stat_result, mode: int, index: bool) -> Entry | None:
        if stat.S_ISLNK(info.st_mode):
            try:
                return Entry("l", 0, str(self.repo.create_blob(os.fsencode(os.readlink(full)))))
            except OSError:
                return None
        signature = f"{info.st_size}:{info.st_mtime_ns}:{info.st_ino}"
        if info.st_size > MAX_CONTENT_BYTES:
            return Entry("b", mode, "", signature)
        if info.st_size > IN_MEMORY_BYTES and not index:
            try:
                return Entry("f", mode, str(self.repo.create_blob_fromdisk(full)))
            except (OSError, ValueError):
                return Entry("b", mode, "", signature)
        try:
            with open(full, "rb") as fh:
                data = fh.read(MAX_CONTENT_BYTES + 1)
        except OSError:
            return Entry("b", mode, "", signature)
        if len(data) > MAX_CONTENT_BYTES:
            return Entry("b", mode, "", signature)
        oid = str(self.repo.create_blob(data))
        if index:
            listing = index_listing(full)
            if listing is not None:
                return Entry("x", mode, str(self.repo.create_blob(listing)), oid)
        return Entry("f", mode, oid)


def _inside_gitdir(full: str) -> bool:
    parent = os.path.dirname(full)
    try:
        return is_gitdir(set(os.listdir(parent)), parent)
    except OSError:
        return False


def index_listing(path: str) -> bytes | None:
    """A git index as `mode oid stage path` lines: what it stages, not its stat data (git rewrites
    those on every status). None when libgit2 cannot read it."""
    import pygit2

    try:
        index = pygit2.Index(path)
    except (pygit2.GitError, OSError, ValueError):
        return None
    lines = []
    for e in index:
        lines.append(f"{e.mode:o} {e.id} 0\t{e.path}")
    conflicts = index.conflicts
    if conflicts is not None:
        for ancestor, ours, theirs in conflicts:
            for stage, e in ((1, ancestor), (2, ours), (3, theirs)):
                if e is not None:
                    lines.append(f"{e.mode:o} {e.id} {stage}\t{e.path}")
    return ("\n".join(sorted(lines)) + "\n").encode("utf-8", "surrogateescape")
