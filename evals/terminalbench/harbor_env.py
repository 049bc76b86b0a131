"""Clover's Environment protocol over a Harbor environment (its async exec, upload and download).

The agent loop is synchronous and runs in a worker thread; every call here submits a coroutine to
Harbor's event loop with `asyncio.run_coroutine_threadsafe` and waits for it. Calling these
methods on the loop's own thread would deadlock, so that raises at once.

Like LocalEnvironment, commands behave like one shell session: the working directory and the
exported variables are saved after each command (to a file in the sandbox's /tmp) and restored
before the next. Harbor is duck-typed here (no import), so this module loads on any Python.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import os
import shlex
import tempfile
import threading
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from clover.core.environment_protocol import ExecResult, RunResult
from clover.evals.terminalbench.persistent_shell import split_cwd, wrap_command
from clover.tools.listing import RunBackedFiles
from clover.tools.outputcut import cut_output


class SandboxGone(RuntimeError):
    """The run was cancelled or Harbor's loop stopped; no more calls reach the sandbox."""


class WrongThread(RuntimeError):
    """A call made on Harbor's event loop thread, where waiting for the loop would deadlock."""


class HarborEnvironment(RunBackedFiles):
    """Tools reach the sandbox only through these methods (list_files and stat run programs in it)."""

    def __init__(
        self,
        harbor_env: Any,
        loop: asyncio.AbstractEventLoop,
        *,
        root: str,
        timeout: float = 120.0,
        output_limit: int = 16_000,
        stop: threading.Event | None = None,
    ) -> None:
        self.harbor_env, self.loop = harbor_env, loop
        self.root = root.rstrip("/") or "/"
        self.allowed_roots = ["/"]  # the whole sandbox is the agent's to change
        self.readable_roots: list[str] = []
        self.timeout, self.output_limit = timeout, output_limit
        self.stop = stop or threading.Event()
        self.cwd = self.root
        self.state = f"/tmp/.clover-shell-{uuid.uuid4().hex[:12]}.env"
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ bridge

    def _call(self, coro: Coroutine[Any, Any, Any], timeout: float | None) -> Any:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            coro.close()
            raise WrongThread("HarborEnvironment must be used from a worker thread, not Harbor's event loop")
        if self.stop.is_set() or self.loop.is_closed():
            coro.close()
            raise SandboxGone("the run was stopped")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        with self._lock:
            self._pending.add(future)
        try:
            return future.result(timeout)
        except concurrent.futures.CancelledError:
            raise SandboxGone("the run was stopped") from None
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer from the sandbox in {timeout:g}s") from None
        finally:
            with self._lock:
                self._pending.discard(future)

    def cancel(self) -> None:
        """Stop: refuse new calls and cancel those in flight (Harbor kills their processes).
        Safe to call from the event loop's thread."""
        self.stop.set()
        with self._lock:
            pending = list(self._pending)
        for future in pending:
            future.cancel()

    def _abs(self, path: str) -> str:
        return path if path.startswith("/") else os.path.normpath(os.path.join(self.root, path))

    # ------------------------------------------------------------------ commands

    def execute(self, command: str, cwd: str | None = None, timeout: float | None = None) -> ExecResult:
        timeout = self.timeout if timeout is None else timeout
        workdir = self._abs(cwd) if cwd else self.cwd
        start = time.monotonic()
        coro = self.harbor_env.exec(
            f"bash -c {shlex.quote(wrap_command(command, workdir, self.root, self.state))}",
            timeout_sec=max(1, math.ceil(timeout)),
        )
        try:
            result = self._call(coro, timeout + 60)
        except TimeoutError:
            return ExecResult(
                f"[command timed out after {timeout:g}s]",
                -9,
                timed_out=True,
                seconds=time.monotonic() - start,
            )
        except (SandboxGone, WrongThread):
            raise
        except Exception as exc:  # Harbor raises on its own timeouts and transport failures
            timed_out = "timeout" in type(exc).__name__.lower() or "timed out" in str(exc).lower()
            text = (
                f"[command timed out after {timeout:g}s]"
                if timed_out
                else f"[sandbox error: {type(exc).__name__}: {exc}]"
            )
            return ExecResult(
                text, -9 if timed_out else 1, timed_out=timed_out, seconds=time.monotonic() - start
            )
        output = (result.stdout or "") + (result.stderr or "")
        output, new_cwd = split_cwd(output)
        if new_cwd and cwd is None:
            self.cwd = new_cwd
        output, truncated = cut_output(output, self.output_limit)
        return ExecResult(
            output, int(result.return_code), truncated=truncated, seconds=time.monotonic() - start
        )

    def run(self, argv: list[str], cwd: str | None = None, timeout: float | None = None) -> RunResult:
        """One program in the sandbox, no session state; stdout kept apart from stderr."""
        timeout = self.timeout if timeout is None else timeout
        script = f"cd {shlex.quote(self._abs(cwd or self.root))} && exec {shlex.join(argv)}"
        try:
            result = self._call(
                self.harbor_env.exec(script, timeout_sec=max(1, math.ceil(timeout))), timeout + 60
            )
        except TimeoutError:
            return RunResult(-9, b"", f"timed out after {timeout:g}s", timed_out=True)
        stdout = (result.stdout or "").encode("utf-8", "surrogateescape")
        return RunResult(int(result.return_code), stdout, result.stderr or "")

    # ------------------------------------------------------------------ files

    def _kind(self, path: str) -> str:
        quoted = shlex.quote(path)
        probe = (
            f"if [ -d {quoted} ]; then echo D; elif [ -f {quoted} ]; then echo F; elif [ -e {quoted} "
            "]; then echo O; else echo N; fi"
        )
        result = self._call(self.harbor_env.exec(probe, timeout_sec=30), 90)
        return (result.stdout or "N").strip()[-1:] or "N"

    def read_file(self, path: str) -> bytes:
        full = self._abs(path)
        kind = self._kind(full)
        if kind == "N":
            raise FileNotFoundError(2, "No such file or directory", full)
        if kind == "D":
            raise IsADirectoryError(21, "Is a directory", full)
        if kind == "O":  # a FIFO or device: downloading it could block or never end
            raise OSError(22, "not a regular file; not opened", full)
        with tempfile.TemporaryDirectory(prefix="clover-harbor-") as tmp:
            local = os.path.join(tmp, "file")
            self._call(self.harbor_env.download_file(full, local), 600)
            with open(local, "rb") as fh:
                return fh.read()

    def write_file(self, path: str, data: bytes) -> None:
        full = self._abs(path)
        parent = os.path.dirname(full) or "/"
        made = self._call(self.harbor_env.exec(f"mkdir -p {shlex.quote(parent)}", timeout_sec=30), 90)
        if made.return_code != 0:
            raise OSError(f"cannot create {parent}: {(made.stdout or '') + (made.stderr or '')}".strip())
        with tempfile.TemporaryDirectory(prefix="clover-harbor-") as tmp:
            local = os.path.join(tmp, os.path.basename(full) or "file")
            with open(local, "wb") as fh:
                fh.write(data)
            self._call(self.harbor_env.upload_file(local, full), 600)

    def list(self, path: str) -> list[str]:
        full = self._abs(path)
        result = self._call(self.harbor_env.exec(f"ls -1Ap -- {shlex.quote(full)}", timeout_sec=30), 90)
        if result.return_code != 0:
            kind = self._kind(full)
            if kind == "N":
                raise FileNotFoundError(2, "No such file or directory", full)
            raise NotADirectoryError(20, "Not a directory", full)
        return sorted(line for line in (result.stdout or "").splitlines() if line)
