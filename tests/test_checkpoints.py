"""tools/checkpoints.py: byte-exact undo/redo of edits and shell changes, the user's repo untouched."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

import pytest

from clover.tools import checkpoints
from clover.tools.checkpoints import Checkpoints, SnapshotError, default_store


def sh(cmd: str, cwd: Path) -> str:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, check=True, capture_output=True, text=True).stdout


def state(root: Path, skip: tuple[str, ...] = (".git",)) -> dict[str, tuple]:
    """Every file and symlink under root: bytes and permission bits, or the link target."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames if d not in skip and not os.path.islink(os.path.join(dirpath, d))]
        names = filenames + [d for d in os.listdir(dirpath) if os.path.islink(os.path.join(dirpath, d))
                             and d not in filenames]
        for name in names:
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if os.path.islink(full):
                out[rel] = ("link", os.readlink(full))
            else:
                out[rel] = ("file", Path(full).read_bytes(), stat.S_IMODE(os.stat(full).st_mode))
    return out


def git_dir_digest(root: Path) -> dict[str, tuple]:
    """Every file under the user's .git: bytes and mtime (any write shows up)."""
    out = {}
    for dirpath, _, filenames in os.walk(root / ".git"):
        for name in filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            out[os.path.relpath(full, root)] = (hashlib.sha256(Path(full).read_bytes()).hexdigest(), st.st_mtime_ns)
    return out


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


def test_undo_redo_restore_edits_and_shell_changes_exactly(repo, tmp_path):
    cp = Checkpoints(str(repo), store=str(tmp_path / "store"))
    first = cp.snapshot("before step 1")
    assert first
    before = state(repo)
    # an edit tool's change ...
    (repo / "a.txt").write_text("alpha\nbeta\n")
    # ... and a shell command's changes: create, delete, binary, chmod, dir <-> file, symlink, CRLF
    sh("rm gone.txt && echo new > created.txt && chmod +x run.sh && rm -r pkg/old && "
       "printf '\\x00\\xff\\x10' >> bin.dat && rm becomes_dir && mkdir becomes_dir && echo in > becomes_dir/x && "
       "ln -sfn keep.txt link && printf 'a\\r\\nb\\r\\n' > crlf.txt && mkdir -p deep/er && echo d > deep/er/f",
       repo)
    (repo / "keep.txt").chmod(0o755)
    after = state(repo)
    assert after != before

    restored = cp.undo()
    assert restored == first
    assert state(repo) == before
    assert not (repo / "deep").exists()  # directories emptied by the undo go too

    cp.redo()
    assert state(repo) == after
    cp.undo()
    assert state(repo) == before
    cp.redo()
    assert state(repo) == after


def test_multi_step_history_and_redo_cleared_by_new_work(repo, tmp_path):
    cp = Checkpoints(str(repo), store=str(tmp_path / "store"))
    states = []
    for i in range(3):
        cp.snapshot(f"before step {i}")
        states.append(state(repo))
        (repo / f"step{i}.txt").write_text(f"{i}\n")
    final = state(repo)
    assert cp.snapshot("nothing changed?") is not None  # the last step's change
    assert cp.snapshot("again") is None
    cp.undo()
    assert state(repo) == states[2]
    cp.undo()
    assert state(repo) == states[1]
    cp.undo()
    assert state(repo) == states[0]
    with pytest.raises(SnapshotError, match="nothing to undo"):
        cp.undo()
    cp.redo()
    cp.redo()
    cp.redo()
    assert state(repo) == final
    with pytest.raises(SnapshotError, match="nothing to redo"):
        cp.redo()
    cp.undo()
    (repo / "other.txt").write_text("new direction\n")
    assert cp.snapshot("new work") is not None
    with pytest.raises(SnapshotError, match="nothing to redo"):
        cp.redo()
    labels = [c.label for c in cp.list()]
    assert labels[:3] == ["before step 0", "before step 1", "before step 2"] and labels[-1] == "new work"


def test_history_persists_across_instances(repo, tmp_path):
    store = str(tmp_path / "store")
    Checkpoints(str(repo), store=store).snapshot("s1")
    before = state(repo)
    (repo / "a.txt").write_text("changed by the agent\n")
    Checkpoints(str(repo), store=store).undo()  # e.g. `clover undo` in a new process
    assert state(repo) == before
    listed = Checkpoints(str(repo), store=store).list()
    assert [c.undone for c in listed] == [False, True]


