"""Work-tree snapshots as git trees, made with a throwaway index so the user's index is untouched.
`clover fix` diffs the tree before the run against the tree after it: exactly the agent's changes,
untracked new files included."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path


def is_git_repo(root: str | Path) -> bool:
    proc = subprocess.run(
        ["git", "rev-parse", "--is-inside-work-tree"], cwd=root, capture_output=True, text=True
    )
    return proc.returncode == 0 and proc.stdout.strip() == "true"


def _git(root: str | Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, env=env, errors="replace"
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def worktree_tree(root: str | Path) -> str:
    """The work tree (tracked + untracked, .gitignore respected) as a tree object id."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        has_head = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=root,
                                  capture_output=True).returncode == 0
        if has_head:
            _git(root, "read-tree", "HEAD", env=env)
        _git(root, "add", "-A", ".", env=env)
        return _git(root, "write-tree", env=env).strip()


def diff_trees(root: str | Path, before: str, after: str) -> str:
    return _git(root, "diff", "--binary", "--no-color", before, after)


def changed_paths(root: str | Path, before: str, after: str) -> list[str]:
    """Paths (relative to the repository's top level) that differ between two trees."""
    out = _git(root, "diff", "--name-only", "-z", "--no-renames", before, after)
    return [p for p in out.split("\0") if p]


def commit_paths(root: str | Path, paths: list[str], message: str) -> None:
    """Commit exactly `paths` as they are in the work tree; the user's other changes, staged or
    not, stay out of the commit and where they were. Raises RuntimeError (one line) on failure."""
    if not paths:
        return
    top = _git(root, "rev-parse", "--show-toplevel").strip()
    _git(top, "--literal-pathspecs", "add", "-A", "--", *paths)
    proc = subprocess.run(
        ["git", "--literal-pathspecs", "commit", "-q", "--no-verify", "-F", "-", "--only", "--", *paths],
        cwd=top, input=message, capture_output=True, text=True, errors="replace",
    )
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("***")]
        raise RuntimeError(f"git commit: {lines[0] if lines else 'failed'}")
