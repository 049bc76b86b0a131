"""Git on this machine through libgit2 (pygit2), which runs no program: Clover's own git.

The repository's config and hooks are writable by whatever runs in the workspace, and the git
program runs what they name (filter and diff drivers, textconv, fsmonitor, hooks, pagers, signers,
credential helpers), however the key is spelled. libgit2 implements none of that: it has no
external filter or diff drivers, no textconv, no fsmonitor, no hooks, no pager, and signs or
verifies nothing. It only reads the config (includes too, which is reading a file). The one program
libgit2 can start is ssh, for a network transport; nothing here opens a remote.

So every git operation Clover itself performs on the host is here: `clover fix`'s before/after
trees, diff and commit; the chat's status and /diff; the read-only git tool. pygit2 is imported on
first use (`clover --help` stays fast). Errors are HostGitError with one line for the user.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from clover.tools.treescan import CACHE_DIRS

if TYPE_CHECKING:
    import pygit2


class HostGitError(RuntimeError):
    """Not a repository, an unknown revision, a locked index: one line for the user."""


def _lib() -> Any:
    import pygit2

    return pygit2


def open_repo(root: str | os.PathLike[str]) -> pygit2.Repository:
    """The repository whose work tree holds `root` (a `.git` file is followed; GIT_DIR is not read)."""
    pygit2 = _lib()
    if pygit2.discover_repository(os.fspath(root)) is None:
        raise HostGitError(f"{os.fspath(root)} is not inside a git repository")
    try:  # opened from the work tree (searching up), so a `.git` file's work tree is this one
        repo = pygit2.Repository(os.fspath(root))
    except pygit2.GitError as exc:
        raise HostGitError(f"cannot open the repository at {os.fspath(root)}: {exc}") from exc
    if repo.is_bare or repo.workdir is None:
        raise HostGitError(f"{os.fspath(root)} is not inside a git work tree")
    inside, gitdir = os.path.realpath(root), os.path.realpath(repo.path)
    if inside == gitdir or inside.startswith(gitdir + os.sep):
        raise HostGitError(f"{os.fspath(root)} is inside a git directory, not a work tree")
    return repo


def is_git_repo(root: str | os.PathLike[str]) -> bool:
    try:
        open_repo(root)
    except (HostGitError, OSError):
        return False
    return True


def _head_commit(repo: pygit2.Repository) -> pygit2.Commit | None:
    if repo.head_is_unborn:
        return None
    return repo.head.peel(_lib().Commit)


def _empty_tree(repo: pygit2.Repository) -> pygit2.Tree:
    return repo[repo.TreeBuilder().write()]


def _worktree_entry(repo: pygit2.Repository, rel: str) -> tuple[Any, int] | None:
    """(blob id, file mode) of `rel` as it is in the work tree; None when it is absent or a directory.
    Content goes through libgit2's own conversions only (eol, ident): no filter program."""
    pygit2 = _lib()
    full = os.path.join(repo.workdir, rel)
    try:
        info = os.lstat(full)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return repo.create_blob(os.fsencode(os.readlink(full))), pygit2.enums.FileMode.LINK
    if not stat.S_ISREG(info.st_mode):
        return None
    executable = bool(info.st_mode & stat.S_IXUSR)
    mode = pygit2.enums.FileMode.BLOB_EXECUTABLE if executable else pygit2.enums.FileMode.BLOB
    return repo.create_blob_fromworkdir(rel), mode


def _index_with(repo: pygit2.Repository, paths: list[str]) -> pygit2.Index:
    """An in-memory index: HEAD's tree with `paths` taken from the work tree (the user's index
    is not read or written)."""
    pygit2 = _lib()
    index = pygit2.Index()
    head = _head_commit(repo)
    if head is not None:
        index.read_tree(head.tree)
    for rel in paths:
        entry = _worktree_entry(repo, rel)
        if entry is None:
            if rel in index and not os.path.lexists(os.path.join(repo.workdir, rel)):
                index.remove(rel)  # deleted (a directory there, a submodule's, stays as HEAD has it)
            continue
        oid, mode = entry
        if rel in index and index[rel].mode == pygit2.enums.FileMode.COMMIT:
            continue  # a submodule stays what HEAD records
        index.add(pygit2.IndexEntry(rel, oid, mode))
    return index


def _changed_paths_in_worktree(repo: pygit2.Repository) -> list[str]:
    """Paths whose work-tree state may differ from HEAD (staged or not, untracked not ignored).
    Untracked files under a regenerable cache (`__pycache__` from running the tests, `.venv`) are
    not the work's change even where no .gitignore says so."""
    new = _lib().enums.FileStatus.WT_NEW
    return sorted(
        path
        for path, flags in repo.status(untracked_files="all", ignored=False).items()
        if not path.endswith("/") and not (flags & new and CACHE_DIRS.intersection(path.split("/")[:-1]))
    )


