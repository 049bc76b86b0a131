"""Escapes from the bubblewrap sandbox, each tried for real, each must fail.

Writes to the host through /proc/<pid>/root, background processes outliving the command, the
network, programs the tools run (rg, git) running outside the sandbox, and git configuration or
hooks planted from inside the sandbox that git on the host would run (the git tool, `clover fix`'s
final diff and commit, checkpoints). Tests that need bubblewrap skip with the reason without it;
the planted-config tests on the host-side helpers run everywhere.
"""

from __future__ import annotations

import http.server
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clover import gitdiff
from clover.runner import build_environment
from clover.settings import Settings
from clover.tools.environment import LocalEnvironment
from clover.tools.git_tools import GitTool
from clover.tools.safety.sandbox import _HOST_SOCKETS, bwrap_available, make_wrapper, unavailable_reason
from clover.tools.search import GlobTool, GrepTool
from clover.tools.undo.checkpoints import Checkpoints
from tests.clihelp import isolated_env, run_fix

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason=f"no usable bwrap: {unavailable_reason()}")


@pytest.fixture
def outside() -> Iterator[Path]:
    """Outside the workspace and outside /tmp (the sandbox's /tmp is private), writable on the host."""
    path = Path(
        tempfile.mkdtemp(prefix="clover-outside-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    )
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _repo(path: Path) -> Path:
    path.mkdir()
    (path / "a.txt").write_text("one\n")
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    return path


def _sandboxed(ws: Path, **kw) -> LocalEnvironment:
    return LocalEnvironment(str(ws), wrap_command=make_wrapper(str(ws), **kw))


@needs_bwrap
def test_no_write_to_the_host_through_proc_pid_root(tmp_path: Path, outside: Path) -> None:
    env = _sandboxed(tmp_path)
    script = (
        f"for p in /proc/[0-9]*; do echo pwned > $p/root{outside}/pwned 2>/dev/null; done; "
        "ls /proc | grep -c '^[0-9]'"
    )
    result = env.execute(script)
    assert not (outside / "pwned").exists()
    assert int(result.output.split()[-1]) < 10  # only the sandbox's own processes are visible


@needs_bwrap
def test_background_jobs_die_with_the_command_in_the_sandbox(tmp_path: Path) -> None:
    env = _sandboxed(tmp_path)
    env.execute(f"setsid sh -c 'sleep 1; echo late > {tmp_path}/late' >/dev/null 2>&1 &")
    time.sleep(2.5)
    assert not (tmp_path / "late").exists()


def test_background_jobs_die_with_the_command_without_a_sandbox(tmp_path: Path) -> None:
    env = LocalEnvironment(str(tmp_path))
    result = env.execute(f"(sleep 1; echo late > {tmp_path}/late) >/dev/null 2>&1 & echo started")
    assert result.output.strip() == "started" and result.seconds < 1
    time.sleep(2.5)
    assert not (tmp_path / "late").exists()


def _probe_network(env) -> str:
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    code = (
        f"import socket\ntry:\n socket.create_connection(('127.0.0.1', {port}), timeout=3).close(); "
        "print('connected')\nexcept OSError as e:\n print('blocked')\n"
    )
    try:
        return env.execute(f"{sys.executable} -c {shlex.quote(code)}").output.strip()
    finally:
        server.shutdown()
        server.server_close()


@needs_bwrap
def test_default_is_sandboxed_with_the_network_off(tmp_path: Path, outside: Path) -> None:
    env = build_environment(Settings(), tmp_path)
    assert _probe_network(env) == "blocked"
    env.execute(f"echo x > {outside}/escaped")
    assert not (outside / "escaped").exists()
    assert _probe_network(build_environment(Settings(network=True), tmp_path)) == "connected"
    off = build_environment(Settings(sandbox=False), tmp_path)
    off.execute(f"echo x > {outside}/unsandboxed")
    assert (outside / "unsandboxed").exists()  # sandbox = false really turns it off


@needs_bwrap
def test_host_service_sockets_are_hidden(tmp_path: Path) -> None:
    """A read-only mount still lets a process connect() to a socket: /run (Docker, D-Bus, ...)."""
    offline = _sandboxed(tmp_path).execute("ls -A /run")
    assert offline.returncode == 0 and offline.output.strip() == ""
    online = _sandboxed(tmp_path, network=True)
    for path in _HOST_SOCKETS:
        if os.path.isdir(path):
            assert online.execute(f"ls -A {path}").output.strip() == "", path
        elif os.path.exists(path):
            assert online.execute(f"test -S {path} || echo hidden").output.strip() == "hidden", path


def _spy_bin(outside: Path, name: str) -> Path:
    """A directory with a `name` program that leaves a mark outside, then runs the real one."""
    real = shutil.which(name) or "/bin/false"
    bindir = outside / "bin"
    bindir.mkdir(exist_ok=True)
    spy = bindir / name
    spy.write_text(f'#!/bin/sh\necho ran > {outside}/{name}-ran-on-host\nexec {real} "$@"\n')
    spy.chmod(0o755)
    return bindir


@needs_bwrap
@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (rg) is not installed")
def test_rg_and_git_run_inside_the_sandbox(tmp_path: Path, outside: Path) -> None:
    ws = _repo(tmp_path / "ws")
    _spy_bin(outside, "rg")
    bindir = _spy_bin(outside, "git")
    path = f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    env = LocalEnvironment(str(ws), env={"PATH": path}, wrap_command=make_wrapper(str(ws)))
    assert GrepTool().run({"pattern": "one"}, env).output == "a.txt:1:one"
    assert GlobTool().run({"pattern": "*.txt"}, env).output == "a.txt"
    assert "a.txt" not in GitTool().run({"subcommand": "status"}, env).output  # ran, clean
    assert sorted(os.listdir(outside)) == ["bin"]  # the spies ran, but only inside (read-only there)
    plain = LocalEnvironment(str(ws), env={"PATH": path})
    GrepTool().run({"pattern": "one"}, plain)
    assert (outside / "rg-ran-on-host").exists()  # the spy works: without the sandbox it marks


def _plant(outside: Path) -> str:
    """Shell that plants every git code-execution hook we know of; each would touch a mark."""
    mark = lambda name: f"touch {outside}/{name}"  # noqa: E731
    hook = "#!/bin/sh\n" + mark("hook-$(basename $0)") + "\n"
    lines = [
        f"git config core.fsmonitor '{mark('fsmonitor')}; false'",
        f"git config diff.external '{mark('diff-external')}; true'",
        f"git config core.pager '{mark('pager')}; cat'",
        f"git config diff.evil.textconv '{mark('textconv')}; cat'",
        f"git config diff.evil.command '{mark('diff-command')}; true'",
        f"git config filter.evil.clean '{mark('filter-clean')}; cat'",
        f"git config filter.evil.smudge '{mark('filter-smudge')}; cat'",
        f"git config filter.inc.clean '{mark('included-filter')}; cat'",
        "printf '[core]\\n\\tfsmonitor = \"" + mark("included-fsmonitor") + "; false\"\\n' > .git/evil.cfg",
        "git config include.path evil.cfg",
        "printf '* filter=evil diff=evil\\n*.md filter=inc\\n' > .gitattributes",
        "echo changed >> a.txt && echo new > b.md",
    ]
    for name in (
        "pre-commit",
        "post-commit",
        "commit-msg",
        "prepare-commit-msg",
        "post-index-change",
        "reference-transaction",
        "post-checkout",
    ):
        lines.append(f"printf '{hook}' > .git/hooks/{name} && chmod +x .git/hooks/{name}")
    return " && ".join(lines)


def _host_side_git(ws: Path, env) -> None:
    """Everything Clover runs git for on the host, after the agent's commands ran."""
    tool = GitTool()
    for args in (
        {"subcommand": "status"},
        {"subcommand": "diff"},
        {"subcommand": "log", "n": 2},
        {"subcommand": "show"},
        # this environment cannot tell what the agent wrote (no step boundary): the paths are named
        {"subcommand": "commit", "message": "agent commit", "paths": ["a.txt", "b.md", ".gitattributes"]},
    ):
        tool.run(args, env)
    before = gitdiff.worktree_tree(ws)
    (ws / "a.txt").write_text("host edit\n")
    after = gitdiff.worktree_tree(ws)
    assert "host edit" in gitdiff.diff_trees(ws, before, after)
    gitdiff.commit_paths(ws, gitdiff.changed_paths(ws, before, after), "fix commit")


def test_planted_git_config_and_hooks_never_run_host_side(tmp_path: Path, outside: Path, monkeypatch) -> None:
    # fix's --commit takes Clover's own identity; libgit2 finds ~/.gitconfig through the HOME it saw
    # first in this process, which an earlier test may have pointed elsewhere: give it one here
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(key, "t")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "t@t")
    ws = _repo(tmp_path / "ws")
    subprocess.run(["bash", "-c", _plant(outside)], cwd=ws, check=True)
    env = LocalEnvironment(
        str(ws),
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        },
    )
    _host_side_git(ws, env)
    from clover.evals.swebench.workspace import extract_patch  # the SWE-bench prediction, after the agent

    assert "host edit" in extract_patch(ws, "HEAD~2")
    store = Checkpoints(str(ws), store=str(tmp_path / "store"))
    store.begin()
    (ws / "a.txt").write_text("again\n")
    store.end("s", 1, "one", 1)
    store.undo()
    assert sorted(os.listdir(outside)) == []
    log = subprocess.run(
        ["git", "-c", "core.fsmonitor=false", "log", "--format=%s"], cwd=ws, capture_output=True, text=True
    ).stdout.split("\n")
    assert log[:2] == ["fix commit", "agent commit"]  # the commits happened, without their hooks


