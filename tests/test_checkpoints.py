"""tools/undo/checkpoints.py: per-step change records; undo reverts exactly the agent's changes,
byte-exact, and never what the user changed (a conflict is listed and left alone)."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

import pytest

from clover.tools.undo import treescan, undoreport
from clover.tools.undo.checkpoints import Checkpoints, SnapshotError, default_store


def sh(cmd: str, cwd: Path) -> str:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, check=True, capture_output=True, text=True).stdout


def state(root: Path, skip: tuple[str, ...] = (".git",)) -> dict[str, tuple]:
    """Every file, symlink and directory under root: bytes and bits, the link target, the dir's bits."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = [d for d in dirnames if d not in skip and d not in links]
        for name in filenames + links + dirnames:
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if os.path.islink(full):
                out[rel] = ("link", os.readlink(full))
            elif os.path.isdir(full):
                out[rel] = ("dir", stat.S_IMODE(os.stat(full).st_mode))
            else:
                out[rel] = ("file", Path(full).read_bytes(), stat.S_IMODE(os.stat(full).st_mode))
    return out


def git_dir_digest(root: Path) -> dict[str, tuple]:
    """Every file under the user's .git: bytes and mtime (any write shows up)."""
    out = {}
    for dirpath, _, filenames in os.walk(root / ".git"):
        for name in filenames:
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, root)] = (
                hashlib.sha256(Path(full).read_bytes()).hexdigest(),
                os.lstat(full).st_mtime_ns,
            )
    return out


class Steps:
    """Drives Checkpoints as the agent does: begin, the step's change, end."""

    def __init__(self, root: Path, store: Path, session: str = "s1") -> None:
        self.cp = Checkpoints(str(root), store=str(store))
        self.root, self.session, self.request, self.step = root, session, 0, 0

    def request_(self, label: str = "request") -> None:
        self.request, self.label = self.cp.next_request(self.session), label

    def run(self, change) -> None:
        if not self.request:
            self.request_()
        self.step += 1
        self.cp.begin()
        change() if callable(change) else sh(change, self.root)
        self.cp.end(self.session, self.request, self.label, self.step)


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    sh("git init -q && git config user.email t@t && git config user.name t", root)
    (root / "a.txt").write_text("alpha\n")
    (root / "keep.txt").write_text("unchanged\n")
    (root / "gone.txt").write_text("to be deleted\n")
    (root / "bin.dat").write_bytes(bytes(range(256)) * 4)
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (root / "pkg" / "old").mkdir()
    (root / "pkg" / "old" / "f.txt").write_text("old dir\n")
    (root / "becomes_dir").write_text("a file for now\n")
    os.symlink("a.txt", root / "link")
    (root / ".gitignore").write_text("node_modules/\n*.log\n")
    (root / "node_modules").mkdir()
    (root / "node_modules" / "huge.js").write_text("ignored\n")
    (root / "debug.log").write_text("ignored log\n")
    return root


SHELL_CHANGES = (
    "rm gone.txt && echo new > created.txt && chmod +x run.sh && rm -r pkg/old && "
    "printf '\\x00\\xff\\x10' >> bin.dat && rm becomes_dir && mkdir becomes_dir && echo in > becomes_dir/x && "
    "ln -sfn keep.txt link && printf 'a\\r\\nb\\r\\n' > crlf.txt && mkdir -p deep/er && echo d > deep/er/f && "
    "chmod 755 keep.txt && mv pkg/mod.py pkg/renamed.py && mkdir empty && chmod 700 pkg && rm debug.log"
)


def test_undo_redo_restore_edits_and_shell_changes_exactly(repo, tmp_path):
    steps = Steps(repo, tmp_path / "store")
    before = state(repo)
    steps.run(lambda: (repo / "a.txt").write_text("alpha\nbeta\n"))  # an edit tool's change
    steps.run(SHELL_CHANGES)  # a shell command's: create, delete, binary, chmod, dir <-> file, link, rename
    after = state(repo)
    assert after != before
    for _ in range(2):
        outcome = steps.cp.undo()
        assert not outcome.conflicts
        assert state(repo) == before
        assert not (repo / "deep").exists() and not (repo / "empty").exists()
        steps.cp.redo()
        assert state(repo) == after


