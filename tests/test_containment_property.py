"""Property: random agent steps that do anything to the workspace and `.git` (hooks, config, gc,
reflog expire, a stash dropped, `.git` renamed or removed, objects deleted, daemons), interleaved
with the user's own edits, commits and stashes; after every agent request is undone, `git fsck`
is clean, every commit and stash the user made is still there, every file the user wrote holds
what they wrote, and nothing the agent planted is left."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clover.tools.environment import LocalEnvironment
from clover.tools.safety.boundary import StepBoundary, available
from clover.tools.undo.checkpoints import Checkpoints, SnapshotError
from clover.tools.undo.undorecorder import Recorder

pytestmark = pytest.mark.skipif(
    not available("/tmp/clover-test-steps")[0], reason="user namespaces or overlayfs are missing here"
)

AGENT = [
    "echo agent >> calc.py",
    "rm -f mine-*.txt README.md",
    "printf '#!/bin/sh\\ntouch planted-by-hook\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
    "git config core.fsmonitor 'touch planted-by-fsmonitor'",
    "git config alias.st '!touch planted-by-alias'",
    "git commit -qam agent-commit",
    "git reset -q --hard HEAD~1",
    "git stash drop -q",
    "git stash -q",
    "git reflog expire --expire=now --all && git gc -q --prune=now",
    "git branch -D -q feature",
    "git checkout -q -b agent-branch",
    "git tag -d v1",
    "rm -rf .git",
    "mv .git .g && printf 'gitdir: .g\\n' > .git",
    "mv .git/HEAD .git/HEAD.bak",
    "rm -rf .git/objects/?? .git/refs/heads/*",
    "(setsid bash -c 'sleep 0.5; rm -f mine-*.txt; touch planted-by-daemon' >/dev/null 2>&1 &)",
    "git init -q nested && touch nested/x",
]
USER = ["write", "commit", "stash"]

request = st.lists(st.sampled_from(AGENT), min_size=1, max_size=3)
episode = st.one_of(st.tuples(st.just("agent"), request), st.tuples(st.just("user"), st.sampled_from(USER)))


def git(repo: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {proc.stderr}")
    return proc.stdout


class User:
    """The user's own work between the agent's requests, and what it must find intact after."""

    def __init__(self, repo: Path) -> None:
        self.repo, self.n = repo, 0
        self.files: dict[str, str] = {}
        self.commits: list[str] = [git(repo, "rev-parse", "HEAD").strip()]
        self.stashes: list[str] = git(repo, "stash", "list", "--format=%H").split()

    def act(self, what: str) -> None:
        self.n += 1
        name = f"mine-{self.n}.txt"
        (self.repo / name).write_text(f"{self.n}\n")
        self.files[name] = f"{self.n}\n"
        if what == "commit":
            git(self.repo, "add", name)
            git(self.repo, "commit", "-qm", f"user-{self.n}")
            self.commits.append(git(self.repo, "rev-parse", "HEAD").strip())
        elif what == "stash":
            with open(self.repo / "stashme.txt", "a") as fh:
                fh.write(f"{self.n}\n")
            if git(self.repo, "stash", "-q", check=False) == "":
                top = git(self.repo, "stash", "list", "--format=%H", check=False).split()
                self.stashes += top[:1]


def start(tmp: Path) -> Path:
    repo = tmp / "repo"
    repo.mkdir()
    for cmd in (
        "git init -q && git config user.name u && git config user.email u@u",
        "printf 'def add(a, b):\\n    return a - b\\n' > calc.py && echo calc > README.md && echo s > stashme.txt",
        "git add -A && git commit -qm one && git tag v1 && git branch feature",
        "echo stash-me >> README.md && git stash -q",
    ):
        subprocess.run(["bash", "-c", cmd], cwd=repo, check=True, capture_output=True)
    return repo


@settings(
    max_examples=int(os.environ.get("CLOVER_PROPERTY_EXAMPLES", "10")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(episodes=st.lists(episode, min_size=1, max_size=5))
def test_after_undoing_every_agent_request_the_users_history_and_files_are_intact(tmp_path_factory, episodes):
    tmp = tmp_path_factory.mktemp("containment")
    repo = start(tmp)
    user = User(repo)
    boundary = StepBoundary([str(repo)], str(tmp / "steps"), pid_namespace=True)
    env = LocalEnvironment(str(repo), boundary=boundary, env={**os.environ, "HOME": str(tmp)})
    cp = Checkpoints(str(repo), store=str(tmp / "store"))
    recorder = Recorder(cp, "agent")
    boundary.recorder = recorder
    step = 0
    for who, what in episodes:
        if who == "user":
            user.act(what)
            continue
        recorder.start_request(" ; ".join(what)[:60])
        for command in what:
            step += 1
            recorder.begin(step)
            env.execute(command)
            recorder.end(step)
    if any("setsid" in c for who, what in episodes if who == "agent" for c in what):
        time.sleep(0.8)  # a daemon a step left would act now
    for _ in range(60):
        try:
            cp.undo()
        except SnapshotError:
            break
    fsck = subprocess.run(
        ["git", "fsck", "--strict", "--no-dangling"], cwd=repo, capture_output=True, text=True
    )
    assert fsck.returncode == 0, (episodes, fsck.stderr)
    reachable = set(git(repo, "rev-list", "--all", "--reflog").split())
    assert set(user.commits) <= reachable, episodes
    stashes = set(git(repo, "stash", "list", "--format=%H").split())
    assert set(user.stashes) <= stashes, (episodes, user.stashes, stashes)
    for name, text in user.files.items():
        assert (repo / name).read_text() == text, (episodes, name)
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert git(repo, "config", "--get", "core.fsmonitor", check=False) == ""
    assert git(repo, "config", "--get", "alias.st", check=False) == ""
    assert not list(repo.glob("planted-*")) and not (repo / ".g").exists() and not (repo / "nested").exists()
