"""Clover's own git on the host runs no program, whatever the repository's config says.

Each case plants, in a real repository, config that makes the git program run a command which
touches a mark outside the workspace (a filter named `a=b`, which `-c filter.a=b.clean=` could not
switch off; gpg.ssh.program with log.showSignature on the read-only log; fsmonitor in an included
or conditionally included config; textconv and diff drivers; a hooks path; a `.git` file pointing
at a repository elsewhere). Then everything Clover does with git on the host runs: the checkpoint
recorder, `clover fix`'s trees, diff and commit, the git tool (status, diff, log, show, commit),
the chat's status, and the hardened git program the evals use. No mark may appear. A control at
the end runs the plain git program on the same repository and the mark does appear: the plant is
real. The outputs of the libgit2 versions match the git program's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from clover import gitdiff
from clover.tools.environment import LocalEnvironment
from clover.tools.git import gitporcelain, hostgit
from clover.tools.git.gitsafe import config_overrides, git_argv, run_git
from clover.tools.git_tools import GitTool
from clover.tools.listing import RunBackedFiles
from clover.tools.safety.sandbox import bwrap_available, make_wrapper, unavailable_reason
from clover.tools.undo.checkpoints import Checkpoints

IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


@pytest.fixture
def outside() -> Iterator[Path]:
    path = Path(
        tempfile.mkdtemp(prefix="clover-mark-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    )
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True)
def identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in IDENTITY.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def sh(cmd: str, cwd: Path) -> str:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, check=True, capture_output=True, text=True).stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    sh(
        "git init -q -b main && echo one > a.txt && echo keep > b.txt && git add -A && git commit -qm init",
        path,
    )
    return path


def _touch(outside: Path, name: str) -> str:
    return f"touch {outside}/{name}"


SIGNED_COMMIT = (
    "tree=$(git rev-parse HEAD^{tree}) && parent=$(git rev-parse HEAD) && "
    "printf 'tree %s\\nparent %s\\nauthor t <t@t> 1700000000 +0000\\ncommitter t <t@t> 1700000000 +0000\\n"
    "gpgsig -----BEGIN SSH SIGNATURE-----\\n U1NIU0lHAAAAAQ==\\n -----END SSH SIGNATURE-----\\n\\nsigned\\n' "
    "$tree $parent > /tmp/c.$$ && c=$(git hash-object -t commit -w /tmp/c.$$) && rm /tmp/c.$$ && "
    "git update-ref refs/heads/main $c"
)


def plant(case: str, ws: Path, outside: Path) -> str:
    """Plant `case` in the repository at ws; returns a plain-git command that runs the planted code."""
    mark = _touch(outside, case)
    if case == "filter-a=b":
        sh(
            f"git config 'filter.a=b.clean' '{mark}; cat' && git config 'filter.a=b.smudge' '{mark}; cat' && "
            "git config 'filter.a=b.required' true && printf '* filter=a=b\\n' > .gitattributes",
            ws,
        )
        return "echo more >> a.txt; git add -A"
    if case == "gpg-ssh-program":
        sh(
            f"{SIGNED_COMMIT} && printf '#!/bin/sh\\n{mark}\\n' > .evil && chmod +x .evil && "
            'git config gpg.ssh.program "$PWD/.evil" && git config log.showSignature true && '
            "echo 't@t ssh-ed25519 AAAA' > .signers && git config gpg.ssh.allowedSignersFile .signers",
            ws,
        )
        return "git log -n 10"
    if case == "fsmonitor-in-include":
        sh(
            (
                f"printf '[core]\\n\\tfsmonitor = \"{mark}; false\"\\n' > .git/evil.cfg && git config "
                "include.path evil.cfg"
            ),
            ws,
        )
        return "git status"
    if case == "includeIf":
        sh(
            f'printf \'[filter "inc"]\\n\\tclean = "{mark}; cat"\\n[core]\\n\\tpager = "{mark}; cat"\\n\' > .git/c.cfg'
            " && git config 'includeIf.gitdir:**.path' c.cfg && printf '* filter=inc\\n' > .gitattributes",
            ws,
        )
        return "echo more >> a.txt; git add -A"
    if case == "textconv":
        sh(
            f"git config diff.x.textconv '{mark}; cat' && git config diff.y.command '{mark}; true' && "
            "printf 'a.txt diff=x\\nb.txt diff=y\\n' > .gitattributes",
            ws,
        )
        return "git log -p -n 10 --ext-diff"
    if case == "hooks-path":
        hooks = ws / ".git" / "other-hooks"
        hooks.mkdir()
        for name in ("pre-commit", "post-commit", "post-index-change", "reference-transaction", "commit-msg"):
            (hooks / name).write_text(f"#!/bin/sh\n{mark}-{name}\n")
            (hooks / name).chmod(0o755)
        sh(f"git config core.hooksPath {hooks}", ws)
        return "git commit -qam hooked --allow-empty"
    if case == "gitfile-elsewhere":
        elsewhere = ws.parent / "elsewhere"
        sh(
            f"mv .git {elsewhere} && printf 'gitdir: {elsewhere}\\n' > .git && "
            f"git config core.fsmonitor '{mark}; false' && git config 'filter.z.clean' '{mark}; cat' && "
            "printf '* filter=z\\n' > .gitattributes",
            ws,
        )
        return "echo more >> a.txt; git status; git add -A"
    raise ValueError(case)


CASES = [
    "filter-a=b",
    "gpg-ssh-program",
    "fsmonitor-in-include",
    "includeIf",
    "textconv",
    "hooks-path",
    "gitfile-elsewhere",
]


def clover_host_git(ws: Path, store: Path) -> None:
    """Everything Clover does with git on the host after the agent's commands ran."""
    recorder = Checkpoints(str(ws), store=str(store))
    recorder.begin()
    (ws / "a.txt").write_text("agent edit\n")
    recorder.end("s", 1, "r", 1)
    recorder.undo()
    recorder.redo()
    before = gitdiff.worktree_tree(ws)
    (ws / "new.md").write_text("new\n")
    after = gitdiff.worktree_tree(ws)
    assert "+new" in gitdiff.diff_trees(ws, before, after)
    gitdiff.commit_paths(ws, gitdiff.changed_paths(ws, before, after), "fix commit")
    tool, env = GitTool(), LocalEnvironment(str(ws))
    for args in (
        {"subcommand": "status"},
        {"subcommand": "diff"},
        {"subcommand": "diff", "staged": True},
        {"subcommand": "log", "n": 3},
        {"subcommand": "log", "path": "a.txt"},
        {"subcommand": "show"},
        {"subcommand": "commit", "message": "tool commit"},
    ):
        result = tool.run(args, env)
        assert not result.is_error, (args, result.output)
    gitporcelain.status_short(ws)
    for args in (
        ["status"],
        ["diff"],
        ["add", "-A"],
        ["log", "-1", "-p"],
        ["show"],
        ["commit", "-qm", "evals commit", "--allow-empty"],
    ):
        run_git(args, str(ws))


