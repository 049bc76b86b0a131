"""The step launcher: runs a command against a copy-on-write view of the workspace.

It enters a new user and mount namespace, mounts an overlay over each given directory (the real
directory is the read-only lower layer, a fresh per-step directory of Clover's is the upper
layer), re-enters the working directory through the new mount, and execs the command. Every write,
removal, rename and chmod the command makes inside those directories lands in the upper layer and
nowhere else; Clover reads that layer when the command has ended (tools/safety/overlay.py), decides what
may be kept (tools/safety/steppolicy.py) and applies it (tools/safety/stepapply.py).

With `--pid` (no bubblewrap around the command) it also starts a new PID namespace with its own
/proc: the command is its first process, every process it starts dies when it ends (nothing a
step started outlives it), and no process outside it, Clover included, is visible in /proc. The
command then runs without capabilities (as bubblewrap runs it): a process holding them could
unmount the overlay and write to the real directory. With bubblewrap, bwrap drops them itself and
adds its own PID namespace.

Run as a file by Clover's own interpreter (`python -I -S overlaylaunch.py ...`): stdlib only,
nothing of Clover imported, so it starts fast. `--probe UPPER_BASE` says whether the mechanism
works here (exit 0) or why not (the reason on stderr).

    overlaylaunch.py [--pid] --layer LOWER UPPER WORK [--layer ...] -- PROGRAM ARG...
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x4000, 1 << 18, 2, 4, 8
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_CAP_AMBIENT = 38, 24, 28, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECURE_ALL_LOCKED = 0x2F  # NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED ... and their locks
_CAPABILITY_VERSION_3 = 0x20080522
# Options that make the upper layer a plain record of the writes: no redirect or metacopy
# xattrs (a renamed directory is copied, a chmod copies the file), no inode index. Older
# kernels that refuse one of them get the bare `userxattr` form; tools/safety/overlay.py refuses a
# layer that holds redirects or metacopies.
OPTIONS = ("userxattr,redirect_dir=nofollow,metacopy=off,index=off,xino=off", "userxattr")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_namespaces(libc: ctypes.CDLL, pid: bool) -> None:
    """A user namespace mapping this process's ids to themselves (root maps every id: files of
    every owner can then be copied up), and a private mount namespace."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | (CLONE_NEWPID if pid else 0)
    if uid != 0:
        _check(libc.unshare(flags), "unshare(user, mount namespaces)")
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    else:
        _map_all_from_outside(libc, flags)
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "making mounts private")


def _map_all_from_outside(libc: ctypes.CDLL, flags: int) -> None:
    """Root's identity map of every id: only a process still outside the new namespace may write
    a map wider than its own id, so a helper forked first writes it once this process is inside."""
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    me = os.getpid()
    helper = os.fork()
    if helper == 0:
        os.close(go_w)
        os.close(done_r)
        answer = b"ok"
        if os.read(go_r, 1) == b"x":
            try:
                _write(f"/proc/{me}/uid_map", "0 0 4294967295")
                _write(f"/proc/{me}/gid_map", "0 0 4294967295")
            except OSError as exc:
                answer = f"writing the id map: {exc.strerror}".encode()
        os.write(done_w, answer)
        os._exit(0)
    os.close(go_r)
    os.close(done_w)
    try:
        failed = libc.unshare(flags) != 0
        err = ctypes.get_errno()
        os.write(go_w, b"-" if failed else b"x")
        answer = os.read(done_r, 200)
    finally:
        os.close(go_w)
        os.close(done_r)
        os.waitpid(helper, 0)
    if failed:
        raise OSError(err, f"unshare(user, mount namespaces): {os.strerror(err)}")
    if answer != b"ok":
        raise OSError(0, answer.decode(errors="replace"))


def mount_layer(libc: ctypes.CDLL, lower: str, upper: str, work: str) -> None:
    last = ""
    for options in OPTIONS:
        data = f"lowerdir={lower},upperdir={upper},workdir={work},{options}".encode()
        if libc.mount(b"overlay", lower.encode(), b"overlay", 0, data) == 0:
            return
        err = ctypes.get_errno()
        last = f"overlay mount on {lower}: {os.strerror(err)}"
    raise OSError(0, last)


