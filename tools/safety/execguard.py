"""The exec check: every program a command starts is checked at the moment it starts.

Each command runs under tools/safety/execlaunch.py, which installs a seccomp filter (NO_NEW_PRIVS, then
SECCOMP_RET_USER_NOTIF on execve/execveat, inherited by every descendant, in or out of the
sandbox) and passes the notification fd to Clover over a socketpair. A supervisor thread here
reads each stopped exec's path and argv from /proc/<pid>/mem, opens the file it would run
(tools/safety/exectarget.py), asks tools/safety/execpolicy.py, and answers CONTINUE or an errno. What the check
refused is reported at the end of the command's output.

A program the approval did not cover is asked about (`Grant.ask`, on the thread that runs the
command, while that program waits) or refused. When the command ends, the listener closes: a
daemon it left behind can start nothing more (its execs fail with ENOSYS).

Limits (documented in docs/safety.md): work a program does in-process is not a program start
(`shutil.rmtree`, a library's own network code); the path and argv are read from the process's
memory, so another thread sharing that memory can rewrite them after they were read. Clover
re-reads them after deciding and refuses a start whose arguments changed, and validates the
notification id before answering, which narrows the window but does not close it: a program
written to race the check is stopped by the sandbox's filesystem limits, not by this layer.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import platform
import queue
import select
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from clover.tools.safety import execlaunch
from clover.tools.safety.execgrant import Grant, argv_template, templates_of
from clover.tools.safety.execpolicy import ExecPolicy, ProgramIndex, denied_names
from clover.tools.safety.exectarget import TargetGone, open_in_task, read_exec, task_argv
from clover.tools.safety.permrules import join_words
from clover.tools.safety.sandbox import SandboxUnavailable
from clover.tools.safety.shellparse import parse_shell

LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "execlaunch.py")
_RECV, _SEND, _ID_VALID, _SET_FLAGS = 0xC0502100, 0xC0182101, 0x40082102, 0x40082104
_CONTINUE = 1
_SYNC_WAKE_UP = 1
_NOTIF_SIZE = 80


class ExecCheckUnavailable(SandboxUnavailable):
    """`exec_check = true` was asked for where it cannot work; the message says why."""


@functools.lru_cache(maxsize=1)
def _probe() -> str | None:
    """None when the exec check works here; else why not (cached)."""
    if sys.platform != "linux":
        return "exec checking needs Linux (seccomp user notification)"
    if platform.machine() not in execlaunch.ARCHES:
        return f"exec checking is not built for {platform.machine()}"
    try:
        with open("/proc/sys/kernel/seccomp/actions_avail") as fh:
            if "user_notif" not in fh.read().split():
                return "this kernel has no seccomp user notification (Linux 5.5 or newer has it)"
    except OSError:
        return "this kernel has no seccomp"
    guard = ExecGuard(check=True)
    session = guard.session(Grant(templates=[argv_template(["true"])], helpers=False), os.defpath)
    try:
        argv = session.wrap(["true"])
        proc = subprocess.run(argv, pass_fds=session.pass_fds, capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the exec check could not start: {exc}"
    finally:
        session.spawned()
        notes = session.close()
    if proc.returncode != 0 or notes or session.checked == 0:
        detail = (
            session.failure or proc.stderr.decode(errors="replace").strip()[:200] or f"exit {proc.returncode}"
        )
        return f"the exec check does not work here: {detail}"
    return None


def exec_check_available() -> bool:
    return _probe() is None


def unavailable_reason() -> str | None:
    return _probe()


class GrantingGate(Protocol):
    """What the exec check reads of the agent's gate (tools/safety/permgate.py's PermissionGate)."""

    policy: Any  # a PermissionPolicy: its deny rules hold for every command

    def take_grant(self, command: str) -> Grant | None: ...


class ExecGuard:
    """Per environment: the grants of the agent's gate (`gate_of`), the deny rules to apply when
    no gate made a grant (`fallback`), and one `ExecSession` per command."""

    def __init__(self, fallback: Any = None, check: bool = True) -> None:
        self.fallback = fallback  # a PermissionPolicy: its deny rules hold for every command
        self.check = check  # False: grants still say how to run a command (read-only), nothing is checked
        # the agent's current gate, None where it has none
        self.gate_of: Callable[[], GrantingGate | None] | None = None
        self._indexes: dict[tuple[frozenset[str], str], ProgramIndex] = {}

    def grant_for(self, command: str) -> Grant:
        """What the gate granted this command line; without a gate's grant (code that is not the
        model's: a user's `!cmd`, a tool's probe) anything but the denied programs."""
        gate = self.gate_of() if self.gate_of is not None else None
        grant = gate.take_grant(command) if gate is not None else None
        if grant is None:
            policy = (gate.policy if gate is not None else None) or self.fallback
            grant = Grant(everything=True, policy=policy, label=command)
        return grant

    def session(self, grant: Grant, search_path: str) -> ExecSession:
        names = frozenset(denied_names(grant.policy.deny if grant.policy is not None else []))
        key = (names, search_path)
        if key not in self._indexes:
            self._indexes[key] = ProgramIndex(names, search_path)
        return ExecSession(grant, search_path, self._indexes[key])


