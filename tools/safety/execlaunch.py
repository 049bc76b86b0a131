"""The exec-check launcher: installs a seccomp filter that turns every execve/execveat of this
process and all its descendants into a user notification, hands the notification fd to Clover
over an inherited socket (SCM_RIGHTS), then execs the command. Clover's supervisor
(tools/safety/execguard.py) answers each exec: go on, or EPERM.

Run as a file by Clover's own interpreter (`python -I -S execlaunch.py SOCKFD PATH ARGV0 ARG...`):
stdlib only, nothing of Clover imported, so it starts fast and works inside the sandbox.
`python -I -S execlaunch.py --probe` says whether the mechanism works here (exit 0) or why not.
"""

from __future__ import annotations

import _socket
import ctypes
import os
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_GET_NOTIF_SIZES = 3
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_USER_NOTIF = 0x7FC00000
SECCOMP_RET_ALLOW = 0x7FFF0000
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_RET_K = 0x20, 0x15, 0x06
_X32 = 0x40000000

# machine -> (seccomp syscall number, [(AUDIT_ARCH_*, ((syscall number, is execveat, pointer size),
# ...))]): the native ABI and the compat ABIs a process of that machine can switch to (i386 and
# x32 on x86_64, arm on aarch64). The supervisor reads the notification with the same table.
ARCHES: dict[str, tuple[int, list[tuple[int, tuple[tuple[int, bool, int], ...]]]]] = {
    "x86_64": (
        317,
        [
            (0xC000003E, ((59, False, 8), (322, True, 8), (_X32 | 520, False, 4), (_X32 | 545, True, 4))),
            (0x40000003, ((11, False, 4), (358, True, 4))),
        ],
    ),
    "aarch64": (
        277,
        [(0xC00000B7, ((221, False, 8), (281, True, 8))), (0x40000028, ((11, False, 4), (387, True, 4)))],
    ),
}


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def build_filter(machine: str) -> bytes:
    """A classic-BPF program: for each known ABI, execve/execveat -> USER_NOTIF, anything else ->
    ALLOW; a syscall from an ABI not listed kills the process (it could exec unseen)."""
    _, abis = ARCHES[machine]
    code: list[tuple[int, int, int, int | str]] = []  # (op, jt, jf, k); jt "N" = jump to notify
    for arch, calls in abis:
        numbers = [nr for nr, _, _ in calls]
        code.append((_BPF_LD_W_ABS, 0, 0, 4))  # seccomp_data.arch
        code.append((_BPF_JEQ_K, 0, len(numbers) + 2, arch))  # not this ABI: skip its block
        code.append((_BPF_LD_W_ABS, 0, 0, 0))  # seccomp_data.nr
        code += [(_BPF_JEQ_K, -1, 0, nr) for nr in numbers]
        code.append((_BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    code.append((_BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS))
    notify = len(code)
    code.append((_BPF_RET_K, 0, 0, SECCOMP_RET_USER_NOTIF))
    out = b""
    for i, (op, jt, jf, k) in enumerate(code):
        if jt == -1:
            jt = notify - i - 1
        out += struct.pack("=HBBI", op, jt, jf, k)
    return out


def install_listener() -> int:
    """NO_NEW_PRIVS + the filter; returns the notification fd. Raises OSError."""
    machine = os.uname().machine
    if machine not in ARCHES:
        raise OSError(0, f"exec checking is not built for {machine}")
    libc = _libc()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(NO_NEW_PRIVS): {os.strerror(err)}")
    prog = build_filter(machine)
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = struct.pack("=HxxxxxxQ", len(prog) // 8, ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog, len(fprog))
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(
        ctypes.c_long(ARCHES[machine][0]),
        ctypes.c_long(SECCOMP_SET_MODE_FILTER),
        ctypes.c_long(SECCOMP_FILTER_FLAG_NEW_LISTENER),
        fbuf,
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp(SET_MODE_FILTER, NEW_LISTENER): {os.strerror(err)}")
    return int(fd)


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--probe"]:
        try:
            os.close(install_listener())
        except OSError as exc:
            print(exc.strerror or exc, file=sys.stderr)
            return 1
        return 0
    sock_fd, program, args = int(argv[1]), argv[2], argv[3:]
    sock = _socket.socket(fileno=sock_fd)  # the C module: `socket` costs milliseconds to import
    try:
        listener = install_listener()
        sock.sendmsg([b"L"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, struct.pack("=i", listener))])
        os.close(listener)
    except OSError as exc:
        sock.sendall(b"E" + str(exc.strerror or exc).encode()[:500])
        print(f"clover: exec check could not start: {exc.strerror or exc}", file=sys.stderr)
        return 126
    finally:
        sock.close()
    try:
        os.execv(program, args)
    except OSError as exc:
        print(f"clover: cannot run {program}: {exc.strerror or exc}", file=sys.stderr)
        return 126 if exc.errno != 2 else 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
