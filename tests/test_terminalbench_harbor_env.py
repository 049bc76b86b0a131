"""HarborEnvironment: clover's sync Environment over an async Harbor-style environment.

`DirEnvironment` below implements the part of Harbor's environment interface the bridge uses
(async exec / upload_file / download_file, with the same signatures) for real, on a temporary
directory, so the bridge is tested here on any Python; the Harbor test runs it against Harbor.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import threading
import time
from types import SimpleNamespace

import pytest

from clover.core.environment_protocol import ExecResult
from clover.evals.terminalbench.harbor_env import HarborEnvironment, SandboxGone, WrongThread, cut_output
from clover.tools.shell import BashTool


class DirEnvironment:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None):
        self.calls.append(command)
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=cwd,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_sec)
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds") from None
        return SimpleNamespace(stdout=out.decode(), stderr=err.decode(), return_code=proc.returncode)

    async def upload_file(self, source_path, target_path):
        shutil.copy(source_path, target_path)

    async def download_file(self, source_path, target_path):
        shutil.copy(source_path, target_path)


@pytest.fixture
def bridge(tmp_path):
    """A HarborEnvironment driven from a worker thread while an event loop runs in this one."""
    loop = asyncio.new_event_loop()
    harbor_env = DirEnvironment()
    env = HarborEnvironment(harbor_env, loop, root=str(tmp_path), timeout=20, output_limit=400)

    def run(fn):
        async def main():
            return await asyncio.to_thread(fn, env)

        return loop.run_until_complete(main())

    yield SimpleNamespace(env=env, run=run, harbor=harbor_env, loop=loop, root=tmp_path)

    async def drain():  # let cancelled commands and subprocess transports finish on this loop
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        await asyncio.gather(*others, return_exceptions=True)
        await asyncio.sleep(0.05)

    loop.run_until_complete(drain())
    loop.close()


def test_commands_keep_directory_and_exports_like_a_shell(bridge):
    def session(env):
        first = env.execute("mkdir -p sub && cd sub && export GREETING=hi && pwd")
        second = env.execute("pwd; echo $GREETING; echo oops >&2; exit 3")
        third = env.execute("pwd", cwd=str(bridge.root))  # cwd applies to this command only
        return first, second, third, env.execute("pwd")

    first, second, third, fourth = bridge.run(session)
    sub = str(bridge.root / "sub")
    assert (first.output.strip(), first.returncode) == (sub, 0)
    assert second.output.splitlines() == [sub, "hi", "oops"] and second.returncode == 3
    assert third.output.strip() == str(bridge.root) and fourth.output.strip() == sub


def test_files_go_through_upload_and_download(bridge):
    def files(env):
        env.write_file("deep/dir/a.txt", b"alpha\n")
        data = env.read_file(str(bridge.root / "deep" / "dir" / "a.txt"))
        errors = []
        for path in ("missing.txt", "deep"):
            try:
                env.read_file(path)
            except OSError as exc:
                errors.append(type(exc).__name__)
        return data, env.list("deep/dir"), env.list("."), errors

    data, listing, top, errors = bridge.run(files)
    assert data == b"alpha\n" and listing == ["a.txt"] and top == ["deep/"]
    assert errors == ["FileNotFoundError", "IsADirectoryError"]
    assert (bridge.root / "deep" / "dir" / "a.txt").read_bytes() == b"alpha\n"


def test_long_output_is_cut_and_timeouts_are_reported(bridge):
    def run(env):
        return env.execute("seq 1 5000"), env.execute("sleep 5", timeout=1)

    long, slow = bridge.run(run)
    assert long.truncated and long.output.startswith("1\n2\n") and long.output.rstrip().endswith("5000")
    assert "lines) cut" in long.output and len(long.output) < 600
    assert slow.timed_out and slow.returncode == -9 and "timed out" in slow.output


def test_the_bash_tool_runs_through_the_bridge(bridge):
    result = bridge.run(lambda env: BashTool().run({"command": "echo from-the-sandbox"}, env))
    assert not result.is_error and result.output.startswith("from-the-sandbox")


def test_calls_on_the_loop_thread_or_after_a_stop_fail_fast(bridge):
    async def on_loop():
        return bridge.env.execute("true")

    with pytest.raises(WrongThread, match="worker thread"):
        bridge.loop.run_until_complete(on_loop())
    stop = threading.Event()
    stop.set()
    stopped = HarborEnvironment(bridge.harbor, bridge.loop, root=str(bridge.root), stop=stop)
    with pytest.raises(SandboxGone):
        bridge.run(lambda env: stopped.execute("true"))


def test_cut_output():
    assert cut_output("short", 100) == ("short", False)
    text, cut = cut_output("x" * 1000, 300)
    assert cut and text.count("x") == 300 and "700 characters (0 lines) cut" in text
    lines = [f"line {i:03d}" for i in range(100)]
    text, cut = cut_output("\n".join(lines), 300)
    head, marker, tail = text.split("\n")[:-1], text.split("[... ")[1].split(" ...]")[0], text.split("]\n")[1]
    assert cut and text.startswith("line 000\n") and tail.startswith("line ") and tail.endswith("line 099")
    shown = [x for x in text.split("\n") if x.startswith("line ")]
    assert shown == lines[: len(shown) - len(tail.split("\n"))] + lines[-len(tail.split("\n")) :]
    assert marker.endswith(f"({100 - len(shown)} lines) cut") and head
    assert isinstance(ExecResult("a", 0), ExecResult)


def test_cancel_kills_the_command_in_flight(bridge):
    marker = bridge.root / "still-running"

    async def main():
        worker = asyncio.ensure_future(
            asyncio.to_thread(
                lambda: bridge.env.execute(f"sleep 0.1; touch {marker}.started; sleep 20; touch {marker}")
            )
        )
        while not (bridge.root / "still-running.started").exists():
            await asyncio.sleep(0.05)
        start = time.monotonic()
        bridge.env.cancel()  # what CloverAgent does when Harbor cancels its run
        with pytest.raises(SandboxGone):
            await worker
        return time.monotonic() - start

    assert bridge.loop.run_until_complete(main()) < 5
    time.sleep(0.3)
    assert not marker.exists()
    with pytest.raises(SandboxGone):
        bridge.run(lambda env: env.execute("true"))
