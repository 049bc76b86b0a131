"""The file system: each attack driven through the real tools, and it must fail.

Symlink swaps racing the tools, hard links to outside files, symlinks read by grep's and
outline's fallbacks, FIFOs. (Sandbox escapes and planted git config: tests/test_safety_sandbox.py.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import clover.tools.search as search
from clover.tools.environment import LocalEnvironment
from clover.tools.files import CreateTool, InsertTool, StrReplaceTool, ViewTool
from clover.tools.outline import OutlineTool
from clover.tools.search import GrepTool


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside the workspace (and outside /tmp, which a sandbox would hide)."""
    path = Path(
        tempfile.mkdtemp(prefix="clover-outside-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None)
    )
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


# Swaps a directory and a symlink to the outside under one name, as fast as it can, in its own
# process (a thread would only run between the tool's bytecodes, under the GIL).
# It stops by itself when the test's process goes away or after two minutes, whatever happens.
FLIP = """import os, shutil, sys, time
d, spare, target, parent = *sys.argv[1:4], os.getppid()
end = time.monotonic() + 120
print("ready", flush=True)
while os.getppid() == parent and time.monotonic() < end:
    try:
        os.rename(d, spare)
        os.symlink(target, d)
        os.unlink(d)
        os.rename(spare, d)
    except OSError:  # the tool made a new `d` while it was missing: drop that one, race on
        try:
            if os.path.isdir(d) and not os.path.islink(d) and os.path.isdir(spare):
                shutil.rmtree(d, ignore_errors=True)
            if os.path.islink(d):
                os.unlink(d)
            if not os.path.exists(d) and os.path.isdir(spare):
                os.rename(spare, d)
        except OSError:
            pass
"""


@pytest.mark.parametrize("attempts", [300, pytest.param(2000, marks=pytest.mark.slow)])
def test_symlink_swap_race_never_writes_or_reads_outside(ws: Path, outside: Path, attempts: int) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "seen.txt").write_text("inside\n")
    (outside / "seen.txt").write_text("SECRET outside\n")
    env = LocalEnvironment(str(ws))
    flipper = subprocess.Popen(
        [sys.executable, "-c", FLIP, str(ws / "d"), str(ws / "d.real"), str(outside)],
        stdout=subprocess.PIPE,
        text=True,
    )
    created = failed = leaked = 0
    try:
        assert flipper.stdout is not None and flipper.stdout.readline() == "ready\n"  # racing from here on
        # On a loaded machine the flipper may get little CPU: go on until the race has hit the tool.
        i = 0
        while i < attempts or (failed == 0 and i < 10 * attempts):
            result = CreateTool().run({"path": f"d/f{i}.txt", "file_text": "x\n"}, env)
            created += not result.is_error
            failed += result.is_error
            leaked += "SECRET" in ViewTool().run({"path": "d/seen.txt"}, env).output
            i += 1
    finally:
        flipper.kill()
        flipper.wait()
    assert [p.name for p in outside.iterdir()] == ["seen.txt"]  # nothing landed outside
    assert (outside / "seen.txt").read_text() == "SECRET outside\n"
    assert leaked == 0
    assert created > 0 and failed > 0  # the race really ran, and the tool still works between swaps


def test_write_through_a_symlink_swapped_in_as_the_file_replaces_the_link(ws: Path, outside: Path) -> None:
    from clover.tools import safeio

    (outside / "target").write_text("outside\n")
    os.symlink(outside / "target", ws / "f.txt")  # appeared after resolution, before the write
    safeio.write_bytes(str(ws / "f.txt"), b"new\n", [str(ws)])
    assert (outside / "target").read_text() == "outside\n"
    assert not (ws / "f.txt").is_symlink() and (ws / "f.txt").read_text() == "new\n"
    os.symlink(outside / "target", ws / "g.txt")
    with pytest.raises(OSError, match="symbolic link"):
        safeio.read_bytes(str(ws / "g.txt"), [str(ws)])


