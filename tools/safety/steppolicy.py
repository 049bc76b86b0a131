"""What a step may change, decided on what it changed (the overlay's change set), not on how the
command was spelled.

Three outcomes for each change (`review`):

- **applied**: carried over to the workspace and recorded for undo (almost everything).
- **kept**: a path the step removed or overwrote that stays as it was, always: a repository's
  history (its object store but files git rebuilds from it), its `HEAD` and its `refs/`
  directory, and the git directory itself (removing or replacing `.git`, or a directory holding
  one, keeps it whole). Git
  objects are only ever added; a ref, the index or the stash changes only as git state, which
  undo records by name (tools/undo/gitstate.py). So `git gc --prune`, `rm -rf .git` or a moved `.git`
  can take no history away, whatever command did it.
- **held**: a change that would make a program run later on the host, outside every step, with
  no one asking: applied only when the user says yes to it (the chat asks; headless runs do not
  apply it and say so). Which paths and why:

  - `<git dir>/hooks/*` (not `*.sample`): git runs them on commit, checkout, merge, push; and
    whatever directory a repository's `core.hooksPath` names instead (husky keeps its hooks in the
    work tree: `.husky/_`), read from the repository's configuration at all its levels.
  - `<git dir>/config`, `config.worktree`, when a changed key is not on the list below:
    `core.fsmonitor`, `core.hooksPath`, `core.pager`, `core.sshCommand`, aliases, filter, diff
    and merge drivers, credential helpers, `include.path` ... name programs git starts.
  - `<git dir>/info/*` but `exclude`: `attributes` assigns filter and diff drivers, `grafts`
    rewrites history.
  - `<git dir>/objects/info/alternates`, `commondir`, `gitdir`: point the repository elsewhere.
  - `.gitmodules` with `submodule.*.update = !command`: `git submodule update` runs it.
  - `.vscode/*`, `.idea/*`: editors run the tasks, launchers and terminals named there.
  - when the workspace holds the home directory: shell start-up files, `~/.ssh`, `~/.gitconfig`,
    `~/.local/bin`, autostart entries and user services (the next login or git command runs them).

  A config change is applied unasked when every key it adds, changes or removes is one that
  names no program: `user.*`, `author.*`, `committer.*`, `remote.<r>.url` / `pushurl` (not a
  `::` transport), `remote.<r>.fetch` / `push` / `tagopt` / `prune`, `branch.<b>.*` but
  `branch.<b>.pushremote` programs, `core.` layout keys (`repositoryformatversion`, `filemode`,
  `bare`, `logallrefupdates`, `ignorecase`, `symlinks`, `autocrlf`, `eol`, ...), `init.*`,
  `pull.*`, `push.default`, `merge.ff` / `conflictstyle`, `rebase.autosquash` / `autostash`,
  `fetch.prune`, `advice.*`, `color.*`, `column.*`, `status.*`, `log.*`, `extensions.*`,
  `submodule.<s>.url` / `active` / `branch`, `submodule.<s>.update` without `!`.

Everything else a step writes in the workspace is applied and recorded: what it deleted, undo
brings back.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

from clover.tools.safety.overlay import LayerChange

_HOOKS = re.compile(r"hooks/(?!.*\.sample$).+")
_CONFIGS = re.compile(r"(config|config\.worktree|worktrees/[^/]+/config\.worktree)")
_INFO = re.compile(r"info/(?!exclude$|refs$|packs$).+")
_POINTERS = re.compile(
    r"(objects/info/(http-)?alternates|commondir|gitdir|worktrees/[^/]+/(gitdir|commondir))"
)
# files of the object store that git rebuilds from the objects (a step may rewrite or remove them)
_DERIVED = re.compile(
    r"objects/(info/(packs|commit-graph|commit-graphs(/.*)?)|pack/multi-pack-index.*|pack/.*\.tmp|.*tmp_.*)"
)
_SAFE_KEYS = re.compile(
    r"(user|author|committer|init|pull|advice|color|column|status|log|extensions|i18n)\.[^.]+"
    r"|core\.(repositoryformatversion|filemode|bare|logallrefupdates|ignorecase|precomposeunicode|symlinks"
    r"|autocrlf|safecrlf|eol|quotepath|abbrev|compression|bigfilethreshold|sparsecheckout|sparsecheckoutcone"
    r"|splitindex|untrackedcache|commitgraph|multipackindex|checkstat|trustctime|whitespace|fscache)"
    r"|remote\..+\.(url|pushurl|fetch|push|tagopt|prune|mirror|skipdefaultupdate|skipfetchall|promisor"
    r"|partialclonefilter)"
    r"|branch\..+\.(remote|merge|rebase|description)"
    r"|submodule\..+\.(url|active|branch|path|update|shallow|fetchrecursesubmodules|ignore)"
    r"|push\.(default|autosetupremote|followtags)|merge\.(ff|conflictstyle|log)"
    r"|rebase\.(autosquash|autostash|updaterefs)|fetch\.(prune|prunetags|writecommitgraph)"
    r"|gc\.(auto|autodetach|autopacklimit)|diff\.(renames|algorithm|mnemonicprefix|context)",
    re.IGNORECASE,
)
_EDITOR_DIRS = (".vscode", ".idea")
_HOOK_NAMES = frozenset(
    [
        "applypatch-msg",
        "pre-applypatch",
        "post-applypatch",
        "pre-commit",
        "pre-merge-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "pre-rebase",
        "post-checkout",
        "post-merge",
        "pre-push",
        "pre-receive",
        "update",
        "proc-receive",
        "post-receive",
        "post-update",
        "reference-transaction",
        "push-to-checkout",
        "pre-auto-gc",
        "post-rewrite",
        "sendemail-validate",
        "fsmonitor-watchman",
        "post-index-change",
    ]
)
# relative to the home directory, when the workspace holds it
_HOME_STARTUP = re.compile(
    r"(\.(bashrc|bash_profile|bash_login|bash_logout|profile|zshrc|zprofile|zshenv|zlogin|zlogout|kshrc"
    r"|cshrc|tcshrc|xinitrc|xprofile|xsession|pam_environment|gitconfig|inputrc|npmrc|pypirc|curlrc"
    r"|wgetrc)"
    r"|\.ssh/.*|\.gnupg/.*|\.config/(git|fish|autostart|systemd|environment\.d)/.*"
    r"|\.local/share/(applications|systemd)/.*|\.local/bin/.*|bin/.*)"
)


@dataclass(frozen=True)
class Held:
    """A change applied only when the user says yes: the path, why it was held, the change."""

    path: str
    why: str
    change: LayerChange


@dataclass
class Review:
    apply: list[LayerChange] = field(default_factory=list)
    protect: set[str] = field(default_factory=set)  # real paths a removal leaves in place
    kept: list[tuple[str, str]] = field(default_factory=list)  # (path, why) not carried over, by rule
    held: list[Held] = field(default_factory=list)


class _Repos:
    """Git directories of the real tree (found by content), looked up once per directory."""

    def __init__(self, lower: str) -> None:
        self.lower = lower
        self._seen: dict[str, bool] = {}
        self._hooks: dict[str, str | None | bool] = {}
        self.work_trees: set[str] = set()  # relative to lower, "" for lower itself

    def is_gitdir(self, rel: str) -> bool:
        if rel not in self._seen:
            full = os.path.join(self.lower, rel) if rel else self.lower
            self._seen[rel] = (
                os.path.isfile(os.path.join(full, "HEAD"))
                and os.path.isdir(os.path.join(full, "objects"))
                and os.path.isdir(os.path.join(full, "refs"))
            )
        return self._seen[rel]

    def hooks_dir_of(self, rel: str) -> str | None:
        """The hooks directory (relative to `lower`) that `core.hooksPath` gives the work tree holding
        `rel`, when it lies inside `lower`; None when there is none or it is elsewhere."""
        parts = rel.split("/")[:-1]
        for cut in range(len(parts), -1, -1):
            top = "/".join(parts[:cut])
            if top not in self._hooks:
                self._hooks[top] = self._read_hooks_path(top)
            found = self._hooks[top]
            if found is not False:
                return found  # type: ignore[return-value]  # the nearest work tree decides
        return None

    def _read_hooks_path(self, top: str) -> str | None | bool:
        """False: `top` is no work tree; None: one without core.hooksPath inside `lower`."""
        full = os.path.join(self.lower, top) if top else self.lower
        if not os.path.lexists(os.path.join(full, ".git")):
            return False
        self.work_trees.add(top)
        import pygit2

        try:
            value = pygit2.Repository(full).config["core.hooksPath"]
        except (KeyError, pygit2.GitError, ValueError):
            return None
        where = os.path.normpath(os.path.join(full, os.path.expanduser(str(value))))
        inside = os.path.relpath(where, self.lower)
        if inside == ".." or inside.startswith("../"):
            return None
        return "" if inside == "." else inside.replace(os.sep, "/")

    def home_of(self, rel: str, also: Callable[[str], bool] | None = None) -> tuple[str, str] | None:
        """(git directory, path inside it) for the nearest one above `rel` (itself included)."""
        parts = rel.split("/")
        for cut in range(len(parts), 0, -1):
            top = "/".join(parts[:cut])
            if self.is_gitdir(top) or (also is not None and also(top)):
                return top, "/".join(parts[cut:])
        return None


def review(lower: str, changes: list[LayerChange], home: str | None = None) -> Review:
    """Decide each change of one layer (`lower`: the real directory it covered). `home`: the home
    directory's path relative to `lower` when the layer holds it ("" when it is the layer)."""
    repos = _Repos(lower)
    new_repos = _new_repos(changes)
    out = Review()
    for change in changes:
        found = repos.home_of(change.path, lambda top: top in new_repos)
        why = _held_because(lower, change, found, home) or _hooks_path_because(repos, change)
        if why:
            out.held.append(Held(change.path, why, change))
            continue
        if found is not None and found[0] not in new_repos:
            kept = _kept_because(lower, change, found[1])
            if kept:
                out.protect.add(change.path)
                out.kept.append((change.path, kept))
                continue
        out.apply.append(change)
    out.protect |= _repositories_under_removals(lower, repos, out.apply)
    return out


