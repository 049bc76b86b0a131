"""A process stopped at execve/execveat, seen from outside: its path and argv read from
/proc/<pid>/mem, and the file it is about to run opened the way the kernel will resolve it (in
the process's own root and working directory, so inside the sandbox's mount namespace too:
absolute symlinks restart at its root, `..` never climbs above it).

Reading another process's memory needs ptrace access to it: Clover's own descendants, in or out of
the sandbox, qualify. The values read can change after they are read (another thread of the same
process can rewrite them): see tools/safety/execguard.py for how that is narrowed.
"""

from __future__ import annotations

import os
import re
import stat
import struct
from dataclasses import dataclass

AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
_MAX_PATH = 4096
_MAX_ARGS = 65536
_MAX_ARG_BYTES = 4 * 1024 * 1024
_MAX_LINKS = 40


class TargetGone(Exception):
    """The process died or its memory could not be read (the exec is refused)."""


@dataclass
class ExecCall:
    pid: int
    path: str  # as passed; "" with AT_EMPTY_PATH means the file open at dirfd
    argv: list[str]
    dirfd: int = AT_FDCWD
    empty_path: bool = False
    envp: int = 0  # address of the environment array (read on demand)
    ptr_size: int = 8


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _read_string(mem: int, addr: int, cap: int) -> bytes:
    out = b""
    while len(out) < cap:
        try:
            chunk = os.pread(mem, 512, addr + len(out))
        except OSError as exc:
            raise TargetGone(f"cannot read the process's memory: {exc.strerror}") from None
        if not chunk:
            raise TargetGone("the process's memory ended inside a string")
        end = chunk.find(b"\0")
        if end >= 0:
            return out + chunk[:end]
        out += chunk
    raise TargetGone("a string of the exec call is too long to check")


def _read_array(mem: int, addr: int, ptr_size: int, cap_bytes: int) -> list[bytes]:
    fmt = "=Q" if ptr_size == 8 else "=I"
    items: list[bytes] = []
    total = 0
    while addr:
        try:
            block = os.pread(mem, ptr_size * 256, addr + ptr_size * len(items))
        except OSError as exc:
            raise TargetGone(f"cannot read the process's memory: {exc.strerror}") from None
        if len(block) < ptr_size:
            raise TargetGone("the argument array runs off the process's memory")
        for off in range(0, len(block) - ptr_size + 1, ptr_size):
            (ptr,) = struct.unpack_from(fmt, block, off)
            if ptr == 0:
                return items
            item = _read_string(mem, ptr, cap_bytes - total)
            total += len(item) + 1
            items.append(item)
            if len(items) > _MAX_ARGS:
                raise TargetGone("too many arguments to check")
    return items


def read_exec(pid: int, is_execveat: bool, args: tuple[int, ...], ptr_size: int) -> ExecCall:
    """The exec call's path and argv, from the stopped process's memory."""
    try:
        mem = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise TargetGone(f"cannot open the process's memory: {exc.strerror}") from None
    try:
        if is_execveat:
            dirfd = struct.unpack("=i", struct.pack("=I", args[0] & 0xFFFFFFFF))[0]
            path_ptr, argv_ptr, envp, flags = args[1], args[2], args[3], args[4]
        else:
            dirfd, path_ptr, argv_ptr, envp, flags = AT_FDCWD, args[0], args[1], args[2], 0
        path = _decode(_read_string(mem, path_ptr, _MAX_PATH)) if path_ptr else ""
        argv = [_decode(a) for a in _read_array(mem, argv_ptr, ptr_size, _MAX_ARG_BYTES)]
    finally:
        os.close(mem)
    return ExecCall(pid, path, argv, dirfd, bool(flags & AT_EMPTY_PATH), envp, ptr_size)