@pytest.mark.parametrize(
    "tool,args",
    [
        (StrReplaceTool(), {"path": "linked.txt", "old_str": "original", "new_str": "EDITED"}),
        (InsertTool(), {"path": "linked.txt", "insert_line": 0, "text": "EDITED"}),
        (CreateTool(), {"path": "linked.txt", "file_text": "EDITED\n"}),
    ],
)
def test_hard_link_to_an_outside_file_is_broken_not_written_through(
    ws: Path, outside: Path, tool, args
) -> None:
    victim = outside / "victim.txt"
    victim.write_text("original\n")
    victim.chmod(0o640)
    os.link(victim, ws / "linked.txt")
    result = tool.run(args, LocalEnvironment(str(ws)))
    assert not result.is_error, result.output
    assert victim.read_text() == "original\n"  # the outside file is untouched
    assert "EDITED" in (ws / "linked.txt").read_text()
    assert os.stat(ws / "linked.txt").st_nlink == 1 and os.stat(victim).st_nlink == 1
    assert (ws / "linked.txt").stat().st_mode & 0o777 == 0o640  # the mode carried over


def test_edit_keeps_mode_bits(ws: Path) -> None:
    (ws / "run.sh").write_text("echo old\n")
    (ws / "run.sh").chmod(0o751)
    StrReplaceTool().run({"path": "run.sh", "old_str": "old", "new_str": "new"}, LocalEnvironment(str(ws)))
    assert (ws / "run.sh").read_text() == "echo new\n" and (ws / "run.sh").stat().st_mode & 0o777 == 0o751


@pytest.fixture(params=["git", "plain"])
def leaky_repo(request: pytest.FixtureRequest, ws: Path, outside: Path) -> Path:
    """A repository shipping symlinks to an outside file (which holds a secret and a function)."""
    (outside / "secret.py").write_text("TOKEN = 'SECRETX'\n\ndef stolen_function():\n    return 1\n")
    (ws / "ok.py").write_text("def visible():\n    return 'SECRET-free'\n")
    os.symlink(outside / "secret.py", ws / "leak.py")
    os.symlink(outside, ws / "leakdir")
    if request.param == "git":
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True)
    return ws


@pytest.mark.parametrize("backends", [("python",), ("git", "python"), search.BACKENDS])
def test_grep_fallbacks_do_not_follow_symlinks_out(leaky_repo: Path, monkeypatch, backends) -> None:
    monkeypatch.setattr(search, "BACKENDS", backends)
    env = LocalEnvironment(str(leaky_repo))
    for pattern in ("SECRET(?=X)", "SECRETX", "stolen"):  # a lookahead: rg refuses it
        out = GrepTool().run({"pattern": pattern}, env).output
        assert out.startswith("no matches"), out  # the only hits are in the outside file


def test_outline_does_not_follow_symlinks_out(leaky_repo: Path) -> None:
    env = LocalEnvironment(str(leaky_repo))
    out = OutlineTool().run({"symbol": "stolen_function"}, env).output
    assert out.startswith("no definition"), out
    assert "stolen" not in OutlineTool().run({"path": "leak.py"}, env).output.replace("leak.py", "")
    assert "visible" in OutlineTool().run({"symbol": "visible"}, env).output


def _finishes(fn, seconds: float = 10.0):
    box: list = []
    worker = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert box, f"still blocked after {seconds}s"
    return box[0]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_fails_fast_with_one_line(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    (ws / "a.txt").write_text("needle\n")
    env = LocalEnvironment(str(ws))
    result = _finishes(lambda: ViewTool().run({"path": "pipe"}, env))
    assert result.is_error and "FIFO" in result.output and "\n" not in result.output
    edit = _finishes(lambda: StrReplaceTool().run({"path": "pipe", "old_str": "a", "new_str": "b"}, env))
    assert edit.is_error and "FIFO" in edit.output
    made = _finishes(lambda: CreateTool().run({"path": "pipe", "file_text": "x"}, env))
    assert made.is_error and (ws / "pipe").is_fifo()
    for backend in ("python", "rg"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(search, "BACKENDS", (backend, "python"))
            assert "a.txt:1:needle" in _finishes(lambda: GrepTool().run({"pattern": "needle"}, env)).output
