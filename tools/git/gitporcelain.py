"""git's porcelain on the host as the git tool and the chat's status use it, through libgit2
(Clover's own git, tools/git/hostgit.py: no program runs): `git status --short --branch`, `git diff`,
`git log`, `git show`, the files that differ from HEAD, and a commit of what is staged (no hook
runs, nothing is signed).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from clover.tools.git.hostgit import (
    HostGitError,
    commit_on_head,
    empty_tree,
    head_commit,
    lib,
    open_repo,
    patch_text,
)

if TYPE_CHECKING:
    import pygit2


_INDEX_CODES = (
    ("INDEX_NEW", "A"),
    ("INDEX_MODIFIED", "M"),
    ("INDEX_DELETED", "D"),
    ("INDEX_RENAMED", "R"),
    ("INDEX_TYPECHANGE", "T"),
)
_WT_CODES = (("WT_MODIFIED", "M"), ("WT_DELETED", "D"), ("WT_RENAMED", "R"), ("WT_TYPECHANGE", "T"))


def _xy(flags: int) -> str:
    status = lib().enums.FileStatus
    if flags & status.CONFLICTED:
        return "UU"
    if flags == status.WT_NEW:
        return "??"
    x = next((c for name, c in _INDEX_CODES if flags & status[name]), " ")
    y = next((c for name, c in _WT_CODES if flags & status[name]), " ")
    return x + y


def _branch_line(repo: pygit2.Repository) -> str:
    if repo.head_is_unborn:
        target = repo.references["HEAD"].target
        return f"## No commits yet on {str(target).removeprefix('refs/heads/')}"
    if repo.head_is_detached:
        return "## HEAD (no branch)"
    name = repo.head.shorthand
    line = f"## {name}"
    branch = repo.branches.local.get(name)
    upstream = branch.upstream if branch is not None else None
    if upstream is not None:
        ahead, behind = repo.ahead_behind(branch.target, upstream.target)
        counts = [f"ahead {ahead}"] * bool(ahead) + [f"behind {behind}"] * bool(behind)
        line += f"...{upstream.shorthand}" + (f" [{', '.join(counts)}]" if counts else "")
    return line


def status_short(root: str | os.PathLike[str]) -> str:
    """`git status --short --branch`."""
    repo = open_repo(root)
    lines = [_branch_line(repo)]
    for path, flags in sorted(repo.status(untracked_files="normal", ignored=False).items()):
        if flags & lib().enums.FileStatus.IGNORED:
            continue
        lines.append(f"{_xy(flags)} {path}")
    return "\n".join(lines) + "\n"


def _relative(repo: pygit2.Repository, path: str | None) -> str | None:
    if not path:
        return None
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(repo.workdir))
    if rel == ".":
        return None
    if rel.startswith(".."):
        raise HostGitError(f"{path} is outside the repository")
    return rel


def diff_text(root: str | os.PathLike[str], *, staged: bool = False, path: str | None = None) -> str:
    """`git diff [--cached] [-- path]`: unstaged (index to work tree) or staged (HEAD to index)."""
    repo = open_repo(root)
    only = _relative(repo, path)
    if staged:
        head = head_commit(repo)
        diff = repo.index.diff_to_tree(head.tree if head is not None else empty_tree(repo))
    else:
        diff = repo.diff()
    return patch_text(diff, only)


def _short_date(sig: pygit2.Signature) -> str:
    return datetime.fromtimestamp(sig.time, timezone(timedelta(minutes=sig.offset))).strftime("%Y-%m-%d")


def _touches(repo: pygit2.Repository, commit: pygit2.Commit, rel: str) -> bool:
    def entry(tree: pygit2.Tree) -> str | None:
        try:
            return str(tree[rel].id)
        except KeyError:
            return None

    mine = entry(commit.tree)
    parents = [entry(p.tree) for p in commit.parents] or [None]
    return all(mine != theirs for theirs in parents)


def log_lines(root: str | os.PathLike[str], n: int = 10, path: str | None = None) -> str:
    """`git log -n N --date=short --format='%h %ad %an: %s' [-- path]`."""
    repo = open_repo(root)
    head = head_commit(repo)
    if head is None:
        return ""
    only = _relative(repo, path)
    lines: list[str] = []
    order = lib().enums.SortMode
    for commit in repo.walk(head.id, order.TOPOLOGICAL | order.TIME):  # git log's: children first
        if only is not None and not _touches(repo, commit, only):
            continue
        summary = " ".join(commit.message.strip().split("\n\n", 1)[0].split())
        lines.append(f"{commit.short_id} {_short_date(commit.author)} {commit.author.name}: {summary}")
        if len(lines) >= n:
            break
    return "\n".join(lines) + ("\n" if lines else "")


def show_text(root: str | os.PathLike[str], rev: str = "HEAD") -> str:
    """`git show --stat --patch REV`: the commit's header, message, stat and patch (against its
    first parent)."""
    pygit2 = lib()
    repo = open_repo(root)
    try:
        commit = repo.revparse_single(rev).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError) as exc:
        raise HostGitError(f"unknown revision {rev!r}") from exc
    parent = commit.parents[0].tree if commit.parents else empty_tree(repo)
    diff = parent.diff_to_tree(commit.tree)
    author = commit.author
    when = datetime.fromtimestamp(author.time, timezone(timedelta(minutes=author.offset)))
    body = "\n".join(("    " + ln).rstrip() for ln in commit.message.rstrip("\n").split("\n"))
    fmt = pygit2.enums.DiffStatsFormat
    stats = diff.stats.format(fmt.FULL | fmt.INCLUDE_SUMMARY, 80) if len(diff) else ""
    return (
        f"commit {commit.id}\nAuthor: {author.name} <{author.email}>\n"
        f"Date:   {when.strftime('%a %b %-d %H:%M:%S %Y %z')}\n\n{body}\n\n{stats}\n{patch_text(diff)}"
    )


def changed_files(root: str | os.PathLike[str]) -> list[str]:
    """Files that differ from HEAD, staged or not, untracked included (ignored ones not)."""
    repo = open_repo(root)
    flags = repo.status(untracked_files="all", ignored=False)
    return sorted(p for p, f in flags.items() if not f & lib().enums.FileStatus.IGNORED)


def commit_index(
    root: str | os.PathLike[str], message: str, environ: Mapping[str, str] | None = None
) -> str | None:
    """Commit what is staged, as `git commit -m` does; None when nothing is. No hook runs and
    nothing is signed."""
    pygit2 = lib()
    repo = open_repo(root)
    try:
        index = repo.index
        index.read()
        tree = index.write_tree()
        head = head_commit(repo)
        if (head.tree.id if head is not None else None) == tree or (head is None and not len(index)):
            return None
        return commit_on_head(repo, tree, message, environ)
    except pygit2.GitError as exc:
        raise HostGitError(f"git commit: {exc}") from exc