@pytest.mark.parametrize("case", CASES)
def test_planted_config_never_runs_in_clovers_host_git(case: str, tmp_path: Path, outside: Path) -> None:
    ws = make_repo(tmp_path / "ws")
    trigger = plant(case, ws, outside)
    clover_host_git(ws, tmp_path / "store")
    assert sorted(os.listdir(outside)) == []
    subprocess.run(["bash", "-c", trigger], cwd=ws, capture_output=True)  # the control: plain git
    assert os.listdir(outside), f"the plant for {case} did nothing with the git program"


@pytest.mark.skipif(not bwrap_available(), reason=f"no usable bwrap: {unavailable_reason()}")
def test_a_filter_planted_from_inside_the_sandbox_does_not_run_in_fixs_diff(
    tmp_path: Path, outside: Path
) -> None:
    ws = make_repo(tmp_path / "ws")
    before = gitdiff.worktree_tree(ws)
    sandboxed = LocalEnvironment(str(ws), wrap_command=make_wrapper(str(ws)))
    planted = sandboxed.execute(
        f"git config 'filter.a=b.clean' '{_touch(outside, 'clean')}; cat' && "
        "printf '* filter=a=b\\n' > .gitattributes && echo more >> a.txt"
    )
    assert planted.returncode == 0, planted.output
    after = gitdiff.worktree_tree(ws)
    patch = gitdiff.diff_trees(ws, before, after)
    assert "+more" in patch and "+* filter=a=b" in patch
    assert sorted(os.listdir(outside)) == []
    subprocess.run(["git", "add", "-A"], cwd=ws, capture_output=True)
    assert os.listdir(outside) == ["clean"]  # the same repository, the git program: it runs


