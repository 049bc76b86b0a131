"""A task's container without Docker: the host's system under a throwaway overlay, in its own
mount and PID namespaces, entered once per command (as `docker exec` does).

Layout of the state directory (all of the task's writes land here, nothing on the host):
  root/            the container's `/`: the task's /app, /tmp, /root, /logs, ... as plain folders
  upper/<d>, work/<d>   the overlay layers over the host's /usr, /etc, /var, /opt (and /lib* where
                   they are real folders), so `apt-get install` and `pip install` work and vanish

The host's other top-level folders (/home, /root, /tmp, /work, /run with its sockets, ...) are
not there: the container starts with empty ones, as an image would. `start` runs bwrap as the
container's init (pid 1 of a new PID namespace) inside a private mount namespace where the
overlays are mounted; `exec` enters it with nsenter, so background processes started by one
command live on for the next, until `stop`. Needs root (mounting overlays; Docker needs it too),
bwrap, unshare and nsenter (util-linux); `container_problem()` says why a machine cannot.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

# Host folders shown (overlaid) in the container; a symlink among them (merged /usr) is copied.
SYSTEM_DIRS = ("usr", "etc", "var", "opt", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
# Empty folders every image has.
BASE_DIRS = {"tmp": 0o1777, "root": 0o700, "home": 0o755, "run": 0o755, "mnt": 0o755, "srv": 0o755}
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class ContainerError(RuntimeError):
    """The container could not start or is gone; one line for the user."""


_PROBE_LOCK = threading.Lock()


def container_problem() -> str | None:
    """None when containers can run here, else why not (checked once: it does not change)."""
    with _PROBE_LOCK:
        return _probe()


@functools.lru_cache(maxsize=1)
def _probe() -> str | None:
    for tool in ("bwrap", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install bubblewrap util-linux)"
    if os.geteuid() != 0:
        return "the local Terminal-Bench container needs root (it mounts an overlay of the host's system)"
    with tempfile.TemporaryDirectory(prefix="clover-probe-") as tmp:
        try:
            box = TaskContainer(Path(tmp) / "box", network=False)
            box.start(timeout=30)
        except ContainerError as exc:
            return f"cannot start a container here: {exc}"
        try:
            rc, out, _ = box.exec("touch /usr/.clover-probe && echo ok", timeout=30)
        finally:
            box.stop()
        if rc != 0 or b"ok" not in out:
            return f"the container's overlay is not writable: {out.decode(errors='replace').strip()[:200]}"
    return None


class TaskContainer:
    def __init__(self, state_dir: Path, *, network: bool = True, hide: tuple[Path, ...] = (),
                 binds: list[tuple[Path, str]] | None = None) -> None:
        self.state = Path(state_dir).absolute()
        self.root = self.state / "root"
        self.network = network
        # Host folders the container must not show even where they sit inside an overlaid system
        # folder (a checkout under /opt): the task's own directory with its tests and solution,
        # the run's output. Elsewhere (/work, /home, /tmp, ...) they are absent anyway.
        self.hide = [p.resolve() for p in (*hide, self.state)]
        self.binds = list(binds or [])  # (host folder, container path), read-only (toolchain.py)
        self.pid: int | None = None  # the container's init, as the host sees it
        self._proc: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ lifecycle

    def _layout(self, in_memory: bool) -> tuple[list[str], list[str]]:
        """Create the folders; return the mount commands and bwrap's symlink arguments. With
        `in_memory` the overlay layers live on a tmpfs of the container's mount namespace (for
        hosts whose own file system cannot hold an overlay's upper layer, e.g. inside Docker)."""
        layers = self.state / "layers"
        mounts, links = [], []
        if in_memory:
            layers.mkdir(parents=True, exist_ok=True)
            mounts.append(f"mount -t tmpfs tmpfs {shlex.quote(str(layers))}")
        for name, mode in BASE_DIRS.items():
            (self.root / name).mkdir(parents=True, exist_ok=True)
            os.chmod(self.root / name, mode)
        for name in SYSTEM_DIRS:
            host = Path("/") / name
            if host.is_symlink():
                links += ["--symlink", os.readlink(host), f"/{name}"]
            elif host.is_dir():
                upper, work = layers / "upper" / name, layers / "work" / name
                (self.root / name).mkdir(parents=True, exist_ok=True)
                if in_memory:
                    mounts.append(f"mkdir -p {shlex.quote(str(upper))} {shlex.quote(str(work))}")
                else:
                    upper.mkdir(parents=True, exist_ok=True)
                    work.mkdir(parents=True, exist_ok=True)
                options = f"lowerdir={host},upperdir={upper},workdir={work}"
                mounts.append(f"mount -t overlay overlay -o {shlex.quote(options)} {shlex.quote(str(self.root / name))}")
        return mounts, links

    def start(self, timeout: float = 60) -> None:
        try:
            self._start(timeout, in_memory=False)
        except ContainerError as disk_error:
            try:  # the overlay's upper layer cannot live on this file system: keep it in memory
                self._start(timeout, in_memory=True)
            except ContainerError:
                raise disk_error from None

    def _start(self, timeout: float, in_memory: bool) -> None:
        mounts, links = self._layout(in_memory)
        bwrap = ["bwrap", "--bind", str(self.root), "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
                 "--unshare-ipc", "--unshare-uts", "--hostname", "task", "--die-with-parent", *links,
                 *(["--unshare-net"] if not self.network else [])]
        log = (self.state / "container.log").open("wb")
        read_fd, write_fd = os.pipe()
        ready_read, ready_write = os.pipe()  # the init says "ready" from inside: the mounts are done
        bwrap[1:1] = ["--info-fd", str(write_fd)]
        for host, inside in self.binds:
            bwrap += ["--ro-bind", str(host), inside]
        for path in self.hide:
            parts = path.parts
            if len(parts) > 1 and parts[1] in SYSTEM_DIRS and path.is_dir():
                bwrap += ["--tmpfs", str(path)]
        bwrap += ["--", "bash", "-c", f"echo ready >&{ready_write}; exec {ready_write}>&-; exec sleep infinity"]
        script = "set -e\n" + "\n".join(mounts) + "\nexec " + shlex.join(bwrap) + "\n"
        try:
            self._proc = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "container"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                pass_fds=(write_fd, ready_write),
            )
        finally:
            os.close(write_fd)
            os.close(ready_write)
            log.close()
        try:
            info = _read_info(read_fd, timeout)
            ready = _read_ready(ready_read, timeout)
        finally:
            os.close(read_fd)
            os.close(ready_read)
        if info is None or "child-pid" not in info or not ready:
            self.stop()
            lines = (self.state / "container.log").read_text(errors="replace").strip().splitlines()
            raise ContainerError(lines[-1] if lines else "the container did not start")
        self.pid = int(info["child-pid"])

    def stop(self) -> None:
        """Kill every process in the container (its init first: the PID namespace goes with it)."""
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.pid = None
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=10)
            self._proc = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.state, ignore_errors=True)

    # ------------------------------------------------------------------ commands

    def argv(self, command: str, cwd: str = "/", env: dict[str, str] | None = None) -> list[str]:
        """The host command line that runs `command` with bash in the container, in `cwd`."""
        if self.pid is None:
            raise ContainerError("the container is not running")
        variables = {"PATH": DEFAULT_PATH, "HOME": "/root", "HOSTNAME": "task", **(env or {})}
        script = f"cd {shlex.quote(cwd)} || exit 1\n{command}"
        return ["nsenter", "-t", str(self.pid), "-m", "-p", "-u", "-i", "-n", "-r", "--", "/usr/bin/env", "-i",
                *(f"{k}={v}" for k, v in variables.items()), "bash", "-c", script]

    def exec(self, command: str, *, cwd: str = "/", env: dict[str, str] | None = None, timeout: float = 600,
             stdin: bytes | None = None, log: Path | None = None) -> tuple[int, bytes, bool]:
        """Run `command`; returns (exit status, output, timed out). Output also goes to `log`."""
        proc = subprocess.Popen(self.argv(command, cwd, env), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        try:
            out, _ = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("ab") as fh:
                fh.write(out)
        return (-9 if timed_out else proc.returncode), out, timed_out

    # ------------------------------------------------------------------ files (host side)

    def host_path(self, path: str) -> Path:
        """Where a container path outside the overlaid system folders lives on the host."""
        pure = os.path.normpath("/" + path.lstrip("/"))
        top = pure.split("/")[1] if pure != "/" else ""
        if top in SYSTEM_DIRS:
            raise ContainerError(f"{path}: inside an overlaid system folder; use exec")
        return self.root / pure.lstrip("/")

    def put(self, source: Path, dest: str) -> None:
        """Copy a host file or folder to `dest` in the container (as `docker cp`)."""
        target = self.host_path(dest)
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True, symlinks=True)
        else:
            shutil.copy2(source, target)


def _read_ready(fd: int, timeout: float) -> bool:
    ready, _, _ = select.select([fd], [], [], timeout)
    return bool(ready) and os.read(fd, 16).startswith(b"ready")


def _read_info(fd: int, timeout: float) -> dict | None:
    """bwrap's --info-fd JSON (it holds the init's pid), or None at EOF or timeout."""
    data, deadline = b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        with contextlib.suppress(json.JSONDecodeError):
            return json.loads(data)
    return None
