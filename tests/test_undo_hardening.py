"""Undo, red-teamed: each case with the failure it would have.

- Two long-lived recorders on one store (two chats, a chat and a `clover fix`): each took the
  other's steps for the user's edits, so neither could undo its own request afterwards.
- A request left with a conflict only because a later request held the path could not be undone
  even after that later request was undone ("nothing to undo").
- An undo cut short (Ctrl-C, a kill) left the journal behind the files: run again, it called the
  paths it had already restored conflicts. A signal in the middle of a recorded step or an undo
  is now held until the record is consistent.
- `git stash clear` / `git stash drop` by the agent: the stash list (the stash's reflog) was not
  recorded, so an undo left the user's stashes unreachable.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from clover.tools.undo import undoplan, undorecord, undoreport
from clover.tools.undo.checkpoints import Checkpoints, SnapshotError


def sh(cmd: str, cwd: Path) -> str:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "w"
    root.mkdir()
    sh("git init -q && git config user.email t@t && git config user.name t", root)
    (root / "f.txt").write_text("orig\n")
    return root


def step(cp: Checkpoints, session: str, request: int, change, n: int = 1) -> None:
    cp.begin()
    change() if callable(change) else sh(change, cp.root)  # type: ignore[arg-type]
    cp.end(session, request, f"{session} request {request}", n)


def test_two_recorders_on_one_store_each_undo_their_own_request(root: Path, tmp_path: Path) -> None:
    """Chat A, then chat B (another process: its own Checkpoints), then A's /undo, B's /undo."""
    store = str(tmp_path / "store")
    a, b = Checkpoints(str(root), store=store), Checkpoints(str(root), store=store)
    step(a, "A", 1, "echo A > f.txt && echo a > a.txt")
    step(b, "B", 1, "echo B > b.txt")
    step(a, "A", 2, "echo A2 > a.txt")  # A's next request: B's file is B's, not the user's
    out = b.undo(session="B")
    assert [x.path for x in out.done] == ["b.txt"] and not out.conflicts
    out = a.undo(session="A")
    assert [x.path for x in out.done] == ["a.txt"] and not out.conflicts
    out = a.undo(session="A")
    assert sorted(x.path for x in out.done) == ["a.txt", "f.txt"] and not out.conflicts
    assert sorted(os.listdir(root)) == [".git", "f.txt"] and (root / "f.txt").read_text() == "orig\n"


def test_a_request_held_by_a_later_one_is_undone_once_that_one_is(root: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    a, b = Checkpoints(str(root), store=store), Checkpoints(str(root), store=store)
    step(a, "A", 1, "echo A > f.txt")
    step(b, "B", 1, "echo B > f.txt")
    held = a.undo(session="A")
    assert [c.conflict for c in held.conflicts] == ["changed by a later request that is not undone"]
    assert not b.undo(session="B").conflicts and (root / "f.txt").read_text() == "A\n"
    again = a.undo(session="A")  # the conflict said why; once that is gone, a plain undo does it
    assert [x.path for x in again.done] == ["f.txt"] and (root / "f.txt").read_text() == "orig\n"
    with pytest.raises(SnapshotError, match="nothing to undo"):
        a.undo(session="A")


def test_an_undo_cut_short_finishes_when_run_again_without_false_conflicts(
    root: Path, tmp_path: Path, monkeypatch
) -> None:
    """The process dies between two writes (as a SIGKILL would leave it): the next undo restores
    the rest and calls nothing a conflict; the files it had restored are done, not the user's."""
    for i in range(4):
        (root / f"g{i}.txt").write_text(f"orig {i}\n")
    cp = Checkpoints(str(root), store=str(tmp_path / "store"))
    step(cp, "s", 1, "for i in 0 1 2 3; do echo agent $i > g$i.txt; done; echo new > new.txt")
    writes = []
    real_write, real_remove = undoplan.Writer.write, undoplan.Writer.remove

    class Killed(BaseException):
        pass

    def write(self, rel, entry):
        if len(writes) == 2:
            raise Killed
        writes.append(rel)
        real_write(self, rel, entry)

    monkeypatch.setattr(undoplan.Writer, "write", write)
    with pytest.raises(Killed):
        cp.undo()
    monkeypatch.setattr(undoplan.Writer, "write", real_write)
    assert not (root / "new.txt").exists() and len(writes) == 2  # half done
    again = Checkpoints(str(root), store=str(tmp_path / "store"))
    group, plan = again.plan()
    assert not plan.conflicts, undoreport.describe(again.repo, group, plan)
    out = again.apply(plan)[1]
    assert not out.conflicts and len(out.done) == 2
    assert {p.name: p.read_text() for p in root.glob("g*.txt")} == {
        f"g{i}.txt": f"orig {i}\n" for i in range(4)
    }
    again.redo()  # and the redo puts back all of it
    assert (root / "new.txt").read_text() == "new\n" and (root / "g0.txt").read_text() == "agent 0\n"
    assert real_remove is undoplan.Writer.remove