def shadow_files(store: Path, commit: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return subprocess.run(["git", "--git-dir", str(store / "git"), "ls-tree", "-r", "--name-only", commit],
                          capture_output=True, text=True, check=True, env=env).stdout.split()


def test_ignored_files_are_snapshotted_caches_big_files_and_dotgit_are_not(repo, tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "MAX_IGNORED_BYTES", 1000)
    (repo / "weights.log").write_bytes(b"w" * 2000)  # ignored and over the cap
    store = tmp_path / "store"
    cp = Checkpoints(str(repo), store=str(store))
    files = shadow_files(store, cp.snapshot("s"))
    work = [f.removeprefix("work/") for f in files if f.startswith("work/")]
    assert "a.txt" in work and ".gitignore" in work and "debug.log" in work
    assert not any(f.startswith((".git/", "node_modules")) or f == "weights.log" for f in work)
    (repo / "node_modules" / "huge.js").write_text("changed, still a cache\n")
    (repo / "weights.log").write_bytes(b"v" * 2000)
    (repo / "a.txt").write_text("edit\n")
    (repo / "debug.log").unlink()  # the agent deletes an ignored file: undo must bring it back
    cp.undo()
    assert (repo / "a.txt").read_text() == "alpha\n"
    assert (repo / "debug.log").read_text() == "ignored log\n"
    assert (repo / "node_modules" / "huge.js").read_text() == "changed, still a cache\n"
    assert (repo / "weights.log").read_bytes() == b"v" * 2000  # never snapshotted, never touched


def test_modes_symlinks_empty_dirs_and_ignored_files_round_trip_byte_exact(repo, tmp_path):
    (repo / "secret.env").write_text("KEY=1\n")
    (repo / ".gitignore").write_text("node_modules/\n*.log\n*.env\n")
    (repo / "secret.env").chmod(0o600)
    (repo / "ro.txt").write_text("read only\n")
    (repo / "ro.txt").chmod(0o444)
    (repo / "tool").write_text("#!/bin/sh\n")
    (repo / "tool").chmod(0o750)
    (repo / "empty" / "nested").mkdir(parents=True)
    (repo / "keep_empty").mkdir()
    os.symlink("missing-target", repo / "dangling")
    os.symlink("pkg", repo / "dirlink")
    cp = Checkpoints(str(repo), store=str(tmp_path / "store"))
    cp.snapshot("before")
    before, dirs_before = state(repo), empty_dirs(repo)
    sh("chmod 644 secret.env ro.txt && chmod 755 tool && chmod 700 run.sh && rm secret.env debug.log && "
       "rmdir empty/nested keep_empty && mkdir -p fresh/empty other && ln -sfn a.txt dangling && "
       "rm dirlink && ln -s keep.txt newlink && echo noise > new.log", repo)
    after, dirs_after = state(repo), empty_dirs(repo)
    assert after != before and dirs_after != dirs_before
    cp.undo()
    assert state(repo) == before and empty_dirs(repo) == dirs_before
    cp.redo()
    assert state(repo) == after and empty_dirs(repo) == dirs_after
    cp.undo()
    assert state(repo) == before and empty_dirs(repo) == dirs_before


def empty_dirs(root: Path) -> list[str]:
    return sorted(os.path.relpath(d, root) for d, sub, files in os.walk(root)
                  if ".git" not in Path(d).relative_to(root).parts and not sub and not files and Path(d) != root)


def dotgit_state(root: Path) -> tuple:
    """What the agent can change with git: HEAD, every ref, config, hooks, the index."""
    probe = ("git symbolic-ref -q HEAD; git rev-parse HEAD; git for-each-ref; git config --local --list; "
             "ls -l .git/hooks | tail -n +2 | awk '{print $1, $NF}'; git ls-files -s; git status --porcelain")
    return sh(probe, root), (root / ".git" / "config").read_bytes()


def test_agent_changes_to_dotgit_are_undone_and_redone(repo, tmp_path):
    sh("git add -A && git commit -qm init && echo staged >> a.txt && git add a.txt", repo)
    cp = Checkpoints(str(repo), store=str(tmp_path / "store"))
    cp.snapshot("before")
    before, files_before = dotgit_state(repo), state(repo)
    sh("git commit -qam agent && git checkout -qb agent-branch && git config user.name agent && "
       "git tag v9 && printf '#!/bin/sh\\necho planted\\n' > .git/hooks/post-commit && "
       "chmod +x .git/hooks/post-commit && echo more >> keep.txt && git add keep.txt && git pack-refs --all",
       repo)
    after = dotgit_state(repo)
    assert after != before
    cp.undo()
    assert dotgit_state(repo) == before and state(repo) == files_before
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    cp.redo()
    assert dotgit_state(repo) == after
    cp.undo()
    assert dotgit_state(repo) == before


def test_user_index_branches_stash_hooks_untouched(repo, tmp_path):
    sh("git add -A && git commit -qm init && git branch feature && echo stash-me >> keep.txt && git stash -q && "
       "echo staged >> a.txt && git add a.txt && echo unstaged >> keep.txt", repo)
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 1\n")
    hook.chmod(0o755)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("secret_notes.txt\n")
    (repo / "secret_notes.txt").write_text("excluded via info/exclude\n")
    digest = git_dir_digest(repo)
    probe = "git for-each-ref && git stash list && git stash show -p && git diff --cached && git rev-parse HEAD"
    refs = sh(probe, repo)

    cp = Checkpoints(str(repo), store=str(tmp_path / "store"))
    cp.snapshot("s1")
    (repo / "a.txt").write_text("agent edit\n")
    sh("echo x > new.txt", repo)
    cp.snapshot("s2")
    (repo / "b.txt").write_text("more\n")
    cp.undo()
    cp.undo()
    cp.redo()
    cp.list()

    assert git_dir_digest(repo) == digest  # not one byte or mtime under .git changed
    assert sh(probe, repo) == refs
    assert "staged" in refs and "feature" in refs and "stash@{0}" in refs
    shadow = subprocess.run(
        ["git", "--git-dir", str(tmp_path / "store" / "git"), "ls-tree", "-r", "--name-only", cp.list()[0].id],
        capture_output=True, text=True, check=True, env={"PATH": os.environ["PATH"]}).stdout.split()
    # excluded by the user's info/exclude, so ignored: snapshotted like every ignored file
    assert "work/a.txt" in shadow and "work/secret_notes.txt" in shadow


def test_works_outside_git_and_with_eol_attributes(tmp_path):
    root = tmp_path / "plain"
    root.mkdir()
    (root / ".gitattributes").write_text("* text=auto eol=crlf\n*.bin filter=lfs\n")
    (root / "lf.txt").write_bytes(b"one\ntwo\n")
    (root / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    (root / "mixed.txt").write_bytes(b"a\nb\r\nc")
    (root / "x.bin").write_bytes(b"\x00\x01binary")
    cp = Checkpoints(str(root), store=str(tmp_path / "store"))
    cp.snapshot("s")
    before = state(root)
    for name in ("lf.txt", "crlf.txt", "mixed.txt", "x.bin"):
        (root / name).write_bytes(b"clobbered")
    (root / "extra.txt").write_text("x")
    cp.undo()
    assert state(root) == before


def test_store_location_and_errors(tmp_path, monkeypatch):
    root = tmp_path / "w"
    root.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    store = default_store(str(root))
    assert store.startswith(str(tmp_path / "cache" / "clover" / "checkpoints"))
    assert default_store(str(root)) == store and default_store(str(tmp_path)) != store
    cp = Checkpoints(str(root))
    assert cp.store == os.path.realpath(store)
    with pytest.raises(SnapshotError, match="nothing to undo"):
        cp.undo()
    with pytest.raises(SnapshotError, match="outside the workspace"):
        Checkpoints(str(root), store=str(root / ".clover"))
    with pytest.raises(SnapshotError, match="not a directory"):
        Checkpoints(str(tmp_path / "missing"))


def test_changes_after_undo_survive_a_redo(repo, tmp_path):
    cp = Checkpoints(str(repo), store=str(tmp_path / "store"))
    cp.snapshot("s1")
    (repo / "a.txt").write_text("step one\n")
    cp.undo()
    (repo / "manual.txt").write_text("typed by the user after undo\n")
    with_manual = state(repo)
    cp.redo()
    assert (repo / "a.txt").read_text() == "step one\n" and not (repo / "manual.txt").exists()
    cp.undo()
    assert state(repo) == with_manual


def test_nested_repositories_are_left_out_not_fatal(tmp_path):
    root = tmp_path / "w"
    (root / "vendor" / "lib").mkdir(parents=True)
    (root / "vendor" / "unborn").mkdir()
    (root / "a.txt").write_text("a\n")
    sh("cd vendor/lib && git init -q && echo x > x && git add x && "
       "git -c user.name=t -c user.email=t@t commit -qm x && cd ../unborn && git init -q && echo y > y", root)
    cp = Checkpoints(str(root), store=str(tmp_path / "store"))
    cp.snapshot("s1")
    (root / "a.txt").write_text("changed\n")
    (root / "vendor" / "lib" / "x").write_text("edited inside the nested repo\n")
    sh("mkdir -p later/inner && cd later/inner && git init -q", root)  # a repo appearing mid-session
    assert cp.snapshot("s2")
    cp.undo()
    assert (root / "a.txt").read_text() == "a\n"
    assert (root / "vendor" / "lib" / "x").read_text() == "edited inside the nested repo\n"
    assert (root / "vendor" / "unborn" / "y").exists() and (root / "later" / "inner" / ".git").is_dir()
    cp.redo()
    assert (root / "a.txt").read_text() == "changed\n"
