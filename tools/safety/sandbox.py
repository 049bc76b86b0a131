"""OS sandbox for shell commands and the programs tools run (git, rg), using bubblewrap (bwrap).

Inside: the whole file system read-only, the workspace (and any --add-dir) writable (read-only too
for plan mode's commands), fresh /dev, its own PID namespace with a fresh /proc (no
/proc/<pid>/root of a host process to write through; every process in it dies with the command:
bwrap is its init and --die-with-parent ties that to Clover), a new session (no TIOCSTI into the
terminal), no network unless allowed (a new network namespace with only a down loopback), and
the host's service sockets hidden (all of /run without the network; with it the well-known ones:
Docker, D-Bus, /run/user's session bus and agents, databases).

The user's secrets stay out: the home directory is replaced by an empty one (the user's git name
and e-mail copied in, PATH entries under home and the paths `home_paths` lists shown read-only),
so ~/.netrc, ~/.aws, ~/.ssh, browser profiles and keyrings cannot be read. /tmp and the home are
private to the session: one host directory each, shared by the session's commands and removed
when Clover exits; `changes()` lists what a command wrote there (it never reaches the host's /tmp
or home), for the tool result.
`Sandbox(root)` is LocalEnvironment's `wrap_command(argv) -> argv` hook (it is callable).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence

_SCAN_LIMIT = 3000  # entries looked at per private directory when listing what a command wrote


class SandboxUnavailable(Exception):
    """bwrap is missing or cannot create namespaces here; the message says which."""


@functools.lru_cache(maxsize=1)
def _probe() -> str | None:
    """None when bwrap works; otherwise why not (cached: the answer does not change)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (bwrap) is not installed"
    try:
        proc = subprocess.run(
            [
                exe,
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--unshare-pid",
                "--proc",
                "/proc",
                "--unshare-net",
                "--",
                "true",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        )
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
    def __init__(
        self,
        root: str,
        writable: Sequence[str] = (),
        network: bool = False,
        private_tmp: bool = True,
        hide_home: bool = True,
        home_paths: Sequence[str] = (),
    ):
        reason = _probe()
        if reason is not None:
            raise SandboxUnavailable(reason)
        self.bwrap = shutil.which("bwrap") or "bwrap"
        self.root = os.path.realpath(root)
        self.writable = [os.path.realpath(p) for p in (self.root, *writable)]
        self.network = network
        self.private_tmp = private_tmp
        home = os.path.realpath(os.path.expanduser("~"))
        self.home = home if hide_home and home != "/" and os.path.isdir(home) else None
        self.home_paths = [os.path.realpath(os.path.join(home, os.path.expanduser(p))) for p in home_paths]
        self._session: str | None = None

    # ------------------------------------------------------------------ the session's private dirs

    @property
    def session_dir(self) -> str:
        """Created on first use: tmp/ (the sandbox's /tmp) and home/ (its home), gone at exit."""
        if self._session is None:
            self._session = tempfile.mkdtemp(prefix="clover-sandbox-")
            os.mkdir(os.path.join(self._session, "tmp"), 0o1777)
            os.chmod(os.path.join(self._session, "tmp"), 0o1777)
            os.mkdir(os.path.join(self._session, "home"), 0o700)
            _copy_git_identity(os.path.join(self._session, "home"))
            atexit.register(self.close)
        return self._session

    def close(self) -> None:
        if self._session is not None:
            shutil.rmtree(self._session, ignore_errors=True)
            self._session = None

    def _private(self) -> list[tuple[str, str]]:
        """(host directory, the path the sandbox shows it at)."""
        out = []
        if self.private_tmp:
            out.append((os.path.join(self.session_dir, "tmp"), "/tmp"))
        if self.home is not None:
            out.append((os.path.join(self.session_dir, "home"), "~"))
        return out

    def snapshot(self) -> dict[str, tuple[int, int]]:
        """Files in the private /tmp and home: shown path -> (size, mtime)."""
        found: dict[str, tuple[int, int]] = {}
        for host, shown in self._private():
            count = 0
            for dirpath, dirnames, filenames in os.walk(host):
                for name in filenames:
                    count += 1
                    if count > _SCAN_LIMIT:
                        break
                    path = os.path.join(dirpath, name)
                    with contextlib.suppress(OSError):
                        st = os.lstat(path)
                        found[shown + path[len(host) :]] = (st.st_size, st.st_mtime_ns)
                if count > _SCAN_LIMIT:
                    dirnames.clear()
        return found

    def changes(self, before: dict[str, tuple[int, int]]) -> str | None:
        """One line for the tool result saying what a command wrote to the private /tmp or home:
        the paths when there are a few, else how many under each and the folders they sit in (a
        test run writes hundreds of temporary files; the model needs the fact, not the list)."""
        after = self.snapshot()
        written = sorted(p for p, v in after.items() if before.get(p) != v)
        if not written:
            return None
        keep = "kept for this session's later commands, deleted when Clover exits"
        if len(written) <= 5:
            return f"[sandbox: wrote {', '.join(written)} in the sandbox's private /tmp or home; {keep}]"
        parts = []
        for root, first, then in (
            ("/tmp", "under the sandbox's private /tmp", "under its /tmp"),
            ("~", "in the sandbox's private home", "in its home"),
        ):
            mine = [p[len(root) + 1 :] for p in written if p.startswith(root + "/")]
            if not mine:
                continue
            # Where they are: the two most crowded top-level folders (or files), the rest counted.
            tops = Counter(p.split("/", 1)[0] + ("/..." if "/" in p else "") for p in mine)
            where = ", ".join(name for name, _ in tops.most_common(2))
            where += f" and {len(tops) - 2} more" if len(tops) > 2 else ""
            # The snapshot stops counting at _SCAN_LIMIT files per folder: the count is then a floor.
            capped = sum(1 for p in after if p.startswith(root + "/")) >= _SCAN_LIMIT
            count = f"{'at least ' if capped else ''}{len(mine)}"
            noun = "file" if len(mine) == 1 else "files"
            parts.append(
                f"{count} {noun} written {first} ({where})" if not parts else f"{count} {then} ({where})"
            )
        return f"[sandbox: {', '.join(parts)}; {keep}]"

    # ------------------------------------------------------------------ the bwrap command line

    def wrap_command(self, argv: Sequence[str], read_only: bool = False) -> list[str]:
        args = [
            self.bwrap,
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--unshare-pid",
            "--unshare-ipc",
            "--proc",
            "/proc",
        ]
        # A read-only mount does not stop connect() on a host service's socket: hide them. Without
        # the network nothing in /run is needed (with it, resolv.conf may point into /run).
        hidden = ["/run"] if not self.network else _HOST_SOCKETS
        for sock in sorted({os.path.realpath(s) for s in hidden if os.path.exists(s)}):
            args += ["--tmpfs", sock] if os.path.isdir(sock) else ["--ro-bind", "/dev/null", sock]
        if self.private_tmp:
            args += ["--bind", os.path.join(self.session_dir, "tmp"), "/tmp", "--setenv", "TMPDIR", "/tmp"]
        # Mounts over the private /tmp and home, parents before children (a workspace under the
        # home stays visible; a home under the workspace stays hidden).
        mounts: list[tuple[str, list[str]]] = []
        if self.home is not None:
            mounts.append((self.home, ["--bind", os.path.join(self.session_dir, "home"), self.home]))
        shown = _visible_tools(argv, self._hidden_roots(), self.home)
        for path in shown + [p for p in self.home_paths if os.path.exists(p)]:
            mounts.append((path, ["--ro-bind", path, path]))
        for secret in (os.path.join(self.home, s) for s in _TOOL_SECRETS) if self.home else ():
            inside = any(secret.startswith(d + "/") for d in shown)
            if inside and os.path.isfile(secret) and secret not in self.home_paths:
                mounts.append((secret, ["--ro-bind", "/dev/null", secret]))
        for path in self.writable:
            if os.path.exists(path):
                mounts.append((path, ["--ro-bind" if read_only else "--bind", path, path]))
        for _, mount in sorted(mounts, key=lambda m: m[0].rstrip("/").count("/")):
            args += mount
        if not self.network:
            args += ["--unshare-net"]
        # no --chdir: bwrap keeps the caller's working directory (a subdirectory of the workspace)
        args += ["--die-with-parent", "--new-session", "--", *argv]
        return args

    def __call__(self, argv: Sequence[str], read_only: bool = False) -> list[str]:
        return self.wrap_command(argv, read_only)

    def _hidden_roots(self) -> list[str]:
        roots = ["/tmp"] if self.private_tmp else []
        return roots + ([self.home] if self.home else [])


_HOST_SOCKETS = (
    "/run/user",
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/containerd",
    "/run/podman",
    "/var/run/dbus",
    "/run/dbus",
    "/run/postgresql",
    "/run/mysqld",
    "/run/snapd.socket",
)


def _visible_tools(argv: Sequence[str], hidden: list[str], home: str | None) -> list[str]:
    """Directories under the hidden /tmp or home that commands need to run: this Python's prefixes
    (the exec check's launcher runs on it), PATH entries and the program itself; outermost first,
    without nested repeats. A PATH entry under the home brings its tool's directory (~/.pyenv,
    ~/.cargo, a venv), read-only; for ~/.local only bin/ and lib/ (share/ holds keyrings)."""
    candidates = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.abspath(__file__))]
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        entry = os.path.realpath(entry) if entry else ""
        candidates.append(entry)
        parent = os.path.dirname(entry)
        if entry.endswith("/bin") and os.path.exists(os.path.join(parent, "pyvenv.cfg")):
            candidates.append(parent)
        if home and entry.startswith(home + "/"):
            top = os.path.join(home, entry[len(home) + 1 :].split("/", 1)[0])
            if os.path.basename(top) == ".local":
                candidates.append(os.path.join(top, "lib"))
            elif os.path.basename(top).startswith(".") and os.path.basename(top) not in _NOT_TOOL_DIRS:
                candidates.append(top)
    if argv and os.path.isabs(argv[0]):
        candidates.append(os.path.dirname(argv[0]))
    found: list[str] = []
    for path in sorted({os.path.realpath(c) for c in candidates if c}, key=len):
        inside = any(path.startswith(h.rstrip("/") + "/") for h in hidden)
        if inside and os.path.isdir(path) and not any(path.startswith(f + "/") for f in found):
            found.append(path)
    return found