def test_a_signal_during_an_undo_waits_until_the_undo_and_its_record_are_complete(
    root: Path, tmp_path: Path, monkeypatch, ctrl_c
) -> None:
    """Ctrl-C (a real SIGINT to this process) between two writes of an undo: every path is still
    restored and recorded, then the interrupt is raised."""
    for i in range(4):
        (root / f"g{i}.txt").write_text(f"orig {i}\n")
    cp = Checkpoints(str(root), store=str(tmp_path / "store"))
    step(cp, "s", 1, "for i in 0 1 2 3; do echo agent $i > g$i.txt; done")
    real_write = undoplan.Writer.write
    sent = []

    def write(self, rel, entry):
        if not sent:
            sent.append(rel)
            os.kill(os.getpid(), signal.SIGINT)
        real_write(self, rel, entry)

    monkeypatch.setattr(undoplan.Writer, "write", write)
    with pytest.raises(KeyboardInterrupt):
        cp.undo()
    assert {p.name: p.read_text() for p in root.glob("g*.txt")} == {
        f"g{i}.txt": f"orig {i}\n" for i in range(4)
    }
    assert Checkpoints(str(root), store=str(tmp_path / "store")).groups()[0].state() == "undone"


def test_a_signal_while_a_step_is_recorded_waits_for_the_record(
    root: Path, tmp_path: Path, monkeypatch, ctrl_c
) -> None:
    cp = Checkpoints(str(root), store=str(tmp_path / "store"))
    cp.begin()
    (root / "f.txt").write_text("agent\n")
    real = undorecord.diff_scans

    def diff_scans(before, after):
        os.kill(os.getpid(), signal.SIGINT)  # arrives while the step's record is being made
        return real(before, after)

    monkeypatch.setattr(undorecord, "diff_scans", diff_scans)
    with pytest.raises(KeyboardInterrupt):
        cp.end("s", 1, "r", 1)
    monkeypatch.setattr(undorecord, "diff_scans", real)
    fresh = Checkpoints(str(root), store=str(tmp_path / "store"))
    assert [c.path for g in fresh.groups() for r in g.records for c in r.changes] == ["f.txt"]
    assert [a.path for a in fresh.undo().done] == ["f.txt"] and (root / "f.txt").read_text() == "orig\n"


def test_the_agents_stash_clear_is_undone_with_the_stash_list(root: Path, tmp_path: Path) -> None:
    sh(
        "git add -A && git commit -qm i && echo w1 >> f.txt && git stash -q && echo w2 > f.txt && git stash -q",
        root,
    )
    listed = sh("git stash list --format=%H", root)
    assert len(listed.split()) == 2
    cp = Checkpoints(str(root), store=str(tmp_path / "store"))
    step(cp, "s", 1, "git stash clear")
    assert sh("git stash list", root) == ""
    out = cp.undo()
    assert not out.conflicts
    assert sh("git stash list --format=%H", root) == listed  # both of the user's stashes, in order
    step(cp, "s", 2, "git stash drop -q stash@{1}")
    cp.undo()
    assert sh("git stash list --format=%H", root) == listed


def _git_ok(root: Path) -> bool:
    return (
        subprocess.run(["git", "status"], cwd=root, capture_output=True).returncode == 0
        and subprocess.run(["git", "log", "--all", "--oneline"], cwd=root, capture_output=True).returncode
        == 0
    )


