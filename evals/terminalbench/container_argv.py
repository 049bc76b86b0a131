"""The command lines of a task's container (container.py): bwrap as its init, in new namespaces over
the overlaid root, and nsenter into it for each command, as `docker exec` enters a container."""

from __future__ import annotations

import shlex
from pathlib import Path

from clover.evals.terminalbench.images import DEFAULT_PATH


def init_argv(
    root: Path,
    hostname: str,
    etc_binds: list[str],
    *,
    info_fd: int,
    ready_fd: int,
    binds: list[tuple[Path, str]],
    writable: list[tuple[Path, str]],
    hidden: list[Path],
) -> list[str]:
    """bwrap running the container's init over `root`: it writes its pid's JSON to `info_fd` and
    "ready" to `ready_fd` once the mounts are done, then sleeps. `binds` are read-only, `writable`
    read-write (host folder, container path); each `hidden` host folder is covered by a tmpfs."""
    bwrap = [
        "bwrap",
        "--info-fd",
        str(info_fd),
        "--bind",
        str(root),
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--ro-bind",
        "/sys",
        "/sys",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--hostname",
        hostname,
        "--die-with-parent",
        *etc_binds,
    ]
    for host, inside in binds:
        bwrap += ["--ro-bind", str(host), inside]
    for host, inside in writable:
        bwrap += ["--bind", str(host), inside]
    for path in hidden:
        bwrap += ["--tmpfs", str(path)]
    return [
        *bwrap,
        "--",
        "/bin/bash",
        "-c",
        f"echo ready >&{ready_fd}; exec {ready_fd}>&-; exec sleep infinity",
    ]


def exec_argv(pid: int, hostname: str, command: str, cwd: str, env: dict[str, str] | None) -> list[str]:
    """The host command line that runs `command` with bash, in `cwd`, in the container whose init is `pid`."""
    variables = {"PATH": DEFAULT_PATH, "HOME": "/root", "HOSTNAME": hostname, **(env or {})}
    script = f"cd {shlex.quote(cwd)} || exit 1\n{command}"
    return [
        # every signal at its default, as `docker exec` starts a process: a runner started with
        # `nohup ... &` ignores SIGINT, and an ignored signal stays ignored across exec (a task's
        # test that stops its program with SIGINT would then wait for ever)
        "env",
        "--default-signal",
        "nsenter",
        "-t",
        str(pid),
        "-m",
        "-p",
        "-u",
        "-i",
        "-n",
        "-r",
        "--",
        "/usr/bin/env",
        "-i",
        *(f"{k}={v}" for k, v in variables.items()),
        "bash",
        "-c",
        script,
    ]
