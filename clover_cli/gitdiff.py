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
