"""`clover fix`'s view of the work tree: trees before and after the run, their diff, and a commit
of exactly the agent's paths. All of it is Clover's own git on the host, so it goes through
tools/git/hostgit.py (libgit2): no filter, diff driver, hook or signer planted in .git/config runs.
A problem raises RuntimeError with one line (HostGitError is one)."""

from __future__ import annotations

from clover.tools.git.hostgit import (
    changed_paths,
    commit_paths,
    diff_tree_bytes,
    diff_trees,
    is_git_repo,
    numstat,
    worktree_tree,
)

__all__ = [
    "changed_paths",
    "commit_paths",
    "diff_tree_bytes",
    "diff_trees",
    "is_git_repo",
    "numstat",
    "worktree_tree",
]
