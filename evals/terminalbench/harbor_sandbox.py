"""A Harbor environment without Docker: the local runner's container, for `harbor run`.

`harbor run ... -e clover.evals.terminalbench.harbor_sandbox:BwrapEnvironment` runs a task in the
same TaskContainer and with the same Dockerfile build as `clover eval terminalbench` (container.py,
build.py): the host's system under a throwaway overlay, the task's paths as they are, every
Dockerfile step in order inside it (package installs included), nothing written on the host
outside the trial's state folder. Background processes live on between commands, as in Docker.
Network follows the task's policy (public, or none). Needs Harbor (Python >= 3.12), root, and
bwrap, unshare and nsenter on PATH.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult, SandboxBuildFailedError
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.task.config import NetworkMode, NetworkPolicy

from clover.evals.terminalbench.build import BuildError, build_image, copy_in
from clover.evals.terminalbench.container import SYSTEM_DIRS, ContainerError, TaskContainer, container_problem
from clover.evals.terminalbench.tasks import parse_dockerfile
from clover.evals.terminalbench.toolchain import PYTHON_DIR, install_uv, network_env, python_binds, uses_uv

# Harbor's output folders: they exist from the start, even when the build fails, so that Harbor
# can collect them either way (no second traceback on a failed start).
_LOG_DIRS = ("/logs/agent", "/logs/verifier", "/logs/artifacts")


class BwrapEnvironment(BaseEnvironment):
    @staticmethod
    def type() -> str:
        return "bwrap"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True, dynamic_network_policy=False)

    def _validate_definition(self) -> None:
        if not (self.environment_dir / "Dockerfile").is_file():
            raise FileNotFoundError(f"{self.environment_dir / 'Dockerfile'} not found")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._state = Path(tempfile.mkdtemp(prefix=f"harbor-bwrap-{self.session_id}-"))
        network = self._network_policy.network_mode != NetworkMode.NO_NETWORK
        self._binds = python_binds(self._state)
        self._box = TaskContainer(self._state, network=network, hide=(self.environment_dir.parent,),
                                  binds=self._binds)
        self._workdir = "/"
        self._env: dict[str, str] = {}

    async def _apply_network_policy(self, network_policy: NetworkPolicy) -> None:
        return  # fixed when the container starts (dynamic_network_policy=False)

    # ------------------------------------------------------------------ lifecycle

    async def start(self, force_build: bool) -> None:
        for path in _LOG_DIRS:
            self._box.host_path(path).mkdir(parents=True, exist_ok=True)
        problem = container_problem()
        if problem:
            raise SandboxBuildFailedError(problem)
        spec = parse_dockerfile((self.environment_dir / "Dockerfile").read_text(encoding="utf-8"))
        if spec.unsupported:
            raise SandboxBuildFailedError("; ".join(dict.fromkeys(spec.unsupported)))
        self._workdir = self.task_env_config.workdir or spec.workdir
        try:
            # On the loop's own thread (about 0.2 s): bwrap dies with the thread that started it
            # (--die-with-parent), and a pool thread may be retired while the trial goes on.
            self._box.start()
            task_dir = self.environment_dir.parent
            if await asyncio.to_thread(uses_uv, task_dir / "tests", self.environment_dir, task_dir / "solution"):
                await asyncio.to_thread(install_uv, self._box.root)
            self._env = await asyncio.to_thread(
                build_image, self._box, spec, self.environment_dir, log=self._state / "build.log",
                timeout=float(self.task_env_config.build_timeout_sec), workdir=self._workdir,
                extra_path=f"{PYTHON_DIR}/bin" if self._binds else "", base_env=network_env())
        except (BuildError, ContainerError) as exc:
            raise SandboxBuildFailedError(str(exc)) from None
        await self.ensure_dirs(self._mount_targets(writable_only=True))

    async def stop(self, delete: bool) -> None:
        await asyncio.to_thread(self._box.stop)
        if delete:
            shutil.rmtree(self._state, ignore_errors=True)

    # ------------------------------------------------------------------ exec

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        # `user` is ignored: commands run as the container's root, as Docker's default user.
        variables = {"LANG": "C.UTF-8", "TERM": "xterm", **self._env, **(self._merge_env(env) or {})}
        argv = self._box.argv(command, cwd or self._workdir, variables)
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True,
        )
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=timeout_sec)
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds") from None
        return ExecResult(stdout=stdout.decode(errors="replace"), stderr=stderr.decode(errors="replace"),
                          return_code=proc.returncode if proc.returncode is not None else -1)

    # ------------------------------------------------------------------ files

    @staticmethod
    def _in_system(path: str) -> bool:
        parts = PurePosixPath(os.path.normpath("/" + str(path).lstrip("/"))).parts
        return len(parts) > 1 and parts[1] in SYSTEM_DIRS

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        await self._upload(Path(source_path), target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        await self._upload(Path(source_dir), target_dir)

    async def _upload(self, source: Path, target: str) -> None:
        if self._in_system(target):  # inside the overlay: copied from within the container
            await asyncio.to_thread(copy_in, self._box, source.parent, source.name, target, self._state / "copy.log")
        else:
            await asyncio.to_thread(self._box.put, source, target)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        data = await self._read(source_path)
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        Path(target_path).write_bytes(data)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        if self._in_system(source_dir):
            raise FileNotFoundError(f"{source_dir}: downloading a system folder is not supported")
        source = self._box.host_path(source_dir)
        if not source.is_dir():
            raise FileNotFoundError(f"{source_dir}: no such directory in the sandbox")
        shutil.copytree(source, target_dir, dirs_exist_ok=True, symlinks=True)

    async def _read(self, path: str) -> bytes:
        if not self._in_system(path):
            host = self._box.host_path(path)
            if not host.is_file():
                raise FileNotFoundError(f"{path}: no such file in the sandbox")
            return host.read_bytes()
        rc, out, _ = await asyncio.to_thread(self._box.exec, f"cat -- {shlex.quote(path)}", timeout=300)
        if rc != 0:
            raise FileNotFoundError(f"{path}: no such file in the sandbox")
        return out