def worktree_tree(root: str | os.PathLike[str]) -> str:
    """The work tree (tracked + untracked, .gitignore respected) as a tree id."""
    repo = open_repo(root)
    try:
        return str(_index_with(repo, _changed_paths_in_worktree(repo)).write_tree(repo))
    except _lib().GitError as exc:
        raise HostGitError(f"git: {exc}") from exc


def _patch_text(diff: pygit2.Diff, only: str | None = None) -> str:
    if only is None:
        return diff.patch or ""
    parts = []
    for patch in diff:
        delta = patch.delta
        if any(
            p == only or p.startswith(only.rstrip("/") + "/")
            for p in (delta.old_file.path, delta.new_file.path)
        ):
            parts.append(patch.text or "")
    return "".join(parts)


def _repo(where: str | os.PathLike[str] | pygit2.Repository) -> pygit2.Repository:
    return where if isinstance(where, _lib().Repository) else open_repo(where)


def scratch_store(path: str | os.PathLike[str]) -> pygit2.Repository:
    """A bare object store of Clover's own (a temp dir) for trees of a directory outside git."""
    return _lib().init_repository(os.fspath(path), bare=True)


def directory_tree(
    store: pygit2.Repository, root: str | os.PathLike[str], skip: frozenset[str] | set[str]
) -> str:
    """`root` as a tree id in `store`: regular files (with the executable bit) and symlinks,
    directories named in `skip` and any nested `.git` left out. Reads files; runs nothing."""
    pygit2 = _lib()

    def tree_of(directory: str) -> Any:
        builder = store.TreeBuilder()
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name == ".git" or (entry.name in skip and entry.is_dir(follow_symlinks=False)):
                    continue
                if entry.is_symlink():
                    blob = store.create_blob(os.fsencode(os.readlink(entry.path)))
                    builder.insert(entry.name, blob, pygit2.enums.FileMode.LINK)
                elif entry.is_dir(follow_symlinks=False):
                    sub = tree_of(entry.path)
                    if len(store[sub]):  # git stores no empty directories
                        builder.insert(entry.name, sub, pygit2.enums.FileMode.TREE)
                elif entry.is_file(follow_symlinks=False):
                    executable = entry.stat(follow_symlinks=False).st_mode & stat.S_IXUSR
                    mode = pygit2.enums.FileMode.BLOB_EXECUTABLE if executable else pygit2.enums.FileMode.BLOB
                    builder.insert(entry.name, store.create_blob_fromdisk(entry.path), mode)
        return builder.write()

    return str(tree_of(os.fspath(root)))


def diff_trees(root: str | os.PathLike[str] | pygit2.Repository, before: str, after: str) -> str:
    """A patch from tree `before` to tree `after`, binary files included, as text (a byte that is
    not UTF-8 shows as U+FFFD: for reading; `diff_tree_bytes` is the patch `git apply` takes)."""
    return diff_tree_bytes(root, before, after).decode("utf-8", "replace")


def diff_tree_bytes(root: str | os.PathLike[str] | pygit2.Repository, before: str, after: str) -> bytes:
    """The patch from tree `before` to tree `after` with the files' own bytes, whatever their encoding."""
    repo = _repo(root)
    flags = _lib().enums.DiffOption.SHOW_BINARY
    return b"".join(patch.data for patch in repo[before].diff_to_tree(repo[after], flags=flags))


def numstat(
    root: str | os.PathLike[str] | pygit2.Repository, before: str, after: str
) -> list[tuple[str, int | None, int | None]]:
    """(path, lines added, lines removed) per file that differs; None, None for a binary file
    (`git diff --numstat`)."""
    repo = _repo(root)
    out = []
    for patch in repo[before].diff_to_tree(repo[after]):
        delta = patch.delta
        path = (
            delta.new_file.path if delta.status != _lib().enums.DeltaStatus.DELETED else delta.old_file.path
        )
        if delta.is_binary:
            out.append((path, None, None))
        else:
            _context, added, removed = patch.line_stats
            out.append((path, added, removed))
    return out


def changed_paths(root: str | os.PathLike[str], before: str, after: str) -> list[str]:
    """Paths (relative to the repository's top level) that differ between two trees."""
    repo = open_repo(root)
    diff = repo[before].diff_to_tree(repo[after])
    return sorted({p for d in diff.deltas for p in (d.old_file.path, d.new_file.path)})