def test_user_changes_between_and_after_steps_survive_and_conflicts_are_left_alone(repo, tmp_path):
    steps = Steps(repo, tmp_path / "store")
    steps.run("echo agent > a.txt && echo agent > made.txt && rm gone.txt")
    (repo / "notes.txt").write_text("my notes\n")  # the user, after the step
    with open(repo / "keep.txt", "a") as fh:
        fh.write("user line\n")
    (repo / "made.txt").write_text("the user rewrote the agent's new file\n")
    group, plan = steps.cp.plan()
    lines = undoreport.describe(steps.cp.repo, group, plan)
    assert lines[0] == 'undo: session s1, request 1 "request" (step 1)'
    assert "  revert   a.txt  (modified by the agent, +1 -1)" in lines
    assert "  restore  gone.txt  (deleted by the agent, +0 -1)" in lines
    assert "  CONFLICT made.txt: changed since the agent's step; left alone" in lines
    outcome = steps.cp.apply(plan)[1]
    assert [c.path for c in outcome.conflicts] == ["made.txt"]
    assert (repo / "a.txt").read_text() == "alpha\n" and (repo / "gone.txt").exists()
    assert (repo / "notes.txt").read_text() == "my notes\n"
    assert (repo / "keep.txt").read_text() == "unchanged\nuser line\n"
    assert (repo / "made.txt").read_text() == "the user rewrote the agent's new file\n"
    # the conflict stays undoable: --force overwrites it after saving the user's version
    group, plan = steps.cp.plan(force=True)
    assert [a.path for a in plan.actions] == ["made.txt"] and plan.actions[0].save is not None
    outcome = steps.cp.apply(plan, force=True)[1]
    assert not (repo / "made.txt").exists()
    (saved,) = outcome.saved
    assert (
        saved.startswith(steps.cp.store)
        and Path(saved).read_text() == "the user rewrote the agent's new file\n"
    )
    with pytest.raises(SnapshotError, match="nothing to undo"):
        steps.cp.plan()


def test_a_user_edit_between_two_agent_steps_stops_the_chain(repo, tmp_path):
    steps = Steps(repo, tmp_path / "store")
    steps.run("echo one > a.txt")
    (repo / "a.txt").write_text("user\n")  # between the steps
    steps.run("echo two > a.txt")
    outcome = steps.cp.undo()
    assert (repo / "a.txt").read_text() == "user\n"  # step 2 reverted, step 1's change is under the user's
    assert [c.path for c in outcome.conflicts] == ["a.txt"]


def test_requests_are_undone_whole_newest_first_and_new_work_clears_redo(repo, tmp_path):
    steps = Steps(repo, tmp_path / "store")
    states = [state(repo)]
    for i in range(3):
        steps.request_(f"request {i}")
        steps.run(f"echo {i} > step{i}.txt")
        steps.run(f"echo {i} >> a.txt")
        states.append(state(repo))
    steps.run("true")  # changes nothing: no record
    assert [g.label for g in steps.cp.groups()] == ["request 0", "request 1", "request 2"]
    for i in (2, 1, 0):
        steps.cp.undo()
        assert state(repo) == states[i]
    with pytest.raises(SnapshotError, match="nothing to undo"):
        steps.cp.undo()
    for i in (1, 2, 3):
        steps.cp.redo()
        assert state(repo) == states[i]
    with pytest.raises(SnapshotError, match="nothing to redo"):
        steps.cp.redo()
    steps.cp.undo()
    steps.request_("new direction")
    steps.run("echo new > other.txt")
    with pytest.raises(SnapshotError, match="nothing to redo"):
        steps.cp.redo()
    assert [g.state() for g in steps.cp.groups()] == ["applied", "applied", "undone", "applied"]


def test_history_persists_across_instances_and_sessions_are_apart(repo, tmp_path):
    store = tmp_path / "store"
    Steps(repo, store, session="chat-a").run("echo a > a.txt")
    Steps(repo, store, session="chat-b").run("echo b > keep.txt")
    with pytest.raises(SnapshotError, match="nothing to undo in this session"):
        Checkpoints(str(repo), store=str(store)).undo(session="chat-new")
    Checkpoints(str(repo), store=str(store)).undo(session="chat-a")  # e.g. `clover undo` in a new process
    assert (repo / "a.txt").read_text() == "alpha\n" and (repo / "keep.txt").read_text() == "b\n"
    Checkpoints(str(repo), store=str(store)).undo()
    assert (repo / "keep.txt").read_text() == "unchanged\n"