def test_the_git_program_path_overrides_every_spelling(tmp_path: Path) -> None:
    listing = "\0".join(
        [
            "filter.a=b.clean\nx",
            "filter.a=b.required\ntrue",
            "gpg.ssh.program\n./e",
            "diff.x.textconv\nc",
            "core.fsmonitor\nf",
            "credential.https://h.helper\nh",
            "core.sshcommand\ns",
            "remote.o.uploadpack\nu",
            "user.name\nkeep me",
            "core.editor\nvi",
            "merge.m.driver\nd",
            "interactive.difffilter\nf",
            "",
        ]
    )
    found = dict(config_overrides(listing))
    assert found.pop("filter.a=b.required") == "false" and found.pop("user.name", None) is None
    assert set(found) == {
        "filter.a=b.clean",
        "gpg.ssh.program",
        "diff.x.textconv",
        "core.fsmonitor",
        "credential.https://h.helper",
        "core.sshcommand",
        "remote.o.uploadpack",
        "core.editor",
        "merge.m.driver",
        "interactive.difffilter",
    }
    with pytest.raises(ValueError, match="cannot override"):  # refused on an argv, never run
        git_argv(["status"], [("filter.a=b.clean", "")])


def test_the_git_tool_in_a_container_refuses_what_it_cannot_switch_off(tmp_path: Path, outside: Path) -> None:
    class ContainerLike(RunBackedFiles, LocalEnvironment):
        """Files reached only through `run`, as in a container: the git program runs there."""

    ws = make_repo(tmp_path / "ws")
    env = ContainerLike(str(ws))
    assert env.host_root() is None
    assert GitTool().run({"subcommand": "status"}, env).output.startswith("## main")
    plant("filter-a=b", ws, outside)
    result = GitTool().run({"subcommand": "diff"}, env)
    assert result.is_error and "cannot override" in result.output
    assert sorted(os.listdir(outside)) == []


def test_libgit2_outputs_match_the_git_program(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws")
    sh(
        "git checkout -qb feature && echo two >> a.txt && git commit -qam 'second: more a' && "
        "echo staged > s.txt && git add s.txt && echo changed > b.txt && mkdir -p u/v && echo n > u/v/new.txt && "
        "rm -f nothing",
        ws,
    )
    git = lambda *a: subprocess.run(["git", *a], cwd=ws, capture_output=True, text=True).stdout  # noqa: E731
    assert gitporcelain.status_short(ws) == git("status", "--short", "--branch")
    assert gitporcelain.diff_text(ws) == git("diff", "--no-color")
    assert gitporcelain.diff_text(ws, staged=True) == git("diff", "--cached", "--no-color")
    assert gitporcelain.diff_text(ws, path=str(ws / "b.txt")) == git("diff", "--no-color", "--", "b.txt")
    assert gitporcelain.log_lines(ws, 5) == git("log", "-n5", "--date=short", "--format=%h %ad %an: %s")
    assert gitporcelain.log_lines(ws, 5, str(ws / "b.txt")) == git(
        "log", "-n5", "--date=short", "--format=%h %ad %an: %s", "--", "b.txt"
    )
    show = gitporcelain.show_text(ws, "HEAD")
    assert show.startswith(git("show", "-s", "--format=commit %H%nAuthor: %an <%ae>%nDate:   %ad%n%n    %s"))
    assert git("show", "--format=", "--patch", "HEAD") in show
    with pytest.raises(hostgit.HostGitError, match="unknown revision"):
        gitporcelain.show_text(ws, "no-such-rev")
    assert not hostgit.is_git_repo(ws / ".git") and not hostgit.is_git_repo(tmp_path)
    # fix's trees: the same tree the git program writes for the work tree (untracked, not ignored)
    (ws / ".gitignore").write_text("*.log\n")
    (ws / "x.log").write_text("ignored\n")
    index = tmp_path / "tmp-index"
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "read-tree", "HEAD"], cwd=ws, env=env, check=True)
    subprocess.run(["git", "add", "-A", "."], cwd=ws, env=env, check=True)
    tree = subprocess.run(
        ["git", "write-tree"], cwd=ws, env=env, capture_output=True, text=True
    ).stdout.strip()
    assert gitdiff.worktree_tree(ws) == tree