def _kept_because(lower: str, change: LayerChange, inner: str) -> str:
    """Why a change inside a user's git directory is not carried over ("" when it is): the
    directory itself, HEAD, refs/ as a whole and the object store stay."""
    exists = os.path.lexists(os.path.join(lower, change.path))
    if inner == "":
        if change.kind == "dir" and not change.opaque:
            return ""  # its permission bits
        return "a repository's git directory is never removed or replaced by a step"
    if inner == "refs" and change.kind != "dir":
        return "a repository's refs/ is never removed by a step (refs change one by one, as git state)"
    if inner == "HEAD" and not _valid_head(change):
        return "HEAD stays a valid ref"
    if (inner == "objects" or inner.startswith("objects/")) and exists and not _DERIVED.fullmatch(inner):
        if change.kind == "dir" and not change.opaque:
            return ""
        if change.kind == "file" and _same_file(os.path.join(lower, change.path), change.source):
            return ""  # git freshened an object it wrote again (a new mtime, the same bytes)
        return "git objects are never removed or rewritten by a step"
    return ""


def _same_file(a: str, b: str) -> bool:
    """Both regular files with the same bytes (never following a link)."""
    import filecmp

    try:
        sa, sb = os.lstat(a), os.lstat(b)
    except OSError:
        return False
    if not (stat.S_ISREG(sa.st_mode) and stat.S_ISREG(sb.st_mode)) or sa.st_size != sb.st_size:
        return False
    try:
        return filecmp.cmp(a, b, shallow=False)
    except OSError:
        return False