def test_files_changed_between_the_plan_and_the_answer_stop_the_undo(repo, tmp_path):
    steps = Steps(repo, tmp_path / "store")
    steps.run("echo agent > a.txt")
    _group, plan = steps.cp.plan()
    (repo / "a.txt").write_text("typed while the question was open\n")
    with pytest.raises(SnapshotError, match="changed since the plan was shown"):
        steps.cp.apply(plan)
    assert (repo / "a.txt").read_text() == "typed while the question was open\n"


def test_ignored_files_are_recorded_caches_not_big_files_by_stat(repo, tmp_path, monkeypatch):
    monkeypatch.setattr(treescan, "MAX_CONTENT_BYTES", 1000)
    (repo / "weights.log").write_bytes(b"w" * 2000)  # over the cap
    steps = Steps(repo, tmp_path / "store")

    def change():
        (repo / "node_modules" / "huge.js").write_text("changed, still a cache\n")
        (repo / "a.txt").write_text("edit\n")
        (repo / "debug.log").unlink()  # an ignored file deleted: undo brings it back
        (repo / "made.bin").write_bytes(b"m" * 3000)  # a big file the step made: undo may delete it

    steps.run(change)
    paths = {c.path for r in steps.cp.groups()[0].records for c in r.changes}
    assert paths == {"a.txt", "debug.log", "made.bin"}
    steps.cp.undo()
    assert (repo / "a.txt").read_text() == "alpha\n" and (repo / "debug.log").read_text() == "ignored log\n"
    assert not (repo / "made.bin").exists()
    assert (repo / "node_modules" / "huge.js").read_text() == "changed, still a cache\n"
    steps.request_("big")
    steps.run(lambda: (repo / "weights.log").write_bytes(b"v" * 2000))  # modified: not restorable
    outcome = steps.cp.undo()
    assert [c.conflict for c in outcome.conflicts] == ["its content was not kept (a file over the size cap)"]
    assert (repo / "weights.log").read_bytes() == b"v" * 2000


def test_modes_symlinks_empty_dirs_round_trip_byte_exact(repo, tmp_path):
    (repo / "secret.env").write_text("KEY=1\n")
    (repo / "secret.env").chmod(0o600)
    (repo / "ro.txt").write_text("read only\n")
    (repo / "ro.txt").chmod(0o444)
    (repo / "empty" / "nested").mkdir(parents=True)
    (repo / "keep_empty").mkdir()
    os.symlink("missing-target", repo / "dangling")
    os.symlink("pkg", repo / "dirlink")
    steps = Steps(repo, tmp_path / "store")
    before = state(repo)
    steps.run(
        "chmod 644 secret.env ro.txt && chmod 700 run.sh && rm secret.env && rmdir empty/nested keep_empty && "
        "mkdir -p fresh/empty other && ln -sfn a.txt dangling && rm dirlink && ln -s keep.txt newlink && "
        "chmod 555 pkg/old"
    )
    after = state(repo)
    steps.cp.undo()
    assert state(repo) == before
    steps.cp.redo()
    assert state(repo) == after


def dotgit_state(root: Path) -> tuple:
    """What the agent can change with git: HEAD, every ref, config, hooks, the index."""
    probe = (
        "git symbolic-ref -q HEAD; git rev-parse HEAD; git for-each-ref; git config --local --list; "
        "ls -l .git/hooks | tail -n +2 | awk '{print $1, $NF}'; git ls-files -s; git status --porcelain"
    )
    return sh(probe, root), (root / ".git" / "config").read_bytes()


def test_agent_changes_to_dotgit_are_undone_and_redone(repo, tmp_path):
    sh("git add -A && git commit -qm init && echo staged >> a.txt && git add a.txt", repo)
    before = dotgit_state(repo)
    steps = Steps(repo, tmp_path / "store")
    steps.run(
        "git commit -qam agent && git checkout -qb agent-branch && git config user.name agent && "
        "git tag v9 && printf '#!/bin/sh\\necho planted\\n' > .git/hooks/post-commit && "
        "chmod +x .git/hooks/post-commit && echo more >> keep.txt && git add keep.txt && git pack-refs --all"
    )
    after = dotgit_state(repo)
    steps.cp.undo()
    assert dotgit_state(repo) == before
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    steps.cp.redo()
    assert dotgit_state(repo) == after