def _signature(repo: pygit2.Repository, who: str, environ: Mapping[str, str] | None) -> pygit2.Signature:
    """GIT_AUTHOR_* / GIT_COMMITTER_* as the git program reads them (from `environ`: the environment
    the agent's commands get, so its `git commit` command and the git tool agree), else user.name/email."""
    pygit2 = _lib()
    environ = os.environ if environ is None else environ
    name, email = environ.get(f"GIT_{who}_NAME"), environ.get(f"GIT_{who}_EMAIL")
    config = repo.config
    try:
        name = name or config["user.name"]
        email = email or config["user.email"]
    except KeyError:
        raise HostGitError("git commit: who are you? set user.name and user.email (git config)") from None
    return pygit2.Signature(name, email)


def _commit(
    repo: pygit2.Repository, tree: Any, message: str, environ: Mapping[str, str] | None = None
) -> str:
    head = _head_commit(repo)
    parents = [head.id] if head is not None else []
    oid = repo.create_commit(
        "HEAD",
        _signature(repo, "AUTHOR", environ),
        _signature(repo, "COMMITTER", environ),
        message,
        tree,
        parents,
    )
    return str(oid)


def commit_paths(
    root: str | os.PathLike[str], paths: list[str], message: str, environ: Mapping[str, str] | None = None
) -> str | None:
    """Commit exactly `paths` as they are in the work tree (no hook runs, nothing is signed); the
    user's other changes, staged or not, stay out of the commit and where they were. The index
    entries of `paths` are updated to the commit, as `git commit --only` does."""
    if not paths:
        return None
    repo = open_repo(root)
    pygit2 = _lib()
    try:
        tree = _index_with(repo, paths).write_tree(repo)
        made = _commit(repo, tree, message, environ)
        index = repo.index
        index.read()
        for rel in paths:
            if _worktree_entry(repo, rel) is None:
                if rel in index:
                    index.remove(rel)
            else:
                index.add(rel)
        index.write()
        return made
    except pygit2.GitError as exc:
        raise HostGitError(f"git commit: {exc}") from exc


# ----------------------------------------------------------------------------- the git tool


_INDEX_CODES = (
    ("INDEX_NEW", "A"),
    ("INDEX_MODIFIED", "M"),
    ("INDEX_DELETED", "D"),
    ("INDEX_RENAMED", "R"),
    ("INDEX_TYPECHANGE", "T"),
)
_WT_CODES = (("WT_MODIFIED", "M"), ("WT_DELETED", "D"), ("WT_RENAMED", "R"), ("WT_TYPECHANGE", "T"))


def _xy(flags: int) -> str:
    status = _lib().enums.FileStatus
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
        if flags & _lib().enums.FileStatus.IGNORED:
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
        head = _head_commit(repo)
        diff = repo.index.diff_to_tree(head.tree if head is not None else _empty_tree(repo))
    else:
        diff = repo.diff()
    return _patch_text(diff, only)


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
    head = _head_commit(repo)
    if head is None:
        return ""
    only = _relative(repo, path)
    lines: list[str] = []
    order = _lib().enums.SortMode
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
    pygit2 = _lib()
    repo = open_repo(root)
    try:
        commit = repo.revparse_single(rev).peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError) as exc:
        raise HostGitError(f"unknown revision {rev!r}") from exc
    parent = commit.parents[0].tree if commit.parents else _empty_tree(repo)
    diff = parent.diff_to_tree(commit.tree)
    author = commit.author
    when = datetime.fromtimestamp(author.time, timezone(timedelta(minutes=author.offset)))
    body = "\n".join(("    " + ln).rstrip() for ln in commit.message.rstrip("\n").split("\n"))
    fmt = pygit2.enums.DiffStatsFormat
    stats = diff.stats.format(fmt.FULL | fmt.INCLUDE_SUMMARY, 80) if len(diff) else ""
    return (
        f"commit {commit.id}\nAuthor: {author.name} <{author.email}>\n"
        f"Date:   {when.strftime('%a %b %-d %H:%M:%S %Y %z')}\n\n{body}\n\n{stats}\n{_patch_text(diff)}"
    )


def changed_files(root: str | os.PathLike[str]) -> list[str]:
    """Files that differ from HEAD, staged or not, untracked included (ignored ones not)."""
    repo = open_repo(root)
    flags = repo.status(untracked_files="all", ignored=False)
    return sorted(p for p, f in flags.items() if not f & _lib().enums.FileStatus.IGNORED)


def commit_index(
    root: str | os.PathLike[str], message: str, environ: Mapping[str, str] | None = None
) -> str | None:
    """Commit what is staged, as `git commit -m` does; None when nothing is. No hook runs and
    nothing is signed."""
    pygit2 = _lib()
    repo = open_repo(root)
    try:
        index = repo.index
        index.read()
        tree = index.write_tree()
        head = _head_commit(repo)
        if (head.tree.id if head is not None else None) == tree or (head is None and not len(index)):
            return None
        return _commit(repo, tree, message, environ)
    except pygit2.GitError as exc:
        raise HostGitError(f"git commit: {exc}") from exc
