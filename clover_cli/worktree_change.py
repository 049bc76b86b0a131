"""What a run changed in the work tree, from the files themselves: a snapshot before the run and
one after, diffed. In a git repository the snapshots are trees written with a throwaway index
(gitdiff.py); elsewhere a throwaway shadow repository (its own GIT_DIR, the directory as its work
tree) holds them, so a fix outside git has a real diff too. Either way the user's repository,
index and files are untouched."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from clover import gitdiff
from clover.tools.gitsafe import run_git
from clover.tools.listing import NOISE_DIRS


@dataclass
class FileChange:
    path: str
    added: int | None  # None: a binary file
    removed: int | None


@dataclass
class Change:
    patch: str = ""
    files: list[FileChange] = field(default_factory=list)

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
        each = ", ".join(f"{f.path} ({'binary' if f.added is None else f'+{f.added} -{f.removed}'})"
                         for f in self.files)
        count = f"{len(self.files)} file{'s' if len(self.files) != 1 else ''} changed"
        return f"{count}, +{self.added} -{self.removed}: {each}"


class WorkTreeChange:
    """`WorkTreeChange(root)` snapshots now; `.result()` diffs against the tree as it is then.
    Raises RuntimeError (one line) when git fails, OSError when it cannot run."""

    def __init__(self, root: str | Path) -> None:
        self.root = str(root)
        self.git = gitdiff.is_git_repo(self.root)
        self._shadow: str | None = None
        if not self.git:
            self._shadow = tempfile.mkdtemp(prefix="clover-change-")
            self._run("init", "-q")
            excludes = "\n".join(f"{name}/" for name in sorted(NOISE_DIRS)) + "\n"
            Path(self._shadow, "info").mkdir(exist_ok=True)
            Path(self._shadow, "info", "exclude").write_text(excludes, encoding="utf-8")
        self.before = self._snapshot()

    def result(self) -> Change:
        try:
            after = self._snapshot()
            if after == self.before:
                return Change()
            patch = self._run("diff", "--binary", "--no-color", "--no-renames", self.before, after)
            numstat = self._run("diff", "--numstat", "-z", "--no-renames", self.before, after)
            return Change(patch, _parse_numstat(numstat))
        finally:
            self.close()

    def close(self) -> None:
        if self._shadow is not None:
            shutil.rmtree(self._shadow, ignore_errors=True)
            self._shadow = None

    def _snapshot(self) -> str:
        if self.git:
            return gitdiff.worktree_tree(self.root)
        with tempfile.TemporaryDirectory() as tmp:
            index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self._run("add", "-A", ".", extra=index)
            return self._run("write-tree", extra=index).strip()

    def _run(self, *args: str, extra: dict[str, str] | None = None) -> str:
        env = dict(os.environ)
        if self._shadow is not None:
            env.update(GIT_DIR=self._shadow, GIT_WORK_TREE=self.root)
            args = ("-c", "core.autocrlf=false", "-c", "advice.addEmbeddedRepo=false", *args)
        env.update(extra or {})
        proc = run_git(list(args), self.root, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"git {args[-1] if args else ''}: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout.decode("utf-8", "replace")


def _parse_numstat(out: str) -> list[FileChange]:
    """`git diff --numstat -z`: `added<TAB>removed<TAB>path<NUL>`, `-` counts for binary files."""
    files = []
    for item in out.split("\0"):
        parts = item.split("\t", 2)
        if len(parts) == 3:
            added, removed, path = parts
            files.append(FileChange(path.strip("\n"), None if added == "-" else int(added),
                                    None if removed == "-" else int(removed)))
    return files
