"""OS sandbox for shell commands and the programs tools run (git, rg), using bubblewrap (bwrap).

Inside: the whole file system read-only, the workspace (and any --add-dir) writable, a private
/tmp, fresh /dev, its own PID namespace with a fresh /proc (no /proc/<pid>/root of a host process
to write through; every process in it dies with the command: bwrap is its init and
--die-with-parent ties that to Clover), a new session (no TIOCSTI into the terminal), no network
unless allowed (a new network namespace with only a down loopback), and the host's service
sockets hidden (all of /run without the network; with it the well-known ones: Docker, D-Bus,
/run/user's session bus and agents, databases).
`Sandbox(root).wrap_command` fits LocalEnvironment's `wrap_command(argv) -> argv` hook.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence


class SandboxUnavailable(Exception):
    """bwrap is missing or cannot create namespaces here; the message says which."""


@functools.lru_cache(maxsize=1)
def _probe() -> str | None:
    """None when bwrap works; otherwise why not (cached: the answer does not change)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (bwrap) is not installed"
    try:
        proc = subprocess.run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--proc", "/proc",
                               "--unshare-net", "--", "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to start: {exc}"
    if proc.returncode != 0:
        return f"bwrap cannot create a sandbox here: {proc.stderr.strip()[:200] or proc.returncode}"
    return None


def bwrap_available() -> bool:
    return _probe() is None


def unavailable_reason() -> str | None:
    return _probe()


class Sandbox:
    def __init__(self, root: str, writable: Sequence[str] = (), network: bool = False,
                 private_tmp: bool = True):
        reason = _probe()
        if reason is not None:
            raise SandboxUnavailable(reason)
        self.bwrap = shutil.which("bwrap") or "bwrap"
        self.root = os.path.realpath(root)
        self.writable = [os.path.realpath(p) for p in (self.root, *writable)]
        self.network = network
        self.private_tmp = private_tmp

    def wrap_command(self, argv: Sequence[str]) -> list[str]:
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--unshare-pid", "--unshare-ipc",
                "--proc", "/proc"]
        # A read-only mount does not stop connect() on a host service's socket: hide them. Without
        # the network nothing in /run is needed (with it, resolv.conf may point into /run).
        hidden = ["/run"] if not self.network else _HOST_SOCKETS
        for sock in sorted({os.path.realpath(s) for s in hidden if os.path.exists(s)}):
            args += ["--tmpfs", sock] if os.path.isdir(sock) else ["--ro-bind", "/dev/null", sock]
        if self.private_tmp:
            args += ["--tmpfs", "/tmp"]
            # Tools that live under /tmp (a virtualenv, a checkout's PATH entries) stay usable, read-only.
            for path in _tools_under_tmp(argv):
                args += ["--ro-bind", path, path]
        for path in self.writable:  # after /tmp, so a workspace under /tmp stays visible
            if os.path.exists(path):
                args += ["--bind", path, path]
        if not self.network:
            args += ["--unshare-net"]
        # no --chdir: bwrap keeps the caller's working directory (a subdirectory of the workspace)
        args += ["--die-with-parent", "--new-session", "--", *argv]
        return args

    __call__ = wrap_command


_HOST_SOCKETS = ("/run/user", "/var/run/docker.sock", "/run/docker.sock", "/run/containerd", "/run/podman",
                 "/var/run/dbus", "/run/dbus", "/run/postgresql", "/run/mysqld", "/run/snapd.socket")


def _tools_under_tmp(argv: Sequence[str]) -> list[str]:
    """Directories under /tmp the command may need to execute: this Python's prefixes, PATH entries
    and the program itself; outermost first, without duplicates or nested repeats."""
    candidates = [sys.prefix, sys.base_prefix, *os.environ.get("PATH", "").split(os.pathsep)]
    if argv and os.path.isabs(argv[0]):
        candidates.append(os.path.dirname(argv[0]))
    found: list[str] = []
    for path in sorted({os.path.realpath(c) for c in candidates if c}, key=len):
        inside_tmp = path.startswith("/tmp/")
        if inside_tmp and os.path.isdir(path) and not any(path.startswith(f + "/") for f in found):
            found.append(path)
    return found


def make_wrapper(root: str, writable: Sequence[str] = (), network: bool = False
                 ) -> Callable[[Sequence[str]], list[str]]:
    """The hook for LocalEnvironment(wrap_command=...); raises SandboxUnavailable if bwrap cannot run."""
    return Sandbox(root, writable, network).wrap_command
