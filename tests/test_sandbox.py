"""tools/safety/sandbox.py: workspace writable, the rest read-only, network off on request (needs bwrap)."""

from __future__ import annotations

import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from clover.tools.safety.sandbox import (
    Sandbox,
    SandboxUnavailable,
    bwrap_available,
    make_wrapper,
    unavailable_reason,
)

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason=f"no usable bwrap: {unavailable_reason()}")


def run(argv: list[str], cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd)


def test_unavailable_is_a_clear_error_not_a_crash():
    if bwrap_available():
        assert unavailable_reason() is None
    else:
        with pytest.raises(SandboxUnavailable, match="bwrap"):
            Sandbox("/tmp")


@pytest.fixture
def outside_dir():
    # outside /tmp (the sandbox gets a private /tmp), visible read-only inside the sandbox
    path = Path(
        tempfile.mkdtemp(prefix="clover-sandbox-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    )
    (path / "readme.txt").write_text("visible\n")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@needs_bwrap
def test_workspace_writable_rest_read_only(tmp_path, outside_dir):
    ws = tmp_path / "ws"  # under /tmp: must stay visible despite the private /tmp
    ws.mkdir()
    wrap = make_wrapper(str(ws))
    script = (
        f"echo inside > {ws}/made.txt && echo tmp > /tmp/scratch-clover && cat /tmp/scratch-clover && "
        f"cat {outside_dir}/readme.txt; echo outside > {outside_dir}/no.txt"
    )
    proc = run(wrap(["bash", "-c", script]), cwd=ws)
    assert (ws / "made.txt").read_text() == "inside\n"
    assert proc.stdout.split() == ["tmp", "visible"]
    assert not (outside_dir / "no.txt").exists()
    assert "Read-only file system" in proc.stderr
    assert not Path("/tmp/scratch-clover").exists()  # the private /tmp leaves the host's alone
    (ws / "sub").mkdir()
    proc = run(wrap(["bash", "-c", "pwd"]), cwd=ws / "sub")
    assert proc.stdout.strip() == str(ws / "sub")


@needs_bwrap
def test_extra_writable_dirs(tmp_path):
    ws, extra = tmp_path / "ws", tmp_path / "extra"
    ws.mkdir()
    extra.mkdir()
    wrap = Sandbox(str(ws), writable=[str(extra)]).wrap_command
    run(wrap(["bash", "-c", f"echo ok > {extra}/f"]))
    assert (extra / "f").read_text() == "ok\n"


@needs_bwrap
def test_network_off_by_default_on_when_allowed(tmp_path):
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    probe = (
        "import socket\n"
        f"try:\n socket.create_connection(('127.0.0.1', {port}), timeout=3).close(); print('connected')\n"
        "except OSError as e:\n print('blocked', e)\n"
    )
    try:
        online = run(Sandbox(str(tmp_path), network=True).wrap_command([sys.executable, "-c", probe]))
        offline = run(Sandbox(str(tmp_path)).wrap_command([sys.executable, "-c", probe]))  # the default
    finally:
        server.shutdown()
        server.server_close()
    assert online.stdout.startswith("connected"), online.stderr
    assert offline.stdout.startswith("blocked"), offline.stderr


@needs_bwrap
def test_local_environment_hook_keeps_cwd_and_env(tmp_path):
    from clover.tools.environment import LocalEnvironment

    (tmp_path / "sub").mkdir()
    env = LocalEnvironment(str(tmp_path), wrap_command=make_wrapper(str(tmp_path), network=False))
    first = env.execute("echo hi > f; cd sub; export CLOVER_X=1; touch /etc/clover-nope")
    assert "Read-only file system" in first.output
    second = env.execute("pwd; echo $CLOVER_X; cat ../f")
    assert second.output.split() == [str(tmp_path / "sub"), "1", "hi"]


@needs_bwrap
def test_programs_under_tmp_stay_runnable_and_read_only(tmp_path):
    """A private /tmp must not hide the program (a venv or checkout under /tmp, as in CI)."""
    workspace, tools = tmp_path / "ws", tmp_path / "bin"
    workspace.mkdir()
    tools.mkdir()
    program = tools / "hello.sh"
    program.write_text(
        '#!/bin/sh\necho hello from tmp\ntouch "$(dirname "$0")/written" 2>/dev/null || echo ro\n'
    )
    program.chmod(0o755)
    proc = run(Sandbox(str(workspace)).wrap_command([str(program)]))
    assert proc.stdout.split() == ["hello", "from", "tmp", "ro"], proc.stderr
    assert not (tools / "written").exists()


@needs_bwrap
def test_a_test_run_that_writes_hundreds_of_temp_files_is_reported_in_one_line(tmp_path):
    """pytest's numbered temp folders under the private /tmp, a few dotfiles in the home: how many,
    where, and that they are kept for the session; not a list of hundreds of paths."""
    from clover.tools.environment import LocalEnvironment

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "test_many.py").write_text(
        "import pytest\n\n\n@pytest.mark.parametrize('n', range(40))\n"
        "def test_writes(tmp_path, n):\n    for i in range(5):\n        (tmp_path / f'f{i}').write_text('x')\n"
    )
    sandbox = Sandbox(str(ws))
    env = LocalEnvironment(str(ws), wrap_command=sandbox)
    try:
        result = env.execute(
            f"{sys.executable} -m pytest -q -p no:cacheprovider test_many.py; echo a > ~/.one; echo b > ~/.two; "
            "mkdir -p ~/.cache/tool && echo c > ~/.cache/tool/state"
        )
        note = next(line for line in result.output.splitlines() if line.startswith("[sandbox:"))
        assert "40 passed" in result.output
        assert re.fullmatch(
            r"\[sandbox: \d{3} files written under the sandbox's private /tmp \(pytest-of-[^/]+/\.\.\.\), "
            r"3 in its home \(\.cache/\.\.\., \.one and 1 more\); kept for this session's later commands, "
            r"deleted when Clover exits\]",
            note,
        ), note
        assert result.output.count("[sandbox:") == 1 and len(note) < 250
    finally:
        sandbox.close()