def drop_capabilities(libc: ctypes.CDLL) -> None:
    """No capability survives into the command, and exec cannot give any back (root included)."""
    for cap in range(64):
        if (
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22
        ):  # EINVAL: past the last
            _check(-1, f"dropping capability {cap}")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    _check(libc.prctl(PR_SET_SECUREBITS, SECURE_ALL_LOCKED, 0, 0, 0), "locking securebits")
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    empty = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; two 32-bit words each
    _check(libc.capset(header, empty), "clearing capabilities")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def _parse(argv: list[str]) -> tuple[bool, list[tuple[str, str, str]], list[str]]:
    pid, layers, i = False, [], 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] == "--pid":
            pid, i = True, i + 1
        elif argv[i] == "--layer" and i + 3 < len(argv):
            layers.append((argv[i + 1], argv[i + 2], argv[i + 3]))
            i += 4
        else:
            raise SystemExit(f"clover: step launcher: bad argument {argv[i]!r}")
    return pid, layers, argv[i + 1 :]


def _supervise(child: int) -> int:
    """Outside the new PID namespace: pass the usual stop signals on, return the child's status."""
    import signal

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda s, _f: os.kill(child, s))
    while True:
        try:
            _pid, status = os.waitpid(child, 0)
        except InterruptedError:
            continue
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        return os.WEXITSTATUS(status)


def run(argv: list[str]) -> int:
    pid, layers, command = _parse(argv)
    if not layers or not command:
        raise SystemExit("clover: step launcher: needs --layer and a command")
    libc = _libc()
    cwd = os.getcwd()
    try:
        enter_namespaces(libc, pid)
        for lower, upper, work in layers:
            mount_layer(libc, lower, upper, work)
        if pid:
            child = os.fork()
            if child:
                return _supervise(child)
            # PID 1 of the new namespace: its own /proc, so only the step's processes are seen
            flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
            _check(libc.mount(b"proc", b"/proc", b"proc", flags, None), "mounting /proc")
            drop_capabilities(libc)
        os.chdir(cwd)  # through the new mount: the old descriptor still points at the real directory
    except OSError as exc:
        print(f"clover: the step boundary could not start: {exc.strerror or exc}", file=sys.stderr)
        return 125
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"clover: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 126 if exc.errno != 2 else 127
    return 127


def probe(base: str) -> int:
    """Mount a throwaway overlay in a child and write through it; 0 when the upper layer saw it."""
    import tempfile

    try:
        root = tempfile.mkdtemp(prefix="clover-probe-", dir=base)
    except OSError as exc:
        print(f"cannot make a layer under {base}: {exc.strerror}", file=sys.stderr)
        return 1
    lower, upper, work = (os.path.join(root, n) for n in ("lower", "upper", "work"))
    for path in (lower, upper, work):
        os.mkdir(path)
    child = os.fork()
    if child == 0:
        try:
            libc = _libc()
            enter_namespaces(libc, False)
            mount_layer(libc, lower, upper, work)
            with open(os.path.join(lower, "probe"), "w") as fh:
                fh.write("x")
            os._exit(0)
        except OSError as exc:
            print(exc.strerror or exc, file=sys.stderr)
            os._exit(1)
    _pid, status = os.waitpid(child, 0)
    ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and os.path.exists(os.path.join(upper, "probe"))
    ok = ok and not os.path.exists(os.path.join(lower, "probe"))
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            os.unlink(os.path.join(dirpath, name))
        for name in dirnames:
            os.rmdir(os.path.join(dirpath, name))
    os.rmdir(root)
    if not ok and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        print("the overlay did not keep the write apart", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--probe"]:
        sys.exit(probe(sys.argv[2] if len(sys.argv) > 2 else "/tmp"))
    sys.exit(run(sys.argv[1:]))
