"""Clover's Environment protocol inside a TaskContainer: every command, file read and write goes
through the container (`nsenter`), so the agent sees exactly the task's file system at its real
paths (/app, /tmp, ...) and nothing of the host's.

Like LocalEnvironment, commands behave as one shell session: the working directory and exported
variables are saved after each command (in the container's /tmp) and restored before the next."""

from __future__ import annotations

import shlex
import time
import uuid

from clover.core.environment_protocol import ExecResult, RunResult
from clover.evals.terminalbench.container import TaskContainer
from clover.evals.terminalbench.persistent_shell import split_cwd, wrap_command
from clover.tools.listing import RunBackedFiles
from clover.tools.outputcut import cut_output

_ERR = "\n__CLOVER_STDERR__\n"


class ContainerEnvironment(RunBackedFiles):  # list_files and stat through `run`
    def __init__(
        self,
        container: TaskContainer,
        *,
        root: str,
        env: dict[str, str] | None = None,
        timeout: float = 120.0,
        output_limit: int = 16_000,
    ) -> None:
        self.container = container
        self.root = root.rstrip("/") or "/"
        self.allowed_roots = ["/"]  # the whole container is the agent's to change
        self.readable_roots: list[str] = []
        self.env = dict(env or {})
        self.timeout, self.output_limit = timeout, output_limit
        self.cwd = self.root
        self.state = f"/tmp/.clover-shell-{uuid.uuid4().hex[:12]}.env"

    def _abs(self, path: str) -> str:
        import posixpath

        return posixpath.normpath(path if path.startswith("/") else posixpath.join(self.root, path))

    def _sh(self, script: str, *, stdin: bytes | None = None, timeout: float = 60) -> tuple[int, bytes]:
        rc, out, _ = self.container.exec(script, cwd="/", env=self.env, timeout=timeout, stdin=stdin)
        return rc, out

    # ------------------------------------------------------------------ commands

    def execute(self, command: str, cwd: str | None = None, timeout: float | None = None) -> ExecResult:
        timeout = self.timeout if timeout is None else timeout
        workdir = self._abs(cwd) if cwd else self.cwd
        script = wrap_command(command, workdir, self.root, self.state)
        start = time.monotonic()
        rc, out, timed_out = self.container.exec(script, cwd="/", env=self.env, timeout=timeout)
        text = out.decode("utf-8", "replace")
        if timed_out:
            text, _ = cut_output(text, self.output_limit)
            return ExecResult(
                text + f"\n[command timed out after {timeout:g}s]",
                -9,
                timed_out=True,
                seconds=time.monotonic() - start,
            )
        text, new_cwd = split_cwd(text)
        if new_cwd and cwd is None:
            self.cwd = new_cwd
        text, truncated = cut_output(text, self.output_limit)
        return ExecResult(text, rc, truncated=truncated, seconds=time.monotonic() - start)

    def run(self, argv: list[str], cwd: str | None = None, timeout: float | None = None) -> RunResult:
        """One program, no shell state; stderr comes back after a marker and is split off."""
        err = f"/tmp/.clover-err-{uuid.uuid4().hex[:8]}"
        script = (
            f"command -v {shlex.quote(argv[0])} >/dev/null || exit 127\n"
            f"cd {shlex.quote(self._abs(cwd) if cwd else self.root)} || exit 1\n"
            f"{shlex.join(argv)} 2>{err}; __rc=$?; printf '{_ERR}'; cat {err}; rm -f {err}; exit $__rc"
        )
        rc, out, timed_out = self.container.exec(
            script, cwd="/", env=self.env, timeout=self.timeout if timeout is None else timeout
        )
        if rc == 127 and _ERR.encode() not in out:
            return RunResult(127, b"", f"{argv[0]}: command not found")
        stdout, _, stderr = out.rpartition(_ERR.encode()) if _ERR.encode() in out else (out, b"", b"")
        return RunResult(rc, stdout, stderr.decode("utf-8", "replace"), timed_out=timed_out)

    # ------------------------------------------------------------------ files

    def read_file(self, path: str) -> bytes:
        full = shlex.quote(self._abs(path))
        rc, out = self._sh(
            f"[ -L {full} ] && exit 3; [ -e {full} ] || exit 2; [ -d {full} ] && exit 4; "
            f"[ -f {full} ] || exit 5; exec cat -- {full}",
            timeout=120,
        )
        if rc == 0:
            return out
        raise _file_error(rc, self._abs(path))

    def write_file(self, path: str, data: bytes) -> None:
        full = self._abs(path)
        q, tmp = shlex.quote(full), shlex.quote(full + f".clover-{uuid.uuid4().hex[:6]}")
        rc, out = self._sh(
            f'[ -L {q} ] && exit 3; [ -d {q} ] && exit 4; mkdir -p -- "$(dirname -- {q})" && '
            f"cat > {tmp} && mv -f -- {tmp} {q}",
            stdin=data,
            timeout=120,
        )
        if rc != 0:
            raise _file_error(rc, full, out.decode("utf-8", "replace").strip())

    def list(self, path: str) -> list[str]:
        full = shlex.quote(self._abs(path))
        rc, out = self._sh(f"[ -e {full} ] || exit 2; [ -d {full} ] || exit 20; ls -1Ap -- {full}")
        if rc != 0:
            raise _file_error(rc, self._abs(path))
        return sorted(line for line in out.decode("utf-8", "replace").splitlines() if line)


def _file_error(rc: int, path: str, detail: str = "") -> OSError:
    if rc == 2:
        return FileNotFoundError(2, "No such file or directory", path)
    if rc == 4:
        return IsADirectoryError(21, "Is a directory", path)
    if rc == 20:
        return NotADirectoryError(20, "Not a directory", path)
    if rc == 3:
        return OSError(40, "Is a symbolic link (not followed)", path)
    return OSError(5, detail or "Not a regular file", path)
