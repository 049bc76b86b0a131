"""Undo / redo for the work tree with a shadow git repository that lives outside the user's .git.

The store (default `~/.cache/clover/checkpoints/<hash of root>`) holds its own object database,
index and state file; git runs with GIT_DIR / GIT_WORK_TREE / GIT_INDEX_FILE pointing there and
with system and global config switched off, so the user's repository (index, refs, stash, hooks,
config) is never read for writing and never touched. A snapshot is `git add -A` into the shadow
index (the work tree's .gitignore files apply, `.git` is always skipped) plus a commit; a restore
is `git read-tree --reset -u`, which rewrites changed files byte for byte (mode and symlinks too)
and deletes files the target does not have. Attribute-driven conversions (eol, filters) are
switched off in the shadow repository's info/attributes so bytes round-trip exactly.

History is two stacks: `undo` holds the snapshots up to the current state, `redo` what undo
replaced. A new snapshot that differs from the top clears `redo`, as in any editor.
"""

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

_ATTRIBUTES = "* -text !eol -filter -ident !working-tree-encoding -diff -merge\n"
_CONFIG = {
    "core.bare": "false", "core.autocrlf": "false", "core.safecrlf": "false", "core.filemode": "true",
    "core.symlinks": "true", "core.hooksPath": "/dev/null", "core.fsmonitor": "false",
    "core.untrackedCache": "false", "gc.auto": "0", "commit.gpgsign": "false",
    "user.name": "clover", "user.email": "clover@localhost", "advice.addEmbeddedRepo": "false",
}


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
    digest = hashlib.sha256(os.path.realpath(root).encode()).hexdigest()[:16]
    return os.path.join(base, "clover", "checkpoints", digest)


class Checkpoints:
    def __init__(self, root: str, store: str | None = None):
        self.root = os.path.realpath(root)
        if not os.path.isdir(self.root):
            raise SnapshotError(f"checkpoints: {root} is not a directory")
        self.store = os.path.realpath(store or default_store(self.root))
        self.git_dir = os.path.join(self.store, "git")
        self.state_path = os.path.join(self.store, "state.json")
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

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(GIT_DIR=self.git_dir, GIT_WORK_TREE=self.root,
                   GIT_INDEX_FILE=os.path.join(self.store, "index"), GIT_CONFIG_NOSYSTEM="1",
                   GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0",
                   LC_ALL="C")
        return env

    def _git(self, *args: str, input_text: str | None = None) -> str:
        try:
            proc = subprocess.run(["git", *args], cwd=self.root, env=self._env(), input=input_text,
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

    def _sync_excludes(self) -> None:
        """Honour the user's .git/info/exclude (read only; copied into the shadow repo) and leave
        nested repositories (vendored clones, submodules) out: git can only store them as links."""
        user = Path(self.root, ".git", "info", "exclude")
        try:
            text = user.read_text(errors="replace") if user.is_file() else ""
        except OSError:
            text = ""
        user_copy = Path(self.store, "user-exclude")
        _write_if_changed(user_copy, text)
        # listed with the user's rules only, so last time's nested-repo lines do not hide them
        untracked = self._git("ls-files", "-o", "-z", "--exclude-per-directory=.gitignore",
                              f"--exclude-from={user_copy}").split("\0")
        nested = [p for p in untracked if p.endswith("/")]
        links = [line.split("\t", 1)[1] for line in self._git("ls-files", "-s", "-z").split("\0")
                 if line.startswith("160000 ")]
        if links:
            self._git("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", *links)
        if nested or links:
            text += "\n# nested repositories\n" + "".join("/" + _glob_escape(p.rstrip("/")) + "/\n"
                                                          for p in nested + links)
        _write_if_changed(Path(self.git_dir, "info", "exclude"), text)

    def _write_tree(self) -> str:
        self._sync_excludes()
        self._git("add", "-A", "--ignore-errors", "--", ".")
        return self._git("write-tree").strip()

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
        self._git("read-tree", "--reset", "-u", commit)

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