# Home directories that hold configuration or keys, never a whole tool: only a PATH entry in them shows.
_NOT_TOOL_DIRS = {
    ".config",
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".mozilla",
    ".password-store",
}
# Credentials kept inside tool directories that are otherwise shown (hidden behind /dev/null).
_TOOL_SECRETS = (".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials")


def _copy_git_identity(home: str) -> None:
    """The user's git name and e-mail (nothing else of their git config: no aliases, helpers or
    includes) into the sandbox's home, so commits made inside it have an author."""
    lines = []
    for key in ("user.name", "user.email"):
        try:
            proc = subprocess.run(
                ["git", "config", "--global", "--get", key],
                capture_output=True,
                text=True,
                timeout=10,
                env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
            )
        except (OSError, subprocess.TimeoutExpired):
            return
        value = proc.stdout.strip()
        if proc.returncode == 0 and value and "\n" not in value:
            lines.append(f"\t{key.split('.')[1]} = {_git_quote(value)}")
    if lines:
        with open(os.path.join(home, ".gitconfig"), "w", encoding="utf-8") as fh:
            fh.write("[user]\n" + "\n".join(lines) + "\n")


def _git_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def make_wrapper(
    root: str, writable: Sequence[str] = (), network: bool = False, home_paths: Sequence[str] = ()
) -> Sandbox:
    """The hook for LocalEnvironment(wrap_command=...); raises SandboxUnavailable if bwrap cannot run."""
    return Sandbox(root, writable, network, home_paths=home_paths)
