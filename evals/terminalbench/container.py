"""A task's container without Docker: the image's root under a throwaway overlay, in its own
mount, PID, IPC, UTS and network namespaces, entered once per command (as `docker exec` does).

The root is a RootImage (images.py: a cached root built from the distribution's archive; or the
"host" image, this machine's own /usr, /etc, /var, ... over an empty skeleton, for machines that
cannot build roots). Everything the task writes lands in the state directory:
  upper/, work/        the overlay's layers (the image's files stay untouched)
  etc/                 the /etc/hosts, /etc/hostname and /etc/resolv.conf mounted in, as Docker does
  network.log, dns.log slirp4netns's output and every name the task looked up

`start` runs bwrap as the container's init (pid 1 of a new PID namespace) inside a private mount
namespace where the overlays are mounted (they vanish with it); `exec` enters it with nsenter, so
background processes live on between commands, until `stop`. Files go in and out as tar streams
through the container's own tar, so a path is always the container's (its symlinks resolve inside
it, never on the host). The network namespace has its own loopback; outside access and names come
from netns.py. Needs root, bwrap, unshare and nsenter; `container_problem()` says why a machine
cannot.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
import time
from pathlib import Path

from clover.evals.terminalbench.container_argv import exec_argv, init_argv
from clover.evals.terminalbench.host_image import host_image
from clover.evals.terminalbench.images import RootImage
from clover.evals.terminalbench.netns import (
    DNS_ADDRESS,
    GUEST_ADDRESS,
    DnsForwarder,
    Slirp,
    nameservers,
    outside_access_problem,
)


class ContainerError(RuntimeError):
    """The container could not start or is gone; one line for the user."""


_PROBE_LOCK = threading.Lock()


def container_problem() -> str | None:
    """None when containers can run here, else why not (checked once: it does not change)."""
    with _PROBE_LOCK:
        return _probe()


@functools.lru_cache(maxsize=1)
def _probe() -> str | None:
    for tool in ("bwrap", "unshare", "nsenter", "tar"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install bubblewrap util-linux tar)"
    if os.geteuid() != 0:
        return "the local Terminal-Bench container needs root (it mounts overlays, as Docker does)"
    with tempfile.TemporaryDirectory(prefix="clover-probe-") as tmp:
        try:
            box = TaskContainer(Path(tmp) / "box", host_image(Path(tmp) / "skeleton"), network=False)
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
    def __init__(
        self,
        state_dir: Path,
        image: RootImage,
        *,
        network: bool = True,
        hide: tuple[Path, ...] = (),
        binds: list[tuple[Path, str]] | None = None,
        writable: list[tuple[Path, str]] | None = None,
        resolvers: list[str] | None = None,
    ) -> None:
        self.state = Path(state_dir).absolute()
        self.image = image
        self.network = network
        # Host folders the host image must not show even inside an overlaid system folder (a checkout
        # under /opt): the task's own directory with its tests and solution, the run's output.
        self.hide = [p.resolve() for p in (*hide, self.state)]
        self.binds = list(binds or [])  # (host folder, container path), read-only
        self.writable = list(writable or [])  # (host folder, container path): Harbor's /logs/* mounts
        self.resolvers = resolvers  # "address[:port]" the DNS forwarder asks (default: this machine's)
        self.hostname = secrets.token_hex(6)  # as Docker names a container: 12 hex digits
        self.pid: int | None = None  # the container's init, as the host sees it
        self._proc: subprocess.Popen[bytes] | None = None
        self._slirp: Slirp | None = None
        self.dns: DnsForwarder | None = None
        self.network_note = ""  # why the task had no outside access though it asked for it

    # ------------------------------------------------------------------ lifecycle

    def _mounts(self, in_memory: bool) -> list[str]:
        """The mount commands run before bwrap, in the container's private mount namespace. With
        `in_memory` the overlay layers live on a tmpfs there (for state folders on a file system that
        cannot hold an overlay's upper layer, e.g. inside Docker)."""
        layers = self.state / "layers"
        root = self.state / "root"
        root.mkdir(parents=True, exist_ok=True)
        mounts = []
        if in_memory:
            layers.mkdir(parents=True, exist_ok=True)
            mounts.append(f"mount -t tmpfs tmpfs {shlex.quote(str(layers))}")
        for lower, where in ((self.image.rootfs, ""), *((Path("/") / d, d) for d in self.image.host_dirs)):
            name = where or "root"
            upper, work = layers / "upper" / name, layers / "work" / name
            if in_memory:
                mounts.append(f"mkdir -p {shlex.quote(str(upper))} {shlex.quote(str(work))}")
            else:
                upper.mkdir(parents=True, exist_ok=True)
                work.mkdir(parents=True, exist_ok=True)
            options = f"lowerdir={lower},upperdir={upper},workdir={work}"
            mounts.append(
                f"mount -t overlay overlay -o {shlex.quote(options)} {shlex.quote(str(root / where))}"
            )
        return mounts

    def _etc_files(self) -> list[str]:
        """Docker's per-container /etc/hosts, /etc/hostname and /etc/resolv.conf, as bwrap arguments."""
        etc = self.state / "etc"
        etc.mkdir(parents=True, exist_ok=True)
        address = GUEST_ADDRESS if self.network else "127.0.1.1"
        (etc / "hosts").write_text(
            "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
            "fe00::0\tip6-localnet\nff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\n"
            f"ff02::2\tip6-allrouters\n{address}\t{self.hostname}\n"
        )
        (etc / "hostname").write_text(self.hostname + "\n")
        (etc / "resolv.conf").write_text(f"nameserver {DNS_ADDRESS}\noptions ndots:0\n")
        return [
            arg
            for name in ("hosts", "hostname", "resolv.conf")
            for arg in ("--bind", str(etc / name), f"/etc/{name}")
        ]

    def start(self, timeout: float = 60) -> None:
        try:
            self._start(timeout, in_memory=False)
        except ContainerError as disk_error:
            try:  # the overlay's upper layer cannot live on this file system: keep it in memory
                self._start(timeout, in_memory=True)
            except ContainerError:
                raise disk_error from None
        try:
            self._start_network()
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float, in_memory: bool) -> None:
        mounts = self._mounts(in_memory)
        etc_binds = self._etc_files()
        log = (self.state / "container.log").open("wb")
        read_fd, write_fd = os.pipe()
        ready_read, ready_write = os.pipe()  # the init says "ready" from inside: the mounts are done
        hidden = [
            path
            for path in self.hide
            if len(path.parts) > 1 and path.parts[1] in self.image.host_dirs and path.is_dir()
        ]
        bwrap = init_argv(
            self.state / "root",
            self.hostname,
            etc_binds,
            info_fd=write_fd,
            ready_fd=ready_write,
            binds=self.binds,
            writable=self.writable,
            hidden=hidden,
        )
        script = "set -e\n" + "\n".join(mounts) + "\nexec " + shlex.join(bwrap) + "\n"
        try:
            self._proc = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "container"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
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

    def _start_network(self) -> None:
        if not self.network or self.pid is None:
            return
        problem = outside_access_problem()
        upstream: list[str] | None = None
        if problem is None:
            try:
                self._slirp = Slirp(self.pid, log=self.state / "network.log")
                upstream = self.resolvers if self.resolvers is not None else nameservers()
            except OSError as exc:
                problem = str(exc)
        self.network_note = problem or ""
        self.dns = DnsForwarder(self.pid, upstream=upstream, log=self.state / "dns.log")

    def stop(self) -> None:
        """Kill every process in the container (its init first: the PID namespace goes with it)."""
        if self.dns is not None:
            self.dns.close()
            self.dns = None
        if self._slirp is not None:
            self._slirp.close()
            self._slirp = None
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

    def unreachable_hosts(self) -> list[str]:
        """Public names the task looked up that this machine could not resolve (or, without outside
        access, every public name it looked up)."""
        return self.dns.failed_names() if self.dns is not None else []

    # ------------------------------------------------------------------ commands

    def argv(self, command: str, cwd: str = "/", env: dict[str, str] | None = None) -> list[str]:
        """The host command line that runs `command` with bash in the container, in `cwd`."""
        if self.pid is None:
            raise ContainerError("the container is not running")
        return exec_argv(self.pid, self.hostname, command, cwd, env)

    def exec(
        self,
        command: str,
        *,
        cwd: str = "/",
        env: dict[str, str] | None = None,
        timeout: float = 600,
        stdin: bytes | None = None,
        log: Path | None = None,
    ) -> tuple[int, bytes, bool]:
        """Run `command`; returns (exit status, output, timed out). Output also goes to `log`."""
        proc = subprocess.Popen(
            self.argv(command, cwd, env),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
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

    # ------------------------------------------------------------------ files (tar streams)

    def put(self, source: Path, dest: str) -> None:
        """Copy a host file or folder to `dest` in the container (as `docker cp`: a folder's
        contents into `dest`, a file as `dest`), owned by root, modes kept."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            name = os.path.basename(dest.rstrip("/")) or "."
            if source.is_dir():
                tar.add(source, arcname=".", filter=_as_root)
            else:
                tar.add(source, arcname=name, filter=_as_root)
        folder = (dest.rstrip("/") or "/") if source.is_dir() else (os.path.dirname(dest.rstrip("/")) or "/")
        self._untar(buffer.getvalue(), folder)

    def put_bytes(self, data: bytes, dest: str, mode: int = 0o644) -> None:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            info = tarfile.TarInfo(os.path.basename(dest))
            info.size, info.mode, info.mtime = len(data), mode, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        self._untar(buffer.getvalue(), os.path.dirname(dest) or "/")

    def _untar(self, archive: bytes, folder: str) -> None:
        q = shlex.quote(folder)
        rc, out, _ = self.exec(
            f"mkdir -p {q} && tar -x --no-same-owner -C {q} -f -", stdin=archive, timeout=600
        )
        if rc != 0:
            raise ContainerError(f"copying into {folder}: {out.decode(errors='replace').strip()[-300:]}")

    def read(self, path: str) -> bytes:
        rc, out, _ = self.exec(
            f"[ -f {shlex.quote(path)} ] || exit 66; cat -- {shlex.quote(path)}", timeout=300
        )
        if rc == 66:
            raise FileNotFoundError(f"{path}: no such file in the container")
        if rc != 0:
            raise ContainerError(f"reading {path}: {out.decode(errors='replace').strip()[-300:]}")
        return out

    def fetch(self, path: str, dest: Path) -> None:
        """Copy the container's folder `path` into the host folder `dest` (links and devices are kept
        out, nothing lands outside `dest`)."""
        rc, out, _ = self._tar_out(path)
        if rc == 66:
            raise FileNotFoundError(f"{path}: no such directory in the container")
        if rc != 0:
            raise ContainerError(f"copying {path} out: {out[-300:].decode(errors='replace')}")
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(out), mode="r") as tar:
            members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
            tar.extractall(dest, members=members, filter="data")

    def _tar_out(self, path: str) -> tuple[int, bytes, bool]:
        q = shlex.quote(path)
        return self.exec(f"[ -d {q} ] || exit 66; tar -c -C {q} -f - .", timeout=600)


def _as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


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
