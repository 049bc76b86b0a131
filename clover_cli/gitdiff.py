"""Work-tree snapshots as git trees, made with a throwaway index so the user's index is untouched.
`clover fix` diffs the tree before the run against the tree after it: exactly the agent's changes,
untracked new files included."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from clover.tools.gitsafe import run_git

# Every git here runs on the host after commands ran in the workspace, so through the hardened
# helper: a hook, fsmonitor, filter or diff driver planted in .git/config never runs.


def is_git_repo(root: str | Path) -> bool:
    try:
        proc = run_git(["rev-parse", "--is-inside-work-tree"], str(root), timeout=60)
    except OSError:
        return False
    return proc.returncode == 0 and proc.stdout.decode(errors="replace").strip() == "true"


def _run(root: str | Path, args: list[str], env: dict[str, str] | None = None, input: str | None = None):
    return run_git(args, str(root), env=env, input=None if input is None else input.encode(), timeout=600)


def _git(root: str | Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = _run(root, list(args), env)
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout.decode("utf-8", "replace")


def worktree_tree(root: str | Path) -> str:
    """The work tree (tracked + untracked, .gitignore respected) as a tree object id."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index")}
        has_head = _run(root, ["rev-parse", "--verify", "-q", "HEAD"], env).returncode == 0
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
    proc = _run(top, ["--literal-pathspecs", "commit", "-q", "--no-verify", "-F", "-", "--only", "--", *paths],
                input=message)
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", "replace")
        lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("***")]
        raise RuntimeError(f"git commit: {lines[0] if lines else 'failed'}")
