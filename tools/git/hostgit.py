"""Git on this machine through libgit2 (pygit2), which runs no program: Clover's own git.

The repository's config and hooks are writable by whatever runs in the workspace, and the git
program runs what they name (filter and diff drivers, textconv, fsmonitor, hooks, pagers, signers,
credential helpers), however the key is spelled. libgit2 implements none of that: it has no
external filter or diff drivers, no textconv, no fsmonitor, no hooks, no pager, and signs or
verifies nothing. It only reads the config (includes too, which is reading a file). The one program
libgit2 can start is ssh, for a network transport; nothing here opens a remote.

So every git operation Clover itself performs on the host is here: `clover fix`'s before/after
trees, diff and commit, the chat's /diff; and, through tools/git/gitporcelain.py, the chat's status and
the git tool's status, diff, log, show and commit. pygit2 is imported on first use (`clover --help`
stays fast). Errors are HostGitError with one line for the user.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from clover.tools.undo.treescan import CACHE_DIRS

if TYPE_CHECKING:
    import pygit2


class HostGitError(RuntimeError):
    """Not a repository, an unknown revision, a locked index: one line for the user."""


def lib() -> Any:
    """pygit2, imported on first use."""
    import pygit2

    return pygit2


def open_repo(root: str | os.PathLike[str]) -> pygit2.Repository:
    """The repository whose work tree holds `root` (a `.git` file is followed; GIT_DIR is not read)."""
    pygit2 = lib()
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


def head_commit(repo: pygit2.Repository) -> pygit2.Commit | None:
    """The commit HEAD names; None on an unborn branch."""
    if repo.head_is_unborn:
        return None
    return repo.head.peel(lib().Commit)


def empty_tree(repo: pygit2.Repository) -> pygit2.Tree:
    """The empty tree (what a root commit is compared with)."""
    return repo[repo.TreeBuilder().write()]


def _worktree_entry(repo: pygit2.Repository, rel: str) -> tuple[Any, int] | None:
    """(blob id, file mode) of `rel` as it is in the work tree; None when it is absent or a directory.
    Content goes through libgit2's own conversions only (eol, ident): no filter program."""
    pygit2 = lib()
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
    pygit2 = lib()
    index = pygit2.Index()
    head = head_commit(repo)
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
    new = lib().enums.FileStatus.WT_NEW
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
    except lib().GitError as exc:
        raise HostGitError(f"git: {exc}") from exc


def patch_text(diff: pygit2.Diff, only: str | None = None) -> str:
    """The diff's patch as text; with `only`, just the files at or under that path."""
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
    return where if isinstance(where, lib().Repository) else open_repo(where)


def scratch_store(path: str | os.PathLike[str]) -> pygit2.Repository:
    """A bare object store of Clover's own (a temp dir) for trees of a directory outside git."""
    return lib().init_repository(os.fspath(path), bare=True)


def directory_tree(
    store: pygit2.Repository, root: str | os.PathLike[str], skip: frozenset[str] | set[str]
) -> str:
    """`root` as a tree id in `store`: regular files (with the executable bit) and symlinks,
    directories named in `skip` and any nested `.git` left out. Reads files; runs nothing."""
    pygit2 = lib()

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
    flags = lib().enums.DiffOption.SHOW_BINARY
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
        path = delta.new_file.path if delta.status != lib().enums.DeltaStatus.DELETED else delta.old_file.path
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
    pygit2 = lib()
    environ = os.environ if environ is None else environ
    name, email = environ.get(f"GIT_{who}_NAME"), environ.get(f"GIT_{who}_EMAIL")
    config = repo.config
    try:
        name = name or config["user.name"]
        email = email or config["user.email"]
    except KeyError:
        raise HostGitError("git commit: who are you? set user.name and user.email (git config)") from None
    return pygit2.Signature(name, email)


def commit_on_head(
    repo: pygit2.Repository, tree: Any, message: str, environ: Mapping[str, str] | None = None
) -> str:
    """Commit `tree` onto HEAD (its parent, where HEAD has a commit), by the environment's or the
    config's identity; no hook runs and nothing is signed. Returns the commit's id."""
    head = head_commit(repo)
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
    pygit2 = lib()
    try:
        tree = _index_with(repo, paths).write_tree(repo)
        made = commit_on_head(repo, tree, message, environ)
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