class ExecSession:
    """One command under the exec check: `wrap` its argv, pass `pass_fds`, call `spawned` once the
    process started (or failed to), `wait` for it (it answers questions meanwhile), then `close`
    (returns what was refused, as lines for the output)."""

    def __init__(self, grant: Grant, search_path: str, index: ProgramIndex) -> None:
        self.grant = grant
        self.policy = ExecPolicy(grant, search_path, index)
        self.search_path = search_path
        self.parent_sock, self.child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.stop_r, self.stop_w = os.pipe()
        self.inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.refused: list[str] = []
        self.failure: str | None = None
        self.checked = 0
        self.expected: tuple[str, list[str]] | None = None
        self.thread = threading.Thread(target=self._serve, name="clover-exec-check", daemon=True)
        self.thread.start()

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (self.child_sock.fileno(),)

    def wrap(self, argv: list[str]) -> list[str]:
        """The launcher's argv for `argv` (resolved on the command's PATH now)."""
        path = argv[0] if "/" in argv[0] else shutil.which(argv[0], path=self.search_path) or argv[0]
        self.expected = (path, list(argv))
        return [sys.executable, "-I", "-S", LAUNCHER, str(self.child_sock.fileno()), path, *argv]

    def spawned(self) -> None:
        with contextlib.suppress(OSError):
            self.child_sock.close()

    def wait(self, proc: subprocess.Popen, timeout: float) -> bool:
        """Wait for `proc`, answering the check's questions on this thread; True when it timed
        out (the time spent on a question does not count)."""
        threading.Thread(target=lambda: (proc.wait(), self.inbox.put(("done",))), daemon=True).start()
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return True
            if item[0] == "done":
                return False
            _, argv, why, reply = item
            started = time.monotonic()
            answer = "no"
            try:
                answer = self.grant.ask(argv, why) if self.grant.ask else "no"
            except Exception:
                answer = "no"
            finally:
                reply.put(answer)
            deadline += time.monotonic() - started

    def close(self) -> list[str]:
        with contextlib.suppress(OSError):
            os.write(self.stop_w, b"x")
        self.thread.join(timeout=5)
        for fd in (self.stop_r, self.stop_w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.parent_sock.close()
        self.spawned()
        return list(dict.fromkeys(self.refused))  # a shell retries a refused start on each PATH entry

    # ------------------------------------------------------------------ the supervisor thread

    def _serve(self) -> None:
        try:
            msg, fds, _, _ = socket.recv_fds(self.parent_sock, 1024, 1)
        except OSError as exc:
            self.failure = f"no notification fd ({exc.strerror})"
            return
        if not fds:
            if msg.startswith(b"E"):
                self.failure = msg[1:].decode(errors="replace")
            return
        listener = fds[0]
        with contextlib.suppress(OSError):
            fcntl.ioctl(listener, _SET_FLAGS, _SYNC_WAKE_UP)
        poller = select.poll()
        poller.register(listener, select.POLLIN)
        poller.register(self.stop_r, select.POLLIN)
        try:
            while True:
                for fd, event in poller.poll():
                    if fd == self.stop_r:
                        return
                    if event & select.POLLIN:
                        self._one(listener)
                    elif event & (select.POLLHUP | select.POLLERR):
                        return
        finally:
            os.close(listener)

    def _one(self, listener: int) -> None:
        buf = bytearray(_NOTIF_SIZE)
        try:
            fcntl.ioctl(listener, _RECV, buf, True)
        except OSError:
            return  # the process died before we read it
        nid, pid, _, nr, arch = struct.unpack_from("=QIIiI", buf)
        args = struct.unpack_from("=6Q", buf, 32)
        self.checked += 1
        kind = _SYSCALLS.get((arch, nr & 0xFFFFFFFF))
        if kind is None:  # the filter sends only execs; anything else is refused
            _respond(listener, nid, errno.EPERM)
            return
        try:
            error, note = self._decide(listener, nid, pid, *kind, args)
        except Exception as exc:  # a bug here must refuse, never let through
            error, note = errno.EPERM, f"the exec check failed ({type(exc).__name__}: {exc})"
        if note:
            self.refused.append(note)
        _respond(listener, nid, error)

    def _decide(
        self, listener: int, nid: int, pid: int, is_at: bool, ptr: int, args: tuple[int, ...]
    ) -> tuple[int, str | None]:
        """(errno or 0 to let it run, a line about a refusal)."""
        try:
            call = read_exec(pid, is_at, args, ptr)
        except TargetGone as exc:
            return errno.EPERM, f"refused a program start it could not read: {exc}"
        if not _valid(listener, nid):
            return errno.EPERM, None  # the process is gone: what was read may be another's
        if self.expected is not None:  # the first start: the launcher running the command itself
            expected, self.expected = self.expected, None
            if (call.path, call.argv) == expected:
                return 0, None
        try:
            opened = open_in_task(pid, call.path, call.dirfd, call.empty_path)
        except TargetGone as exc:
            return errno.EPERM, f"refused `{join_words(call.argv)[:200]}`: {exc}"
        if opened is None:
            return errno.ENOENT, None  # nothing there: the kernel would fail too (and nothing can race in)
        try:
            verdict = self.policy.decide(call, opened)
        finally:
            opened.close()
        shown = join_words(verdict.argv)[:200]
        if verdict.action == "ask":
            parent = join_words(task_argv(pid))[:120] or "the command"
            reply: queue.Queue[str] = queue.Queue()
            why = f"`{parent}` is starting `{shown}`: {verdict.reason}"
            self.inbox.put(("ask", verdict.argv, why, reply))
            if reply.get() != "yes":
                return errno.EPERM, f"refused to start `{shown}` (started by `{parent}`): the user declined"
            # what an approved shell string runs is approved with it (`sh -c 'make test'`)
            self.grant.templates += templates_of(parse_shell(join_words(verdict.argv)))
        elif verdict.action == "deny":
            return errno.EPERM, f"refused to start `{shown}`: {verdict.reason}"
        try:  # the arguments must still be what was checked (another thread may have changed them)
            again = read_exec(pid, is_at, args, ptr)
        except TargetGone:
            return errno.EPERM, None
        if (again.path, again.argv) != (call.path, call.argv):
            return (
                errno.EPERM,
                f"refused `{join_words(call.argv)[:200]}`: its arguments changed while being checked",
            )
        return 0, None


def _build_syscalls() -> dict[tuple[int, int], tuple[bool, int]]:
    table: dict[tuple[int, int], tuple[bool, int]] = {}
    _, abis = execlaunch.ARCHES.get(platform.machine(), (0, []))
    for arch, calls in abis:
        for nr, is_at, ptr in calls:
            table[(arch, nr)] = (is_at, ptr)
    return table


_SYSCALLS = _build_syscalls()


def _valid(listener: int, nid: int) -> bool:
    try:
        fcntl.ioctl(listener, _ID_VALID, struct.pack("=Q", nid))
        return True
    except OSError:
        return False


def _respond(listener: int, nid: int, error: int) -> None:
    flags = _CONTINUE if error == 0 else 0
    resp = struct.pack("=QqiI", nid, 0, -error if error else 0, flags)
    with contextlib.suppress(OSError):  # the process died meanwhile
        fcntl.ioctl(listener, _SEND, bytearray(resp), True)


__all__ = ["ExecCheckUnavailable", "ExecGuard", "ExecSession", "exec_check_available", "unavailable_reason"]