def test_the_users_git_state_is_not_written_when_the_agent_left_it_alone(repo, tmp_path):
    sh(
        "git add -A && git commit -qm init && git branch feature && echo stash-me >> keep.txt && git stash -q && "
        "echo staged >> a.txt && git add a.txt && echo unstaged >> keep.txt",
        repo,
    )
    digest = git_dir_digest(repo)
    steps = Steps(repo, tmp_path / "store")
    steps.run(lambda: (repo / "a.txt").write_text("agent edit\n"))
    steps.run("echo x > new.txt")
    sh("git status -s > /dev/null", repo)  # the user's git refreshes the index between steps
    digest = git_dir_digest(repo)
    steps.cp.undo()
    steps.cp.redo()
    steps.cp.undo()
    assert git_dir_digest(repo) == digest  # not one byte or mtime under .git changed


def test_works_outside_git_and_with_eol_attributes(tmp_path):
    root = tmp_path / "plain"
    root.mkdir()
    (root / ".gitattributes").write_text("* text=auto eol=crlf\n*.bin filter=lfs\n")
    (root / "lf.txt").write_bytes(b"one\ntwo\n")
    (root / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    (root / "mixed.txt").write_bytes(b"a\nb\r\nc")
    (root / "x.bin").write_bytes(b"\x00\x01binary")
    steps = Steps(root, tmp_path / "store")
    before = state(root)

    def clobber():
        for name in ("lf.txt", "crlf.txt", "mixed.txt", "x.bin"):
            (root / name).write_bytes(b"clobbered")
        (root / "extra.txt").write_text("x")

    steps.run(clobber)
    steps.cp.undo()
    assert state(root) == before


def test_store_location_and_errors(tmp_path, monkeypatch):
    root = tmp_path / "w"
    root.mkdir()
    monkeypatch.setenv("CLOVER_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    store = default_store(str(root))
    # state, not cache: clearing ~/.cache leaves the means to undo in place
    assert store.startswith(str(tmp_path / "state" / "undo"))
    assert default_store(str(root)) == store and default_store(str(tmp_path)) != store
    cp = Checkpoints(str(root))
    assert cp.store == os.path.realpath(store)
    # private: another user cannot read what it keeps of the user's files
    for path in (tmp_path / "state", tmp_path / "state" / "undo", Path(store)):
        assert os.stat(path).st_mode & 0o077 == 0, path
    with pytest.raises(SnapshotError, match="nothing to undo"):
        cp.undo()
    with pytest.raises(SnapshotError, match="outside the workspace"):
        Checkpoints(str(root), store=str(root / ".clover"))
    with pytest.raises(SnapshotError, match="not a directory"):
        Checkpoints(str(tmp_path / "missing"))
    (tmp_path / "a-file").write_text("")
    with pytest.raises(SnapshotError, match="cannot use"):
        Checkpoints(str(root), store=str(tmp_path / "a-file" / "store"))


def test_changes_after_an_undo_survive_a_redo(repo, tmp_path):
    steps = Steps(repo, tmp_path / "store")
    steps.run("echo 'step one' > a.txt")
    steps.cp.undo()
    (repo / "manual.txt").write_text("typed by the user after undo\n")
    (repo / "a.txt").write_text("and the user edited a.txt too\n")
    outcome = steps.cp.redo()
    assert [c.path for c in outcome.conflicts] == ["a.txt"] and [c.conflict for c in outcome.conflicts] == [
        "changed since the undo"
    ]
    assert (repo / "a.txt").read_text() == "and the user edited a.txt too\n"
    assert (repo / "manual.txt").exists()


def test_nested_repositories_work_trees_are_recorded_their_history_never(tmp_path):
    root = tmp_path / "w"
    (root / "vendor" / "lib").mkdir(parents=True)
    (root / "a.txt").write_text("a\n")
    sh(
        "cd vendor/lib && git init -q && echo x > x && git add x && git -c user.name=t -c user.email=t@t commit -qm x",
        root,
    )
    objects = sorted(str(p) for p in (root / "vendor/lib/.git/objects").rglob("*"))
    steps = Steps(root, tmp_path / "store")
    steps.run(
        "echo changed > a.txt && echo edited > vendor/lib/x && cd vendor/lib && "
        "git -c user.name=t -c user.email=t@t commit -qam agent"
    )
    steps.cp.undo()
    assert (root / "a.txt").read_text() == "a\n" and (root / "vendor/lib/x").read_text() == "x\n"
    assert sh("git -C vendor/lib log --format=%s", root) == "x\n"  # the agent's commit is gone from HEAD
    # its objects stay (history is only ever added to): nothing under objects/ was deleted
    assert set(objects) <= {str(p) for p in (root / "vendor/lib/.git/objects").rglob("*")}


def test_a_repository_a_step_creates_is_removed_whole_or_left_whole(repo, tmp_path):
    (repo / "sub").mkdir()
    (repo / "sub" / "tracked.txt").write_text("t\n")
    steps = Steps(repo, tmp_path / "store")
    before = state(repo)
    steps.run(
        "git init -q sub/t && cd sub/t && echo y > y && git add y && "
        "git -c user.name=t -c user.email=t@t commit -qm planted && printf '#!/bin/sh\\n' > .git/hooks/pre-commit"
    )
    steps.cp.undo()
    assert not (repo / "sub" / "t").exists() and state(repo) == before
    steps.cp.redo()
    assert sh("git -C sub/t log --format=%s", repo) == "planted\n"
    (repo / "sub/t/.git/info/users-file").write_text("the user's own\n")  # made by the user since
    outcome = steps.cp.undo()
    assert (repo / "sub/t/.git/HEAD").exists() and (repo / "sub/t/.git/info/users-file").exists()
    assert any("left whole" in c.conflict for c in outcome.conflicts)


def test_a_dotgit_moved_aside_comes_back_and_its_history_is_never_deleted(repo, tmp_path):
    sh("git add -A && git commit -qm init", repo)
    head = sh("git rev-parse HEAD", repo)
    steps = Steps(repo, tmp_path / "store")
    steps.run(
        "mv .git .g && printf 'gitdir: .g\\n' > .git && git -c user.name=t -c user.email=t@t commit -qm "
        "'through the gitfile' --allow-empty"
    )
    _group, plan = steps.cp.plan()
    assert [(m.src, m.dst) for m, _why in plan.moves] == [(".git", ".g")]
    steps.cp.undo()
    assert (repo / ".git").is_dir() and not (repo / ".g").exists()
    assert sh("git rev-parse HEAD", repo) == head
    with pytest.raises(SnapshotError, match="nothing to undo"):
        steps.cp.undo()  # the second undo (the red team's) finds nothing, deletes nothing
    steps.cp.redo()
    assert (repo / ".git").read_text() == "gitdir: .g\n" and (repo / ".g" / "objects").is_dir()
    assert sh("git log --format=%s", repo).splitlines() == ["through the gitfile", "init"]
    steps.cp.undo()
    assert sh("git log --format=%s", repo).splitlines() == ["init"]
    assert sh("git cat-file -t " + sh("git -C . rev-parse HEAD", repo).strip(), repo) == "commit\n"


def test_an_older_request_is_not_undone_over_what_a_later_one_left(repo, tmp_path):
    """Found by the property test: request 1 deletes a.txt, request 2 makes it again, the user
    deletes it; undoing request 1 must not bring the old a.txt back (a.txt is absent, as request
    1 left it, but only because the user deleted request 2's file). Undoing request 2 finds a.txt
    already gone, as its undo would leave it: nothing to write, no conflict."""
    steps = Steps(repo, tmp_path / "store")
    steps.request_("one")
    steps.run("rm a.txt")
    steps.request_("two")
    steps.run("echo again > a.txt")
    (repo / "a.txt").unlink()  # the user
    first = steps.cp.undo()
    second = steps.cp.undo()
    assert not (repo / "a.txt").exists()
    assert not first.conflicts and not first.done
    assert [c.conflict for c in second.conflicts] == ["changed since the agent's step, and back"]


def test_a_user_change_seen_between_steps_is_never_reverted_even_when_changed_back(repo, tmp_path):
    """The user rewrites what the agent deleted and deletes it again; the path looks as the agent
    left it, but a scan between the two (the next step's) saw the user's version: not reverted."""
    steps = Steps(repo, tmp_path / "store")
    steps.request_("one")
    steps.run("rm a.txt")
    (repo / "a.txt").write_text("the user's\n")
    steps.request_("two")
    steps.run("echo other > other.txt")  # its scan sees the user's a.txt
    (repo / "a.txt").unlink()
    steps.cp.undo()
    outcome = steps.cp.undo()
    assert not (repo / "a.txt").exists()
    assert [c.conflict for c in outcome.conflicts] == ["changed since the agent's step, and back"]
