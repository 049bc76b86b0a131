"""A Harbor environment without Docker: the local runner's container, for `harbor run`.

`harbor run ... -e clover.evals.terminalbench.harbor_sandbox:BwrapEnvironment` runs a task in the
same TaskContainer and with the same Dockerfile build as `clover eval terminalbench` (launch.py,
container.py, build.py): the root of its FROM image under a throwaway overlay, the task's paths as
they are, every Dockerfile step in order inside it (package installs included), nothing written on
the host outside the trial's state folder and the image cache. Background processes live on
between commands, as in Docker. Network follows the task's policy (public, or none); either way
the container has its own loopback. Needs Harbor (Python >= 3.12), root, bwrap, unshare and
nsenter, mmdebstrap (roots) and slirp4netns (outside access).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult, SandboxBuildFailedError
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.task.config import NetworkMode, NetworkPolicy

from clover.evals.terminalbench.container import ContainerError, TaskContainer, container_problem
from clover.evals.terminalbench.launch import CannotHost, Launch, LaunchError, before_phase
from clover.evals.terminalbench.tasks import parse_dockerfile

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
        self._network = self._network_policy.network_mode != NetworkMode.NO_NETWORK
        self._box: TaskContainer | None = None
        self._workdir = "/"
        self._env: dict[str, str] = {}

    async def _apply_network_policy(self, network_policy: NetworkPolicy) -> None:
        return  # fixed when the container starts (dynamic_network_policy=False)

    # ------------------------------------------------------------------ lifecycle

    async def start(self, force_build: bool) -> None:
        problem = container_problem()
        if problem:
            raise SandboxBuildFailedError(problem)
        spec = parse_dockerfile((self.environment_dir / "Dockerfile").read_text(encoding="utf-8"))
        if spec.unsupported:
            raise SandboxBuildFailedError("; ".join(dict.fromkeys(spec.unsupported)))
        self._workdir = self.task_env_config.workdir or spec.workdir
        task_dir = self.environment_dir.parent
        try:
            # bwrap dies with the thread that started it (--die-with-parent), and a pool thread may be
            # retired while the trial goes on: the container starts on the loop's own thread.
            self._box, self._env = Launch().start(
                spec,
                self.environment_dir,
                state=self._state / "box",
                log=self._state / "build.log",
                network=self._network,
                timeout=float(self.task_env_config.build_timeout_sec),
                workdir=self._workdir,
                hide=(task_dir,),
                uv_folders=(task_dir / "tests", task_dir / "solution"),
            )
        except (CannotHost, LaunchError) as exc:
            raise SandboxBuildFailedError(str(exc)) from None
        for path in _LOG_DIRS:
            await self.exec(f"mkdir -p {shlex.quote(path)}")
        await asyncio.to_thread(before_phase, self._box, task_dir / "tests", task_dir / "solution")
        await self.ensure_dirs(self._mount_targets(writable_only=True))

    async def stop(self, delete: bool) -> None:
        if self._box is not None:
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
        if self._box is None:
            raise ContainerError("the sandbox has not started")
        argv = self._box.argv(command, cwd or self._workdir, variables)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
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
        return ExecResult(
            stdout=stdout.decode(errors="replace"),
            stderr=stderr.decode(errors="replace"),
            return_code=proc.returncode if proc.returncode is not None else -1,
        )

    # ------------------------------------------------------------------ files (tar streams, container.py)

    def _started(self) -> TaskContainer:
        if self._box is None:
            raise ContainerError("the sandbox has not started")
        return self._box

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        await asyncio.to_thread(self._started().put, Path(source_path), target_path)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        await asyncio.to_thread(self._started().put, Path(source_dir), target_dir)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        data = await asyncio.to_thread(self._started().read, source_path)
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        Path(target_path).write_bytes(data)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        Path(target_dir).mkdir(parents=True, exist_ok=True)
        if self._box is None and source_dir.rstrip("/") in ("/logs", *_LOG_DIRS):
            return  # the build failed before the container existed: its log folders are empty
        await asyncio.to_thread(self._started().fetch, source_dir, Path(target_dir))
