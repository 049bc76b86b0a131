"""Without a PID namespace around a command (no sandbox, no step boundary), what it left running
when it ended is found and killed here, and named.

A command runs in a process group of its own, killed when it ends; a process that left the group
(`setsid`, a double fork) would outlive it. So Clover makes itself a child subreaper: an orphan of
its commands is re-parented to Clover instead of init. After each command, every child of Clover
that it did not start itself and that started after the command did is such a process: it and
everything below it are killed (SIGKILL) and reaped, until none is left.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


@functools.lru_cache(maxsize=1)
def adopt_orphans() -> bool:
    """Make this process the subreaper of its descendants (once); False where Linux cannot."""
    if sys.platform != "linux":
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def now_ticks() -> int:
    """The clock /proc/<pid>/stat counts start times in (clock ticks since boot)."""
    return int(time_boot() * os.sysconf("SC_CLK_TCK"))


def time_boot() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def _stat(pid: int) -> tuple[int, int, str, bool, int] | None:
    """(parent pid, start time in ticks, command name, a zombie, process group) of `pid`."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    name = raw[raw.index(b"(") + 1 : raw.rindex(b")")].decode(errors="replace")
    fields = raw[raw.rindex(b")") + 2 :].split()
    return int(fields[1]), int(fields[19]), name, fields[0] == b"Z", int(fields[2])


def _processes() -> dict[int, tuple[int, int, str, bool, int]]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (info := _stat(int(entry))) is not None:
            out[int(entry)] = info
    return out


def _wait_group_gone(group: int, me: int) -> None:
    """Until the killed group's members have died (up to a second): only then are the processes
    they started re-parented to this one, where the scan finds them."""
    for _ in range(100):
        table = _processes()
        if not any(g == group and not (z and ppid == me) for ppid, _s, _n, z, g in table.values()):
            return
        time.sleep(0.01)


def kill_leftovers(since: int, group: int = 0, spare: set[int] = frozenset()) -> list[str]:
    """Kill every process re-parented to this one that started at or after `since` (ticks), with
    its descendants; return what was killed ("name (pid N)"). `group`: the command's process
    group, already killed (its members are reaped, not reported). `spare`: pids of this process's
    own children that are not the command's."""
    if sys.platform != "linux" or not adopt_orphans():
        return []
    me, killed = os.getpid(), {}
    if group:
        _wait_group_gone(group, me)
    for _round in range(50):  # a process forking while it is killed: go again until none is left
        table = _processes()
        mine = [p for p, (ppid, start, *_rest) in table.items() if ppid == me and start >= since]
        mine = [p for p in mine if p not in spare]
        for pid in [p for p in mine if table[p][3] or table[p][4] == group]:  # dead, or dying: reap only
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
        roots = [p for p in mine if not (table[p][3] or table[p][4] == group)]
        if not roots:
            break
        doomed = set(roots)
        grew = True
        while grew:
            below = {p for p, (ppid, *_rest) in table.items() if ppid in doomed} - doomed
            grew = bool(below)
            doomed |= below
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.setdefault(pid, f"{table[pid][2]} (pid {pid})")
        for pid in roots:  # ours now: reap them, or they stay as zombies
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
    return list(killed.values())


__all__ = ["adopt_orphans", "kill_leftovers", "now_ticks"]
