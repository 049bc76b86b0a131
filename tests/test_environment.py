"""LocalEnvironment: real bash subprocesses, process-group kills, output spilling, shell state."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from clover.core.environment_protocol import Environment
from clover.tools.environment import LocalEnvironment
from clover.tools.registry import default_tools


def _gone(pid: int) -> bool:
    """True when the process no longer runs (a zombie waiting for init counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def test_protocol_and_basic_run(tmp_path: Path) -> None:
    env = LocalEnvironment(str(tmp_path))
    assert isinstance(env, Environment)
    result = env.execute("echo out; echo err >&2; exit 3")
    assert result.returncode == 3
    assert result.output == "out\nerr\n"  # stdout and stderr interleaved in order
    assert not result.timed_out and not result.truncated


def test_stdin_is_closed_and_bad_utf8_is_replaced(tmp_path: Path) -> None:
    env = LocalEnvironment(str(tmp_path))
    result = env.execute("cat; printf 'a\\377b\\n'")  # cat would hang on an open stdin
    assert result.returncode == 0
    assert result.output == "a\ufffdb\n"


def test_cwd_and_exports_persist(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    env = LocalEnvironment(str(tmp_path))
    assert env.execute("cd sub && export GREETING='hi there' && FOO=local").returncode == 0
    result = env.execute('pwd; echo "$GREETING"; echo "[$FOO]"')
    assert result.output.splitlines() == [str((tmp_path / "sub").resolve()), "hi there", "[]"]
    env.execute("unset GREETING")
    assert env.execute('echo "[$GREETING]"').output == "[]\n"
    # An explicit cwd is for one command only.
    assert env.execute("pwd", cwd=".").output.strip() == str(tmp_path.resolve())
    assert env.execute("pwd").output.strip() == str((tmp_path / "sub").resolve())
    # The exit code is the command's own, also after an `exit` that skips the rest of the script.
    assert env.execute("cd ..; exit 7").returncode == 7
    assert env.execute("pwd").output.strip() == str(tmp_path.resolve())


def test_flood_is_cut_and_spilled(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    env = LocalEnvironment(str(tmp_path), output_limit=2000, spill_dir=str(spill))
    result = env.execute("seq 1 40000")  # ~229 KB
    assert result.truncated and result.returncode == 0
    assert len(result.output) < 2400
    assert result.output.startswith("1\n2\n3\n")
    assert result.output.rstrip().endswith("39999\n40000")
    assert "characters" in result.output and "cut" in result.output
    assert result.full_output_path and result.full_output_path in result.output
    full = Path(result.full_output_path).read_text()
    assert full == "".join(f"{i}\n" for i in range(1, 40001))
    assert Path(result.full_output_path).parent == spill

    # The spill directory is an allowed root: the model can page through it with the file tools.
    tools = {t.name: t for t in default_tools()}
    tail = tools["view"].run({"path": result.full_output_path, "view_range": [39999, -1]}, env)
    assert not tail.is_error and tail.output == " 39999\t39999\n 40000\t40000"
    assert (
        tools["grep"]
        .run({"pattern": "^31337$", "path": result.full_output_path}, env)
        .output.endswith(":31337:31337")
    )

    flood = env.execute("yes | head -c 200000")
    assert flood.truncated and len(Path(flood.full_output_path).read_text()) == 200000


def test_spilled_output_is_readable_not_writable(tmp_path: Path) -> None:
    env = LocalEnvironment(str(tmp_path), output_limit=1000)  # default spill dir, outside the workspace
    result = env.execute("seq 1 5000")
    assert result.truncated and not result.full_output_path.startswith(str(tmp_path))
    tools = {t.name: t for t in default_tools()}
    assert not tools["view"].run({"path": result.full_output_path, "view_range": [1, 2]}, env).is_error
    for name, args in (
        ("create", {"content": "x"}),
        ("str_replace", {"old_str": "1\n", "new_str": "2\n"}),
        ("insert", {"insert_line": 0, "text": "x"}),
    ):
        refused = tools[name].run({"path": result.full_output_path, **args}, env)
        assert refused.is_error and "outside the workspace" in refused.output, (name, refused.output)
    assert Path(result.full_output_path).read_text().startswith("1\n2\n")


def test_timeout_kills_grandchildren(tmp_path: Path) -> None:
    env = LocalEnvironment(str(tmp_path))
    start = time.monotonic()
    result = env.execute("bash -c 'sleep 1000 & echo $! > pidfile; wait'; echo never", timeout=5.0)
    assert time.monotonic() - start < 60  # not the 1000 s of sleep (a loaded machine starts commands slowly)
    assert result.timed_out and result.returncode < 0
    assert "timed out" in result.output and "never" not in result.output
    pid = int((tmp_path / "pidfile").read_text())
    deadline = time.monotonic() + 30
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


def test_background_job_does_not_block(tmp_path: Path) -> None:
    env = LocalEnvironment(str(tmp_path))
    start = time.monotonic()
    result = env.execute("sleep 60 & echo $! > bgpid; echo started")
    assert time.monotonic() - start < 45  # it did not wait for the background job
    assert result.output == "started\n" and result.returncode == 0
    with contextlib.suppress(ProcessLookupError):  # it went with the command's group
        os.kill(int((tmp_path / "bgpid").read_text()), signal.SIGKILL)


def test_keyboard_interrupt_kills_group(tmp_path: Path, ctrl_c: None) -> None:
    env = LocalEnvironment(str(tmp_path))
    pidfile = tmp_path / "pidfile"

    # Deliver SIGINT to ourselves once the grandchild is up; execute must kill it and re-raise.
    def interrupt() -> None:
        deadline = time.monotonic() + 60  # generous: a loaded machine starts the command slowly
        while not pidfile.exists() or not pidfile.read_text().strip():
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        env.execute("bash -c 'sleep 1000 & echo $! > pidfile; wait'", timeout=90)
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 30
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)


def test_wrap_command_and_files(tmp_path: Path) -> None:
    seen: list[list[str]] = []

    def wrap(argv: list[str]) -> list[str]:
        seen.append(argv)
        return ["env", "WRAPPED=1", *argv]

    env = LocalEnvironment(str(tmp_path), wrap_command=wrap)
    assert env.execute("echo $WRAPPED").output == "1\n"
    assert seen and seen[0][:2] == ["bash", "-c"]
    env.write_file("a/b/c.txt", b"x\r\ny")
    assert env.read_file(str(tmp_path / "a/b/c.txt")) == b"x\r\ny"
    assert env.list("a") == ["b/"]
    assert env.list(".") == ["a/"]


def test_bash_tool(tmp_path: Path) -> None:
    bash = next(t for t in default_tools() if t.name == "bash")
    env = LocalEnvironment(str(tmp_path))
    ok = bash.run({"command": "echo hello; false"}, env)
    assert not ok.is_error and "hello" in ok.output and "[exit code 1]" in ok.output
    slow = bash.run({"command": "sleep 5", "timeout": 1}, env)
    assert slow.is_error and "timed out" in slow.output
    assert bash.run({}, env).is_error
    assert bash.run({"command": "true", "timeout": "soon"}, env).is_error


def test_run_stat_and_list_files_are_the_declared_ones(tmp_path: Path) -> None:
    env = LocalEnvironment(str(tmp_path))
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.txt").write_text("abc")
    os.mkfifo(tmp_path / "pipe")
    assert env.stat("d").kind == "dir" and env.stat("d/f.txt").size == 3
    assert env.stat("pipe").kind == "other" and env.stat("missing") is None
    assert env.list_files(str(tmp_path)) == ["d/f.txt"]  # the FIFO is no file to list
    result = env.run(["sh", "-c", "echo out; echo err >&2; exit 4"], cwd="d")
    assert (result.returncode, result.stdout, result.stderr) == (4, b"out\n", "err\n")
    assert env.run(["no-such-program-here"]).returncode == 127
    start = time.monotonic()
    late = env.run(["sh", "-c", "(sleep 1; echo late > late.txt) >/dev/null 2>&1 & echo started"])
    assert late.stdout == b"started\n" and time.monotonic() - start < 1
    time.sleep(1.5)
    assert not (tmp_path / "late.txt").exists()  # its background job went with it
    timed = env.run(["sleep", "5"], timeout=0.3)
    assert timed.timed_out and timed.returncode == -9