@pytest.mark.parametrize(
    "destroy",
    [
        "rm -rf .git && git init -q && git add -A && git commit -qm fresh",  # a new repository (or the same inodes)
        # the history emptied in place: the same objects/ directory (as when `rm -rf .git; git init` reuses
        # its inode numbers, which the first case gets on some file systems)
        "rm -rf .git/objects/?? .git/objects/pack/* .git/refs/heads/* .git/logs && git add -A && git commit -qm fresh",
        "git reset -q --hard HEAD~1 && git reflog expire --expire=now --all && git gc -q --prune=now",
    ],
)
def test_an_undo_never_points_a_ref_at_history_the_agent_destroyed(
    root: Path, tmp_path: Path, destroy: str
) -> None:
    """The history is not recorded (too big), so an agent that deletes it cannot be undone there;
    HEAD: the undo wrote the old refs back anyway, naming commits the repository no longer had
    ("fatal: bad object HEAD"). Now such a ref is a conflict, and the repository stays usable."""
    sh("git add -A && git commit -qm one && echo two > f.txt && git commit -qam two", root)
    cp = Checkpoints(str(root), store=str(tmp_path / "store"))
    step(cp, "s", 1, destroy)
    assert _git_ok(root)
    group, plan = cp.plan()
    lines = undoreport.describe(cp.repo, group, plan)
    refs = [line for line in lines if line.startswith("  CONFLICT .git/refs/heads/")]
    assert refs and ("no longer has" in refs[0] or "holds what the step did not make" in refs[0]), lines
    cp.apply(plan)
    assert _git_ok(root), subprocess.run(["git", "status"], cwd=root, capture_output=True, text=True).stderr


def test_a_directory_holding_the_users_file_is_a_conflict_in_the_plan_and_never_blocks_older_undos(
    root: Path, tmp_path: Path
) -> None:
    """HEAD's plan said `delete pkg/` and the apply then failed on it; and once an undo could go
    back to a request it had left conflicts in, a failing directory held every later undo there."""
    cp = Checkpoints(str(root), store=str(tmp_path / "store"))
    step(cp, "s", 1, "echo older > f.txt")
    step(cp, "s", 2, "mkdir -p pkg/sub && echo x > pkg/sub/mod.py && echo y > pkg/a.py")
    (root / "pkg" / "sub" / "mine.txt").write_text("the user's\n")
    group, plan = cp.plan()
    lines = undoreport.describe(cp.repo, group, plan)
    assert "  CONFLICT pkg: it holds files the step did not make; left alone" in lines, lines
    assert "  CONFLICT pkg/sub: it holds files the step did not make; left alone" in lines, lines
    assert not any(line.startswith("  delete   pkg/ ") for line in lines), lines
    out = cp.apply(plan)[1]
    assert sorted(a.path for a in out.done) == ["pkg/a.py", "pkg/sub/mod.py"]
    assert sorted(os.listdir(root / "pkg")) == ["sub"] and os.listdir(root / "pkg" / "sub") == ["mine.txt"]
    older = cp.undo()  # the next undo goes on to request 1
    assert [a.path for a in older.done] == ["f.txt"] and (root / "f.txt").read_text() == "orig\n"
    (root / "pkg" / "sub" / "mine.txt").unlink()  # once the user's file is gone, request 2 can finish
    last = cp.undo()
    assert sorted(a.path for a in last.done) == ["pkg", "pkg/sub"] and not (root / "pkg").exists()


def test_a_path_the_undo_could_not_write_is_reported_and_the_next_undo_goes_on(
    root: Path, tmp_path: Path, monkeypatch
) -> None:
    """An OS error while restoring (a permission, a full disk): that path is a conflict with the
    error, the rest is done, and the next plain undo moves on to the request before."""
    cp = Checkpoints(str(root), store=str(tmp_path / "store"))
    step(cp, "s", 1, "echo older > f.txt")
    step(cp, "s", 2, "echo x > a.txt && echo y > b.txt")
    real = undoplan.Writer.remove

    def remove(self, rel, entry):
        if rel == "b.txt":
            raise PermissionError(13, "Permission denied", rel)
        real(self, rel, entry)

    monkeypatch.setattr(undoplan.Writer, "remove", remove)
    out = cp.undo()
    assert [a.path for a in out.done] == ["a.txt"]
    assert [(c.path, c.conflict) for c in out.conflicts] == [
        ("b.txt", "[Errno 13] Permission denied: 'b.txt'")
    ]
    assert [a.path for a in cp.undo().done] == ["f.txt"]


def test_an_undo_never_writes_through_a_symlink_that_replaced_a_directory(root: Path, tmp_path: Path) -> None:
    """The agent swaps directory d for a link to a directory outside; the user re-points the link.
    HEAD: d stayed (a conflict), but restoring d/c.txt went through the link: a file written outside
    the workspace. Now no undo write or removal follows a link on the way."""
    (root / "d").mkdir()
    (root / "d" / "c.txt").write_text("in d\n")
    outside, elsewhere = tmp_path / "outside", tmp_path / "elsewhere"
    outside.mkdir()
    elsewhere.mkdir()
    cp = Checkpoints(str(root), store=str(tmp_path / "store"))
    step(cp, "s", 1, f"rm -r d && ln -s {outside} d")
    os.unlink(root / "d")
    os.symlink(elsewhere, root / "d")  # the user
    out = cp.undo()
    assert os.listdir(elsewhere) == [] and os.listdir(outside) == []
    assert sorted(c.path for c in out.conflicts) == ["d", "d/c.txt"]