def test_the_read_only_git_log_in_plan_mode_runs_no_signer(tmp_path: Path, outside: Path) -> None:
    """The red team's row: gpg.ssh.program with log.showSignature=true ran on the model's `git log`
    in plan mode (gpg.program was overridden, gpg.ssh.program was not)."""
    from clover.backends.scripted import ScriptedModel
    from clover.runner import build_agent, build_environment
    from clover.settings import Settings

    ws = make_repo(tmp_path / "ws")
    trigger = plant("gpg-ssh-program", ws, outside)
    settings = Settings(mode="plan", sandbox=False, checkpoints=False)
    model = ScriptedModel(
        [
            {"tool_calls": [{"name": "git", "arguments": {"subcommand": "log"}}]},
            {"tool_calls": [{"name": "git", "arguments": {"subcommand": "show"}}]},
            {"text": "ok"},
        ]
    )
    agent = build_agent(settings, build_environment(settings, ws), kind="chat", model=model)
    assert agent.run("what changed?").exit_status == "submitted"
    tool_results = [m["content"] for m in agent.messages if m["role"] == "tool"]
    assert "t: signed" in tool_results[0] and "commit " in tool_results[1]  # ran, allowed in plan mode
    assert sorted(os.listdir(outside)) == []
    subprocess.run(["bash", "-c", trigger], cwd=ws, capture_output=True)
    assert os.listdir(outside) == ["gpg-ssh-program"]


def test_numstat_matches_the_git_program(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws")
    before = gitdiff.worktree_tree(ws)
    (ws / "a.txt").write_text("one\ntwo\nthree\n")
    (ws / "b.txt").unlink()
    (ws / "bin.dat").write_bytes(b"\x00\x01\x02")
    after = gitdiff.worktree_tree(ws)
    git = subprocess.run(
        ["git", "diff", "--numstat", "--no-renames", before, after], cwd=ws, capture_output=True, text=True
    ).stdout
    expected = [
        (p, None if a == "-" else int(a), None if r == "-" else int(r))
        for a, r, p in (line.split("\t") for line in git.splitlines())
    ]
    assert gitdiff.numstat(ws, before, after) == expected


def test_the_git_tools_commit_uses_the_identity_the_agents_commands_get(tmp_path: Path, monkeypatch) -> None:
    """The git tool commits in-process; its author must be the one the environment gives commands
    (as `git commit` run as a command would use), not whatever Clover's own process has."""
    repo = tmp_path / "r"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "a.txt").write_text("a\n")
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "clover-process")
    identity = {
        "GIT_AUTHOR_NAME": "Env Author",
        "GIT_AUTHOR_EMAIL": "author@env",
        "GIT_COMMITTER_NAME": "Env Committer",
        "GIT_COMMITTER_EMAIL": "committer@env",
    }
    env = LocalEnvironment(str(repo), env={"PATH": os.environ["PATH"], **identity})
    result = GitTool().run({"subcommand": "commit", "message": "m", "paths": ["a.txt"]}, env)
    assert not result.is_error, result.output
    who = subprocess.run(
        ["git", "log", "-1", "--format=%an <%ae> / %cn <%ce>"], cwd=repo, capture_output=True, text=True
    ).stdout.strip()
    assert who == "Env Author <author@env> / Env Committer <committer@env>"
