"""The checkpoint store as it was before per-step change records (tools/checkpoints.py at debbb70):
whole-tree snapshots in a shadow repository made with the git program, restore = `read-tree --reset
-u` of an older snapshot. Kept only so that benchmarks/undo_record.py can compare the cost per step
side by side. Product code uses clover.tools.checkpoints."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import legacy_snapshot_meta as snapshot_meta
from clover.tools.gitsafe import git_argv, safe_env

_ATTRIBUTES = "* -text !eol -filter -ident !working-tree-encoding -diff -merge\n"
_CONFIG = {
    "core.bare": "false", "core.autocrlf": "false", "core.safecrlf": "false", "core.filemode": "true",
    "core.symlinks": "true", "core.hooksPath": "/dev/null", "core.fsmonitor": "false",
    "core.untrackedCache": "false", "gc.auto": "0", "commit.gpgsign": "false",
    "user.name": "clover", "user.email": "clover@localhost", "advice.addEmbeddedRepo": "false",
}


# Regenerable directories never snapshotted (big, and rebuilt by their tools).
CACHE_DIRS = {"node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache",
              ".tox", ".nox"}
MAX_IGNORED_BYTES = 16 * 1024 * 1024  # ignored files above this are left out (logs, weights, data)
# What git commands change under .git, restored on undo (objects are only ever added).
_DOTGIT_NAMES = ("HEAD", "config", "config.worktree", "packed-refs", "refs", "hooks", "info")


def _write_if_changed(path: Path, text: str) -> None:
    try:
        if path.read_text(errors="replace") == text:
            return
    except OSError:
        pass
    path.write_text(text)


def _glob_escape(path: str) -> str:
    return "".join("\\" + c if c in "*?[]\\!# " else c for c in path)


class SnapshotError(Exception):  # not model.load.CheckpointError (weights)
    """Nothing to undo/redo, git missing, or git failed; the message is one line for the user."""


@dataclass
class Checkpoint:
    id: str
    label: str
    created: float
    undone: bool = False  # on the redo side: undo has rolled back past it


def default_store(root: str) -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    # "v2:": snapshots are work/manifest/git trees since the store layout changed
    digest = hashlib.sha256(("v2:" + os.path.realpath(root)).encode()).hexdigest()[:16]
    return os.path.join(base, "clover", "checkpoints", digest)


class Checkpoints:
    def __init__(self, root: str, store: str | None = None):
        self.root = os.path.realpath(root)
        if not os.path.isdir(self.root):
            raise SnapshotError(f"checkpoints: {root} is not a directory")
        self.store = os.path.realpath(store or default_store(self.root))
        self.git_dir = os.path.join(self.store, "git")
        self.state_path = os.path.join(self.store, "state.json")
        self._nested: set[str] = set()
        if self.store == self.root or self.store.startswith(self.root + os.sep):
            # a store inside the tree would snapshot itself
            raise SnapshotError("checkpoints: the store must lie outside the workspace")
        os.makedirs(self.store, exist_ok=True)
        with self._locked():
            self._init_repo()

    # ----------------------------------------------------------------------- public API

    def snapshot(self, label: str) -> str | None:
        """Record the work tree; None when it equals the latest snapshot."""
        with self._locked():
            state = self._load()
            tree = self._write_tree()
            if state["undo"] and self._tree_of(state["undo"][-1]) == tree:
                return None
            commit = self._commit(tree, label, state)
            state["undo"].append(commit)
            state["redo"] = []
            self._save(state)
            return commit

    def undo(self) -> str:
        """Restore the previous snapshot (or the latest, if the tree changed since); return its id."""
        with self._locked():
            state = self._load()
            tree = self._write_tree()
            if state["undo"] and self._tree_of(state["undo"][-1]) != tree:
                current = self._commit(tree, "before undo", state)
            elif len(state["undo"]) >= 2:
                current = state["undo"].pop()
            else:
                raise SnapshotError("nothing to undo")
            target = state["undo"][-1]
            self._restore(target)
            state["redo"].append(current)
            self._save(state)
            return target

    def redo(self) -> str:
        """Reapply what the last undo rolled back; return the id restored."""
        with self._locked():
            state = self._load()
            if not state["redo"]:
                raise SnapshotError("nothing to redo")
            tree = self._write_tree()
            if state["undo"] and self._tree_of(state["undo"][-1]) != tree:
                # edits made after the undo stay reachable by a later undo
                state["undo"].append(self._commit(tree, "before redo", state))
            target = state["redo"].pop()
            self._restore(target)
            state["undo"].append(target)
            self._save(state)
            return target

    def list(self) -> list[Checkpoint]:
        """Oldest first: the undo side, then what redo would bring back (marked undone)."""
        state = self._load()
        ids = [(c, False) for c in state["undo"]] + [(c, True) for c in reversed(state["redo"])]
        meta = self._meta(*dict.fromkeys(c for c, _ in ids))
        return [Checkpoint(c, *meta[c], undone=u) for c, u in ids]

    def label(self, checkpoint_id: str) -> str:
        return self._meta(checkpoint_id)[checkpoint_id][0]

    # ----------------------------------------------------------------------- git plumbing

    def _env(self, **where: str) -> dict[str, str]:
        env = safe_env({k: v for k, v in os.environ.items() if not k.startswith("GIT_")})
        env.update(GIT_DIR=self.git_dir, GIT_WORK_TREE=self.root,
                   GIT_INDEX_FILE=os.path.join(self.store, "index"), GIT_CONFIG_GLOBAL=os.devnull, LC_ALL="C")
        env.update(where)
        return env

    def _git(self, *args: str, input_text: str | None = None, **where: str) -> str:
        """Shadow-repository git; `where` overrides GIT_DIR / GIT_WORK_TREE / GIT_INDEX_FILE."""
        try:
            proc = subprocess.run(git_argv(args), cwd=self.root, env=self._env(**where), input=input_text,
                                  capture_output=True, encoding="utf-8", errors="surrogateescape",
                                  timeout=600)
        except FileNotFoundError as exc:
            raise SnapshotError("checkpoints need git, which is not installed") from exc
        except subprocess.TimeoutExpired as exc:
            raise SnapshotError(f"git {args[0]} timed out") from exc
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines() or ["failed"]
            msg = next((ln for ln in lines if ln.startswith(("fatal:", "error:"))), lines[-1])
            raise SnapshotError(f"git {args[0]}: {msg}")
        return proc.stdout

    def _init_repo(self) -> None:
        marker = Path(self.store, "initialized")
        if marker.exists():
            return
        env = {k: v for k, v in self._env().items() if k != "GIT_WORK_TREE"}
        proc = subprocess.run(["git", "init", "-q", "--bare", self.git_dir], env=env,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise SnapshotError(f"git init: {proc.stderr.strip() or 'failed'}")
        for key, value in _CONFIG.items():
            self._git("config", key, value)
        info = Path(self.git_dir, "info")
        info.mkdir(exist_ok=True)
        (info / "attributes").write_text(_ATTRIBUTES)
        hooks = Path(self.git_dir, "hooks")
        if hooks.is_dir():
            for f in hooks.iterdir():
                f.unlink()
        marker.write_text("1\n")

    def _sync_excludes(self) -> set[str]:
        """Leave caches and nested repositories (vendored clones, submodules; git can only store
        them as links) out; return the nested ones."""
        caches = Path(self.store, "cache-exclude")
        _write_if_changed(caches, "".join(f"{_glob_escape(d)}/\n" for d in sorted(CACHE_DIRS)))
        # listed without the work tree's ignore rules: a repository inside an ignored directory counts
        untracked = self._git("ls-files", "-o", "-z", f"--exclude-from={caches}").split("\0")
        nested = [p for p in untracked if p.endswith("/")]
        links = [line.split("\t", 1)[1] for line in self._git("ls-files", "-s", "-z").split("\0")
                 if line.startswith("160000 ")]
        if links:
            self._git("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *links)
        text = caches.read_text() + "# nested repositories\n" + "".join(
            "/" + _glob_escape(p.rstrip("/")) + "/\n" for p in nested + links)
        _write_if_changed(Path(self.git_dir, "info", "exclude"), text)
        self._nested = {p.rstrip("/") for p in nested + links}  # _restore leaves them alone too
        return self._nested

    def _ignored_files(self, nested: set[str]) -> list[str]:
        """Untracked files the work tree's ignore rules (and .git/info/exclude) hide, but an undo
        must bring back: not in caches or nested repositories, not larger than the cap."""
        user = Path(self.root, ".git", "info", "exclude")
        user_copy = Path(self.store, "user-exclude")
        try:
            _write_if_changed(user_copy, user.read_text(errors="replace") if user.is_file() else "")
        except OSError:
            _write_if_changed(user_copy, "")
        listed = self._git("ls-files", "-o", "-i", "-z", "--exclude-per-directory=.gitignore",
                           f"--exclude-from={user_copy}").split("\0")
        keep = []
        for rel in listed:
            parts = rel.split("/")
            if not rel or rel.endswith("/") or CACHE_DIRS.intersection(parts[:-1]):
                continue
            if any(rel.startswith(n + "/") for n in nested):
                continue
            try:
                info = os.lstat(os.path.join(self.root, rel))
            except OSError:
                continue
            if info.st_size <= MAX_IGNORED_BYTES:
                keep.append(rel)
        return keep

    def _write_tree(self) -> str:
        nested = self._sync_excludes()
        self._git("add", "-A", "--ignore-errors", "--", ".")
        ignored = self._ignored_files(nested)
        if ignored:
            self._git("--literal-pathspecs", "add", "-f", "--ignore-errors", "--pathspec-from-file=-",
                      "--pathspec-file-nul", input_text="\0".join(ignored))
        work = self._git("write-tree").strip()
        entries = self._entries()
        text = snapshot_meta.manifest(self.root, entries, CACHE_DIRS | {".git"}, nested)
        rows = [f"040000 tree {work}\twork", f"100644 blob {self._blob(text)}\tmanifest"]
        dotgit = self._dotgit_tree()
        if dotgit:
            rows.append(f"040000 tree {dotgit}\tgit")
        return self._git("mktree", input_text="\n".join(rows) + "\n").strip()

    def _entries(self) -> list[tuple[str, str]]:
        """(git mode, path) of every entry in the shadow index."""
        out = []
        for line in self._git("ls-files", "-s", "-z").split("\0"):
            if "\t" in line:
                meta, path = line.split("\t", 1)
                out.append((meta.split(" ", 1)[0], path))
        return out

    def _blob(self, text: str) -> str:
        return self._git("hash-object", "-w", "--stdin", input_text=text).strip()

    # ----------------------------------------------------------------------- the user's .git

    def _dotgit(self) -> dict[str, str] | None:
        gd = os.path.join(self.root, ".git")
        if os.path.islink(gd) or not os.path.isdir(gd):
            return None  # no repository, or a linked worktree's .git file: not covered
        return {"GIT_WORK_TREE": gd, "GIT_INDEX_FILE": os.path.join(self.store, "index-dotgit")}

    def _user_index(self) -> str:
        """The user's index as `ls-files -s` (no stat data, so a refresh is not a change)."""
        where = {"GIT_DIR": os.path.join(self.root, ".git"), "GIT_WORK_TREE": self.root,
                 "GIT_INDEX_FILE": os.path.join(self.root, ".git", "index")}
        return self._git("ls-files", "-s", "-z", **where)

    def _dotgit_tree(self) -> str | None:
        where = self._dotgit()
        if where is None:
            return None
        gd = where["GIT_WORK_TREE"]
        tracked = {p.split("/", 1)[0] for p in self._git("ls-files", "-z", **where).split("\0") if p}
        names = [n for n in _DOTGIT_NAMES if os.path.lexists(os.path.join(gd, n)) or n in tracked]
        if names:
            self._git("add", "-A", "-f", "--ignore-errors", "--", *names, ":(exclude,glob)**/*.lock", **where)
        state = self._git("write-tree", **where).strip()
        rows = [f"040000 tree {state}\tstate", f"100644 blob {self._blob(self._user_index())}\tindex"]
        return self._git("mktree", input_text="\n".join(rows) + "\n").strip()

    def _restore_dotgit(self, commit: str) -> None:
        where = self._dotgit()
        if where is None or not self._has(f"{commit}:git"):
            return
        self._git("read-tree", "--reset", "-u", f"{commit}:git/state", **where)
        listing = self._git("cat-file", "blob", f"{commit}:git/index")
        if listing == self._user_index():
            return
        gd = where["GIT_WORK_TREE"]
        tmp = os.path.join(gd, "index.clover-undo")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        self._git("update-index", "-z", "--index-info", input_text=listing,
                  GIT_DIR=gd, GIT_WORK_TREE=self.root, GIT_INDEX_FILE=tmp)
        os.replace(tmp, os.path.join(gd, "index"))

    def _has(self, spec: str) -> bool:
        try:
            self._git("cat-file", "-e", spec)
            return True
        except SnapshotError:
            return False

    def _commit(self, tree: str, label: str, state: dict) -> str:
        # every commit chains onto the last one made, so one ref keeps all of them reachable
        parent = ["-p", state["last"]] if state.get("last") else []
        msg = json.dumps({"label": label, "created": time.time()})
        commit = self._git("commit-tree", tree, *parent, input_text=msg).strip()
        self._git("update-ref", "refs/heads/checkpoints", commit)
        state["last"] = commit
        return commit

    def _tree_of(self, commit: str) -> str:
        return self._git("rev-parse", f"{commit}^{{tree}}").strip()

    def _meta(self, *commits: str) -> dict[str, tuple[str, float]]:
        """label and creation time of each commit, read with one git call."""
        if not commits:
            return {}
        out = self._git("show", "-s", "--format=%H%x1f%B%x1e", *commits)
        meta: dict[str, tuple[str, float]] = {}
        for record in out.split("\x1e"):
            if "\x1f" not in record:
                continue
            sha, body = record.strip().split("\x1f", 1)
            try:
                data = json.loads(body)
                meta[sha] = (str(data.get("label", "")), float(data.get("created", 0.0)))
            except (ValueError, AttributeError):
                meta[sha] = (body.strip(), 0.0)
        return meta

    def _restore(self, commit: str) -> None:
        # index == work tree after _write_tree, so --reset -u changes exactly what differs
        self._git("read-tree", "--reset", "-u", f"{commit}:work")
        snapshot_meta.apply(self.root, self._git("cat-file", "blob", f"{commit}:manifest"), self._entries(),
                            CACHE_DIRS | {".git"}, self._nested)
        self._restore_dotgit(commit)

    # ----------------------------------------------------------------------- state

    def _load(self) -> dict:
        try:
            with open(self.state_path) as f:
                state = json.load(f)
            if isinstance(state.get("undo"), list) and isinstance(state.get("redo"), list):
                return state
        except (OSError, ValueError):
            pass
        return {"undo": [], "redo": [], "last": None}

    def _save(self, state: dict) -> None:
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, self.state_path)

    @contextlib.contextmanager
    def _locked(self):
        """One writer at a time per store (a chat and a `clover undo` may run side by side)."""
        with open(os.path.join(self.store, "lock"), "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