def test_an_undo_cut_short_after_making_a_directory_leaves_it_with_its_own_bits(
    root: Path, tmp_path: Path, monkeypatch
) -> None:
    """The agent removes the user's directory; the undo is killed after it made the directory again
    (found by the property test). HEAD made it 0700 and set its bits only at the very end, so the
    rerun took the 0700 for the user's change: a conflict, the directory's bits and file not back."""
    (root / "d").mkdir()
    (root / "d" / "f.txt").write_text("mine\n")
    os.chmod(root / "d", 0o755)
    cp = Checkpoints(str(root), store=str(tmp_path / "store"))
    step(cp, "s", 1, "rm -r d")
    real_write = undoplan.Writer.write

    class Killed(BaseException):
        pass

    def write(self, rel, entry):
        if rel != "d":
            raise Killed
        real_write(self, rel, entry)

    monkeypatch.setattr(undoplan.Writer, "write", write)
    with pytest.raises(Killed):
        cp.undo()
    monkeypatch.setattr(undoplan.Writer, "write", real_write)
    out = Checkpoints(str(root), store=str(tmp_path / "store")).undo()
    assert not out.conflicts and [a.path for a in out.done] == ["d/f.txt"]
    assert os.stat(root / "d").st_mode & 0o777 == 0o755 and (root / "d" / "f.txt").read_text() == "mine\n"


@pytest.mark.parametrize("agent", ["rm f.txt && mkdir f.txt", "rm -r d && echo agent > d"])
def test_an_undo_killed_between_removing_and_writing_a_path_is_finished_next_time(
    root: Path, tmp_path: Path, monkeypatch, agent: str
) -> None:
    """The agent turned the user's file into a directory (or a directory into a file); the undo is
    killed after removing the agent's one and before writing the user's (found by the property
    test). HEAD: the rerun saw the path gone, called it a conflict, and the user's file stayed lost."""
    (root / "d").mkdir()
    (root / "d" / "c.txt").write_text("in d\n")
    cp = Checkpoints(str(root), store=str(tmp_path / "store"))
    step(cp, "s", 1, agent)

    class Killed(BaseException):
        pass

    def write(self, rel, entry):
        raise Killed

    real_write = undoplan.Writer.write
    monkeypatch.setattr(undoplan.Writer, "write", write)
    with pytest.raises(Killed):
        cp.undo()
    monkeypatch.setattr(undoplan.Writer, "write", real_write)
    out = Checkpoints(str(root), store=str(tmp_path / "store")).undo()
    assert not out.conflicts, out.conflicts
    assert (root / "f.txt").read_text() == "orig\n" and (root / "d" / "c.txt").read_text() == "in d\n"


def test_what_a_killed_undo_removed_is_not_taken_for_the_users_change_by_older_requests(
    root: Path, tmp_path: Path, monkeypatch
) -> None:
    """Request 1 removes the user's d/; request 2 makes d/c.txt/ a directory. The undo of request 2
    is killed after one removal (found by the property test). HEAD: the next scan took that removal
    for the user's, so undoing request 1 called d/c.txt "changed since the agent's step": lost."""
    (root / "d").mkdir()
    (root / "d" / "c.txt").write_text("mine\n")
    cp = Checkpoints(str(root), store=str(tmp_path / "store"))
    step(cp, "s", 1, "rm -r d")
    step(cp, "s", 2, "mkdir -p d/c.txt")

    class Killed(BaseException):
        pass

    real_remove = undoplan.Writer.remove
    removed = []

    def remove(self, rel, entry):
        if removed:
            raise Killed
        removed.append(rel)
        real_remove(self, rel, entry)

    monkeypatch.setattr(undoplan.Writer, "remove", remove)
    with pytest.raises(Killed):
        cp.undo()
    monkeypatch.setattr(undoplan.Writer, "remove", real_remove)
    again = Checkpoints(str(root), store=str(tmp_path / "store"))
    assert not again.undo().conflicts and not again.undo().conflicts
    assert (root / "d" / "c.txt").read_text() == "mine\n"