def _new_repos(changes: list[LayerChange]) -> set[str]:
    """Git directories the step made (HEAD, objects/ and refs/ all new in the upper layer)."""
    made = {c.path for c in changes if c.kind == "dir"}
    heads = {c.path.rsplit("/", 1)[0] if "/" in c.path else "" for c in changes if c.path.endswith("HEAD")}
    return {d for d in made if d in heads and f"{d}/objects" in made and f"{d}/refs" in made}


def _held_because(lower: str, change: LayerChange, found: tuple[str, str] | None, home: str | None) -> str:
    """Why `change` may make a program run later on the host ("" when it may not); said of the
    path without naming it (`Held.path` does)."""
    if change.kind in ("delete", "dir", "special"):
        return ""  # removing a hook runs nothing; an empty directory holds no program
    if found is not None:
        inner = found[1]
        if _HOOKS.fullmatch(inner):
            return "a git hook: git runs it on this machine at the next commit, checkout or merge"
        if _CONFIGS.fullmatch(inner):
            keys = _unsafe_keys(os.path.join(lower, change.path), change.source)
            if keys:
                return f"git config setting {', '.join(keys[:4])}, which can name a program git runs on this machine"
            return ""
        if _INFO.fullmatch(inner):
            return "git attributes or grafts: they can assign filter and diff programs to files, or rewrite history"
        if _POINTERS.fullmatch(inner):
            return "a pointer of the repository to files outside it"
        return ""
    name = change.path.rsplit("/", 1)[-1]
    if name == ".gitmodules":
        keys = [k for k, v in _config_entries(change.source) if k.endswith(".update") and v.startswith("!")]
        if keys:
            return f"submodules whose {keys[0]} names a command `git submodule update` would run"
    top = change.path.split("/", 1)[0]
    if top in _EDITOR_DIRS and "/" in change.path:
        return "editor settings: editors run the tasks, launchers and terminals configured there"
    if home is not None:
        inside = (
            change.path
            if not home
            else change.path.removeprefix(home + "/")
            if change.path.startswith(home + "/")
            else None
        )
        if inside is not None and _HOME_STARTUP.fullmatch(inside):
            return "a start-up file: it runs at the next login, shell or git command on this machine"
    return ""