def env_names(call: ExecCall) -> set[str]:
    """The names in the exec call's environment (LD_PRELOAD and friends matter)."""
    try:
        mem = os.open(f"/proc/{call.pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise TargetGone(f"cannot open the process's memory: {exc.strerror}") from None
    try:
        return {
            _decode(e.split(b"=", 1)[0]) for e in _read_array(mem, call.envp, call.ptr_size, _MAX_ARG_BYTES)
        }
    finally:
        os.close(mem)


def task_argv(pid: int) -> list[str]:
    """What the process runs now (before its exec): its /proc cmdline."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read(8192)
    except OSError:
        return []
    return [_decode(a) for a in raw.split(b"\0")[:-1]] if raw else []


@dataclass
class Opened:
    """The file an exec will run: an fd (read access where possible), its identity, the path it
    resolved to as the process sees it, and its first bytes (a `#!` line)."""

    fd: int
    st: os.stat_result
    path: str
    head: bytes

    @property
    def key(self) -> tuple[int, int]:
        return self.st.st_dev, self.st.st_ino

    def close(self) -> None:
        os.close(self.fd)


_FD_PATH = re.compile(r"^/(?:proc/(?:self|thread-self)|dev)/fd/(\d+)(/.*)?$")


def open_in_task(
    pid: int, path: str, dirfd: int = AT_FDCWD, empty_path: bool = False, cwd: str | None = None
) -> Opened | None:
    """Open what `path` names for process `pid`; None when it does not exist. Raises TargetGone
    when the process's root or working directory cannot be reached."""
    host: str | None = None
    if empty_path and not path:
        host = f"/proc/{pid}/fd/{dirfd}"
    elif m := _FD_PATH.match(path):
        host = f"/proc/{pid}/fd/{m.group(1)}{m.group(2) or ''}"
    elif path == "/dev/stdin":
        host = f"/proc/{pid}/fd/0"
    elif path.startswith(("/proc/self/", "/proc/thread-self/")):
        host = f"/proc/{pid}/" + path.split("/", 3)[3]
    if host is not None:
        return _open_final(None, host, path)
    try:
        root = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise TargetGone(f"cannot see the process's root: {exc.strerror}") from None
    try:
        if path.startswith("/"):
            start, shown = os.dup(root), ["/"]
        else:
            where = f"/proc/{pid}/cwd" if dirfd == AT_FDCWD else f"/proc/{pid}/fd/{dirfd}"
            try:
                start = os.open(where, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as exc:
                raise TargetGone(f"cannot see the process's directory: {exc.strerror}") from None
            base = cwd if cwd is not None else _readlink(where)
            shown = [base or "."]
        return _walk(root, start, path, shown)
    finally:
        os.close(root)


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _walk(root: int, cur: int, path: str, shown: list[str]) -> Opened | None:
    root_id = os.fstat(root)
    pending = [p for p in path.split("/") if p not in ("", ".")]
    links = 0
    try:
        while pending:
            name = pending.pop(0)
            if name == "..":
                here = os.fstat(cur)
                if (here.st_dev, here.st_ino) != (root_id.st_dev, root_id.st_ino):
                    cur = _replace(cur, os.open("..", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=cur))
                    shown.append("..")
                continue
            try:
                st = os.stat(name, dir_fd=cur, follow_symlinks=False)
            except FileNotFoundError:
                return None
            except OSError:
                return None
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > _MAX_LINKS:
                    return None
                target = os.readlink(name, dir_fd=cur)
                if target.startswith("/"):
                    cur = _replace(cur, os.dup(root))
                    shown[:] = ["/"]
                pending[:0] = [p for p in target.split("/") if p not in ("", ".")]
                continue
            shown.append(name)
            if not pending:
                return _open_final(cur, name, os.path.normpath("/".join(shown).replace("//", "/")))
            if not stat.S_ISDIR(st.st_mode):
                return None
            cur = _replace(
                cur, os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=cur)
            )
        return None  # a directory (or the root itself): nothing to run
    finally:
        os.close(cur)


def _replace(old: int, new: int) -> int:
    os.close(old)
    return new


def _open_final(dir_fd: int | None, name: str, shown: str) -> Opened | None:
    flags = (
        os.O_RDONLY
        | os.O_NOCTTY
        | os.O_NONBLOCK
        | os.O_CLOEXEC
        | (os.O_NOFOLLOW if dir_fd is not None else 0)
    )
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError:  # no read permission (an execute-only file): identity only
        try:
            fd = os.open(
                name, os.O_PATH | os.O_CLOEXEC | (os.O_NOFOLLOW if dir_fd is not None else 0), dir_fd=dir_fd
            )
        except OSError:
            return None
    st = os.fstat(fd)
    head = b""
    if stat.S_ISREG(st.st_mode):
        try:
            head = os.pread(fd, 256, 0)
        except OSError:
            head = b""
    return Opened(fd, st, shown, head)


def shebang(head: bytes) -> tuple[str, str | None] | None:
    """(interpreter, optional argument) of a `#!` line, as the kernel splits it."""
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].strip(b" \t")
    if not line:
        return None
    parts = re.split(rb"[ \t]+", line, maxsplit=1)
    arg = parts[1].strip(b" \t") if len(parts) > 1 else b""
    return _decode(parts[0]), (_decode(arg) if arg else None)
