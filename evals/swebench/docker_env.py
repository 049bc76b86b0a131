"""An Environment inside a running container of the official SWE-bench instance image
(`--env docker`): every command goes through `docker exec`, the repository is /testbed."""

from __future__ import annotations

import posixpath
import shlex
import subprocess
import time

from clover.core.environment_protocol import ExecResult, RunResult
from clover.evals.swebench.workspace import WorkspaceError, docker_run_command
from clover.tools.listing import RunBackedFiles
from clover.tools.outputcut import cut_output


class DockerEnvironment(RunBackedFiles):
    def __init__(
        self,
        instance_id: str,
        container: str,
        *,
        timeout: float = 120.0,
        output_limit: int = 16_000,
        image: str | None = None,
    ) -> None:
        self.root = "/testbed"
        self.allowed_roots: list[str] = []
        self.readable_roots: list[str] = []
        self.container, self.timeout, self.output_limit = container, timeout, output_limit
        proc = subprocess.run(
            docker_run_command(instance_id, container, image), capture_output=True, text=True
        )
        if proc.returncode != 0:
            last = (proc.stderr or proc.stdout).strip().splitlines()
            raise WorkspaceError(
                f"docker run for {instance_id} failed: {last[-1] if last else proc.returncode}"
            )

    def _exec(
        self, args: list[str], stdin: bytes | None = None, timeout: float | None = None
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["docker", "exec", "-i", "-w", self.root, self.container, *args],
            input=stdin,
            capture_output=True,
            timeout=timeout,
        )

    def _abs(self, path: str) -> str:
        return path if posixpath.isabs(path) else posixpath.join(self.root, path)

    def execute(self, command: str, cwd: str | None = None, timeout: float | None = None) -> ExecResult:
        start = time.monotonic()
        limit = timeout or self.timeout
        script = f"cd {shlex.quote(self._abs(cwd or self.root))} && {command}"
        try:
            proc = subprocess.run(
                [
                    "docker",
                    "exec",
                    self.container,
                    "timeout",
                    str(int(limit)),
                    "bash",
                    "-lc",
                    script + " 2>&1",
                ],
                capture_output=True,
                timeout=limit + 30,
            )
        except subprocess.TimeoutExpired:
            return ExecResult(
                output=f"command timed out after {limit:.0f} s",
                returncode=124,
                timed_out=True,
                seconds=time.monotonic() - start,
            )
        out = proc.stdout.decode("utf-8", "replace")
        out, truncated = cut_output(out, self.output_limit)
        return ExecResult(
            output=out,
            returncode=proc.returncode,
            timed_out=proc.returncode == 124,
            truncated=truncated,
            seconds=time.monotonic() - start,
        )

    def run(self, argv: list[str], cwd: str | None = None, timeout: float | None = None) -> RunResult:
        """One program in the container (`docker exec` of the argv itself: no shell)."""
        limit = timeout or self.timeout
        try:
            proc = subprocess.run(
                ["docker", "exec", "-w", self._abs(cwd or self.root), self.container, *argv],
                capture_output=True,
                timeout=limit + 30,
            )
        except subprocess.TimeoutExpired:
            return RunResult(-9, b"", f"timed out after {limit:g}s", timed_out=True)
        # docker exec says 126/127 itself when the program cannot start, as a shell would
        return RunResult(proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace"))

    def read_file(self, path: str) -> bytes:
        kind = self.stat(path)
        if kind is not None and kind.kind == "other":  # a FIFO would block `cat` forever
            raise OSError(22, "not a regular file; not opened", path)
        proc = self._exec(["cat", self._abs(path)])
        if proc.returncode != 0:
            raise FileNotFoundError(path)
        return proc.stdout

    def write_file(self, path: str, data: bytes) -> None:
        target = self._abs(path)
        script = f"mkdir -p {shlex.quote(posixpath.dirname(target))} && cat > {shlex.quote(target)}"
        proc = self._exec(["sh", "-c", script], stdin=data)
        if proc.returncode != 0:
            raise OSError(proc.stderr.decode("utf-8", "replace").strip() or f"cannot write {path}")

    def list(self, path: str) -> list[str]:
        proc = self._exec(["ls", "-1A", self._abs(path)])
        if proc.returncode != 0:
            raise FileNotFoundError(path)
        return proc.stdout.decode("utf-8", "replace").splitlines()

    def diff(self, exclude: list[str]) -> str:
        # HEAD, not base_commit: the image commits its install step on top of base_commit.
        specs = " ".join(shlex.quote(f":(exclude,literal){p}") for p in exclude)
        cmd = f"git add -A && git -c core.fileMode=false diff --cached HEAD -- . {specs}; git reset -q"
        return self._exec(["bash", "-c", cmd]).stdout.decode("utf-8", "replace")

    def close(self) -> None:
        subprocess.run(["docker", "rm", "-f", self.container], capture_output=True)