@pytest.mark.slow  # a whole `clover fix` process; the same git calls are tested directly above
@needs_bwrap
def test_clover_fix_never_runs_what_its_sandboxed_commands_planted(tmp_path: Path, outside: Path) -> None:
    ws = _repo(tmp_path / "ws")
    turns = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": _plant(outside)}}]},
        {"tool_calls": [{"name": "git", "arguments": {"subcommand": "diff"}}]},
        {"tool_calls": [{"name": "git", "arguments": {"subcommand": "commit", "message": "planted"}}]},
        {
            "tool_calls": [
                {"name": "str_replace", "arguments": {"path": "b.md", "old_str": "new", "new_str": "newer"}}
            ]
        },
        {"text": "Done."},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps(turns))
    (tmp_path / "issue.md").write_text("do it")
    env = {
        **isolated_env(tmp_path),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    proc = run_fix(
        tmp_path / "issue.md",
        ws,
        "--model",
        f"scripted:{script}",
        "--yes",
        "--commit",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "+newer" in proc.stdout  # fix's own diff ran (hardened) and shows the edit
    assert sorted(os.listdir(outside)) == []  # and nothing planted ran, inside or out


def test_hardened_git_drops_config_injected_through_the_environment(tmp_path: Path, outside: Path) -> None:
    from clover.tools.git.gitsafe import run_git

    ws = _repo(tmp_path / "ws")
    (ws / "a.txt").write_text("changed\n")
    injected = {
        **os.environ,
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": f"touch {outside}/env-fsmonitor; false",
        "GIT_CONFIG_PARAMETERS": f"'core.pager'='touch {outside}/env-pager; cat'",
        "GIT_EXTERNAL_DIFF": f"{outside}/nothing-here",
        "GIT_AUTHOR_NAME": "kept",
    }
    assert run_git(["status", "--short"], str(ws), env=injected).stdout == b" M a.txt\n"
    assert b"+changed" in run_git(["diff"], str(ws), env=injected).stdout
    assert sorted(os.listdir(outside)) == []
    clone = run_git(["clone", "-q", str(ws), str(tmp_path / "copy")], str(tmp_path))
    assert clone.returncode != 0 and b"not allowed" in clone.stderr  # no transport unless asked
    assert (
        run_git(["clone", "-q", str(ws), str(tmp_path / "copy")], str(tmp_path), remote=True).returncode == 0
    )
