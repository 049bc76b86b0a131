"""What a run changed in the work tree, from the files themselves: a snapshot before the run and
one after, diffed. In a git repository the snapshots are trees written with a throwaway index
(gitdiff.py); elsewhere a throwaway object store holds the directory's trees, so a fix outside git
has a real diff too. Both go through libgit2 (tools/git/hostgit.py): nothing in the repository's config
runs, and the user's repository, index and files are untouched."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from clover import gitdiff
from clover.tools.git import hostgit
from clover.tools.listing import NOISE_DIRS
from clover.tools.textio import quoted_path


@dataclass
class FileChange:
    path: str
    added: int | None  # None: a binary file
    removed: int | None


@dataclass
class Change:
    patch_bytes: bytes = b""  # what `git apply` takes: the files' own bytes, whatever their encoding
    files: list[FileChange] = field(default_factory=list)

    @property
    def patch(self) -> str:
        """The patch to read (and for json): a byte that is not UTF-8 shows as U+FFFD."""
        return self.patch_bytes.decode("utf-8", "replace")

    @property
    def added(self) -> int:
        return sum(f.added or 0 for f in self.files)

    @property
    def removed(self) -> int:
        return sum(f.removed or 0 for f in self.files)

    def stat(self) -> str:
        """`2 files changed, +3 -1: calc.py (+1 -1), new.py (+2 -0)`; binary files say so."""
        if not self.files:
            return "no files changed"
        each = ", ".join(
            f"{quoted_path(f.path)} ({'binary' if f.added is None else f'+{f.added} -{f.removed}'})"
            for f in self.files
        )
        count = f"{len(self.files)} file{'s' if len(self.files) != 1 else ''} changed"
        return f"{count}, +{self.added} -{self.removed}: {each}"


class WorkTreeChange:
    """`WorkTreeChange(root)` snapshots now; `.result()` diffs against the tree as it is then.
    Raises RuntimeError (one line) when a tree cannot be made, OSError when a file cannot be read."""

    def __init__(self, root: str | Path) -> None:
        self.root = str(root)
        self.git = gitdiff.is_git_repo(self.root)
        self._shadow: str | None = None
        self._store = None
        if not self.git:
            self._shadow = tempfile.mkdtemp(prefix="clover-change-")
            self._store = hostgit.scratch_store(self._shadow)
        self.before = self._snapshot()

    def result(self) -> Change:
        try:
            after = self._snapshot()
            if after == self.before:
                return Change()
            where = self.root if self.git else self._store
            patch = gitdiff.diff_tree_bytes(where, self.before, after)
            files = [
                FileChange(path, added, removed)
                for path, added, removed in gitdiff.numstat(where, self.before, after)
            ]
            return Change(patch, files)
        finally:
            self.close()

    def close(self) -> None:
        if self._shadow is not None:
            shutil.rmtree(self._shadow, ignore_errors=True)
            self._shadow = None

    def _snapshot(self) -> str:
        if self.git:
            return gitdiff.worktree_tree(self.root)
        return hostgit.directory_tree(self._store, self.root, NOISE_DIRS)
