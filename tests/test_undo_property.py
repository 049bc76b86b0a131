"""Property: random interleavings of agent steps and user edits (files, binary and ignored ones,
empty directories, chmod, renames, symlinks, deletions), agent steps from two sessions at once
(two chats on one store, each with its own recorder), and an undo cut short between two writes
(a kill) that a fresh process then carries on; after every agent request is undone, every path
the user changed holds the user's last version, and every other path is back to its start or was
reported as a conflict."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clover.tools.undo import undoplan
from clover.tools.undo.checkpoints import Checkpoints, SnapshotError

PATHS = ["a.txt", "b.bin", "x.log", "d/c.txt", "d/e/f.txt", "g", "d", "d/e"]
CONTENTS = [b"one\n", b"two\nlines\n", b"\x00\xff binary\x01", b""]

op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(PATHS), st.sampled_from(CONTENTS)),
    st.tuples(st.just("append"), st.sampled_from(PATHS), st.sampled_from(CONTENTS)),
    st.tuples(st.just("delete"), st.sampled_from(PATHS)),
    st.tuples(st.just("chmod"), st.sampled_from(PATHS), st.sampled_from([0o644, 0o755, 0o600])),
    st.tuples(st.just("rename"), st.sampled_from(PATHS), st.sampled_from(PATHS)),
    st.tuples(st.just("mkdir"), st.sampled_from(PATHS)),
    st.tuples(st.just("symlink"), st.sampled_from(PATHS), st.sampled_from(["a.txt", "nowhere", "d"])),
)
# an episode: who acts (agent steps may open a new request or continue the last one), and the ops
episode = st.tuples(
    st.sampled_from(["agent", "agent-same-request", "other-session", "user"]),
    st.lists(op, min_size=1, max_size=3),
)
cut_after = st.one_of(st.none(), st.integers(min_value=0, max_value=3))  # kill the first undo after N writes


class Killed(BaseException):
    """The undo process dying between two writes (nothing after it runs, as with SIGKILL)."""


def perform(root: Path, operation: tuple) -> None:
    """One file-system operation; impossible ones (no such file, a file in the way) do nothing."""
    kind, path = operation[0], root / operation[1]
    try:
        if kind in ("write", "append"):
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_dir() and not path.is_symlink():
                return
            with open(path, "ab" if kind == "append" else "wb") as fh:
                fh.write(operation[2])
        elif kind == "delete":
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.is_symlink() or path.exists():
                path.unlink()
        elif kind == "chmod":
            if path.exists() and not path.is_symlink():
                path.chmod(operation[2] | (0o700 if path.is_dir() else 0))
        elif kind == "rename":
            target = root / operation[2]
            if path.exists() and not target.exists() and not str(target).startswith(str(path) + "/"):
                target.parent.mkdir(parents=True, exist_ok=True)
                path.rename(target)
        elif kind == "mkdir":
            path.mkdir(parents=True, exist_ok=True)
        elif kind == "symlink":
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() and not path.is_symlink():
                os.symlink(operation[2], path)
    except (FileExistsError, NotADirectoryError, FileNotFoundError, IsADirectoryError):
        pass
    except OSError as exc:  # a write through a link to itself fails, as the agent's command would
        if exc.errno != errno.ELOOP:
            raise


def state(root: Path) -> dict[str, tuple]:
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = [d for d in dirnames if d != ".git" and d not in links]
        for name in filenames + links + dirnames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                out[rel] = ("link", os.readlink(full))
            elif os.path.isdir(full):
                out[rel] = ("dir", stat.S_IMODE(os.stat(full).st_mode))
            else:
                out[rel] = ("file", Path(full).read_bytes(), stat.S_IMODE(os.stat(full).st_mode))
    return out


def check(episodes: list, cut: int | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "w"
        root.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        (root / ".gitignore").write_text("*.log\n")
        (root / "a.txt").write_text("start\n")
        (root / "d").mkdir()
        (root / "d" / "c.txt").write_text("in d\n")
        start = state(root)
        store = os.path.join(tmp, "store")
        recorders = {"s": Checkpoints(str(root), store=store), "t": Checkpoints(str(root), store=store)}
        user_last: dict[str, tuple | None] = {}  # path -> its state after the user's last change to it
        requests, step = {"s": 0, "t": 0}, 0
        for i, (who, ops) in enumerate(episodes):
            if who == "user":
                if i == 0 or episodes[i - 1][0] != "user":  # user edits in a row are seen as one
                    before = state(root)
                for operation in ops:
                    perform(root, operation)
                if i + 1 < len(episodes) and episodes[i + 1][0] == "user":
                    continue
                after = state(root)  # (a change and its reverse in between cannot be seen: no scan ran)
                for path in set(before) | set(after):
                    if before.get(path) != after.get(path):
                        user_last[path] = after.get(path)
                continue
            session = "t" if who == "other-session" else "s"
            if who != "agent-same-request" or requests[session] == 0:
                requests[session] += 1
            step += 1
            cp = recorders[session]
            cp.begin()
            for operation in ops:
                perform(root, operation)
            cp.end(session, requests[session], f"request {requests[session]}", step)
        conflicts: set[str] = set()
        if cut is not None:
            _undo_killed_after(Checkpoints(str(root), store=store), cut)
        cp = Checkpoints(str(root), store=store)  # a new process: `clover undo` again
        for _ in range(sum(requests.values()) + 1):
            try:
                outcome = cp.undo()
            except SnapshotError:
                break
            conflicts |= {c.path for c in outcome.conflicts} | {m.dst for m, _ in outcome.failed_moves}
        end = state(root)
        for path in set(start) | set(end) | set(user_last):
            if path in user_last:
                assert end.get(path) == user_last[path], (path, "the user's version was not kept")
            elif end.get(path) != start.get(path):
                assert path in conflicts, (path, "an agent change neither undone nor reported", conflicts)


def _undo_killed_after(cp: Checkpoints, writes: int) -> None:
    """One undo whose process dies after `writes` file writes or removals (if it gets that far)."""
    done = [0]
    real_write, real_remove = undoplan.Writer.write, undoplan.Writer.remove

    def counted(real):
        def op(self, *args, **kwargs):
            if done[0] == writes:
                raise Killed
            done[0] += 1
            return real(self, *args, **kwargs)

        return op

    undoplan.Writer.write, undoplan.Writer.remove = counted(real_write), counted(real_remove)
    try:
        cp.undo()
    except (Killed, SnapshotError):
        pass
    finally:
        undoplan.Writer.write, undoplan.Writer.remove = real_write, real_remove


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(episode, min_size=1, max_size=6), cut_after)
def test_undo_all_agent_steps_keeps_every_user_change(episodes, cut):
    check(episodes, cut)


@pytest.mark.slow
@pytest.mark.timeout(1800)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(episode, min_size=1, max_size=10), cut_after)
def test_undo_all_agent_steps_keeps_every_user_change_many(episodes, cut):
    check(episodes, cut)
