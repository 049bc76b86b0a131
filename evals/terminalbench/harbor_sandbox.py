"""A Harbor environment without Docker: each command runs in a bubblewrap (bwrap) sandbox.

`harbor run ... -e clover.evals.terminalbench.harbor_sandbox:BwrapEnvironment` runs shell-only tasks on
this machine. The sandbox sees the host's /usr, /bin, /lib*, /etc and /opt read-only, fresh /proc
and /dev, and its own writable top-level directories (the WORKDIR's, /tmp, /root, /logs, /tests,
/solution and any that COPY or an upload creates), kept in a host directory for the trial's
length. The Dockerfile is read, not built: FROM is ignored (the host's system stands in for the
image), WORKDIR, ENV and COPY are applied, RUN steps run inside the sandbox; anything that installs
software or needs another image fails the build with the reason. Network follows the task's
policy (public, or none with --unshare-net). Needs Harbor (Python >= 3.12) and bwrap on PATH.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult, SandboxBuildFailedError
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.models.task.config import NetworkMode, NetworkPolicy

from clover.evals.terminalbench.tasks import parse_dockerfile

_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
_BASE_DIRS = ("tmp", "root", "logs", "tests", "solution")
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class BwrapEnvironment(BaseEnvironment):
    @staticmethod
    def type() -> str:
        return "bwrap"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True, dynamic_network_policy=True)

    def _validate_definition(self) -> None:
        if not (self.environment_dir / "Dockerfile").is_file():
            raise FileNotFoundError(f"{self.environment_dir / 'Dockerfile'} not found")
        if shutil.which("bwrap") is None:
            raise SandboxBuildFailedError("bwrap (bubblewrap) is not on PATH: apt-get install bubblewrap")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fsroot = Path(tempfile.mkdtemp(prefix=f"harbor-bwrap-{self.session_id}-"))
        self._workdir = "/"
        self._docker_env: dict[str, str] = {}

    async def _apply_network_policy(self, network_policy: NetworkPolicy) -> None:
        return  # every command starts a new sandbox; exec reads self._network_policy

    # ------------------------------------------------------------------ paths

    def _host(self, path: str, *, writing: bool) -> Path:
        """The host path behind a sandbox path."""
        pure = PurePosixPath(os.path.normpath("/" + str(path).lstrip("/")))
        if len(pure.parts) < 2:
            raise PermissionError(f"{path}: the sandbox root is not writable")
        top = "/" + pure.parts[1]
        if top in _SYSTEM:
            if writing:
                raise PermissionError(f"{path}: {top} is read-only in the sandbox")
            return Path(str(pure))
        return self._fsroot.joinpath(*pure.parts[1:])

    def _argv(self, command: str, cwd: str) -> list[str]:
        argv = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc"]
        if self._network_policy.network_mode == NetworkMode.NO_NETWORK:
            argv.append("--unshare-net")
        for path in _SYSTEM:
            if os.path.islink(path):
                argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                argv += ["--ro-bind", path, path]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        for entry in sorted(self._fsroot.iterdir()):
            if entry.is_dir():
                argv += ["--bind", str(entry), "/" + entry.name]
        if not self._host(cwd, writing=False).is_dir():
            cwd = "/"
        return [*argv, "--chdir", cwd, "bash", "-c", command]

    # ------------------------------------------------------------------ lifecycle

    async def start(self, force_build: bool) -> None:
        for name in _BASE_DIRS:
            (self._fsroot / name).mkdir(exist_ok=True)
        spec = parse_dockerfile((self.environment_dir / "Dockerfile").read_text(encoding="utf-8"))
        if spec.unsupported:
            raise SandboxBuildFailedError("; ".join(dict.fromkeys(spec.unsupported)))
        self._workdir = self.task_env_config.workdir or spec.workdir
        self._docker_env = dict(spec.env)
        self._host(self._workdir, writing=True).mkdir(parents=True, exist_ok=True)
        # Harbor's output directories (/logs/agent, /logs/verifier, /logs/artifacts) exist from the start.
        await self.ensure_dirs(self._mount_targets(writable_only=True))
        for kind, arg in spec.steps:
            if kind == "copy":
                src_name, dest = arg.split("\0")
                src = (self.environment_dir / src_name).resolve()
                if not src.exists() or self.environment_dir.resolve() not in (src, *src.parents):
                    raise SandboxBuildFailedError(f"COPY source {src_name} is not in the build context")
                target = dest if dest.startswith("/") else f"{self._workdir}/{dest}"
                if src.is_dir():
                    await self.upload_dir(src, target)
                else:
                    if target.endswith("/") or self._host(target, writing=True).is_dir():
                        target = f"{target.rstrip('/')}/{src.name}"
                    await self.upload_file(src, target)
            else:
                result = await self.exec(arg, timeout_sec=int(self.task_env_config.build_timeout_sec))
                if result.return_code != 0:
                    raise SandboxBuildFailedError(f"RUN {arg[:80]} exited with {result.return_code}: {result.stdout}")

    async def stop(self, delete: bool) -> None:
        if delete:
            shutil.rmtree(self._fsroot, ignore_errors=True)

    # ------------------------------------------------------------------ exec

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        # `user` is ignored: the sandbox runs as the calling user (the container's root stands in).
        variables = {"PATH": _PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "xterm", **self._docker_env}
        variables.update(self._merge_env(env) or {})
        proc = await asyncio.create_subprocess_exec(
            *self._argv(command, cwd or self._workdir), env=variables, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
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

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = self._host(target_path, writing=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source_path, target)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        shutil.copytree(source_dir, self._host(target_dir, writing=True), dirs_exist_ok=True, symlinks=True)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        source = self._host(source_path, writing=False)
        if not source.is_file():
            raise FileNotFoundError(f"{source_path}: no such file in the sandbox")
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        source = self._host(source_dir, writing=False)
        if not source.is_dir():
            raise FileNotFoundError(f"{source_dir}: no such directory in the sandbox")
        shutil.copytree(source, target_dir, dirs_exist_ok=True, symlinks=True)