def _hooks_path_because(repos: _Repos, change: LayerChange) -> str:
    """A file in the directory a repository's core.hooksPath names: a hook, wherever it lives (a
    hooks path at the work tree's top makes only files named as git's hooks there hooks)."""
    if change.kind in ("delete", "dir", "special"):
        return ""
    hooks = repos.hooks_dir_of(change.path)
    if hooks is None:
        return ""
    parent, _, name = change.path.rpartition("/")
    if hooks in repos.work_trees:  # the top of a work tree: only git's hook names there run
        held = parent == hooks and name in _HOOK_NAMES
    else:
        held = change.path.startswith(hooks + "/") if hooks else True
    if not held:
        return ""
    return (
        "a git hook (in the directory core.hooksPath names): git runs it on this machine at the next commit"
    )


def _config_entries(path: str) -> list[tuple[str, str]]:
    """A git config file's (name, value) pairs, names lowercased but subsections; [] unreadable."""
    import pygit2

    try:
        info = os.lstat(path)
    except OSError:
        return []
    if not stat.S_ISREG(info.st_mode):
        return [("(not a file)", "")]
    try:
        config = pygit2.Config(path)
        return sorted((e.name, e.value or "") for e in config)
    except (pygit2.GitError, OSError, ValueError):
        return [("(unreadable config)", "")]


def _unsafe_keys(before: str, after: str) -> list[str]:
    """Keys added, changed or removed between two config files that are not known to name no
    program (an unreadable file counts as unsafe as a whole)."""
    old, new = _config_entries(before), _config_entries(after)
    changed = sorted({k for k, _v in set(old) ^ set(new)})
    unsafe = []
    for key in changed:
        value = "".join(v for k, v in new if k == key)
        names_transport = key.lower().endswith("url") and ("::" in value or value.startswith("-"))
        if not _SAFE_KEYS.fullmatch(key) or names_transport or value.startswith("!"):
            unsafe.append(key)
    return unsafe


def _valid_head(change: LayerChange) -> bool:
    if change.kind != "file":
        return False
    try:
        with open(change.source, "rb") as fh:
            text = fh.read(512).strip()
    except OSError:
        return False
    return bool(re.fullmatch(rb"ref: refs/\S+|[0-9a-f]{40}|[0-9a-f]{64}", text))


def _repositories_under_removals(lower: str, repos: _Repos, applied: list[LayerChange]) -> set[str]:
    """Git directories inside a directory the step removed (or replaced, or made opaque): a
    removal leaves each of them in place, whole."""
    out: set[str] = set()
    for change in applied:
        full = os.path.join(lower, change.path)
        removes_dir = change.kind in ("delete", "file", "link") or (change.kind == "dir" and change.opaque)
        if not removes_dir or not os.path.isdir(full) or os.path.islink(full):
            continue
        for dirpath, dirnames, _files in os.walk(full):
            rel = os.path.relpath(dirpath, lower).replace(os.sep, "/")
            if repos.is_gitdir(rel):
                out.add(rel)
                dirnames.clear()
    return out


__all__ = ["Held", "Review", "review"]
