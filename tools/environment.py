"""LocalEnvironment: commands run as `bash -c` on this machine, files live on its disk.

Each command is its own process (a fresh process group, so a timeout or Ctrl-C can kill every
descendant), but it behaves like one long shell session: an EXIT trap saves the working directory
and the exported variables to an inherited file descriptor, and the next command starts from them.

Commands get an allowlisted environment (tools/safety/commandenv.py), run in the sandbox when one is
given (tools/safety/sandbox.py) and, with an exec guard (tools/safety/execguard.py), every program they start
is checked as it starts; what the check refused and what the sandbox kept private are added to
the output.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import IO

from clover.core.environment_protocol import ExecResult, FileStat, RunResult
from clover.tools import safeio
from clover.tools.listing import MAX_FILES, git_listing, walk_plain
from clover.tools.outputcut import OutputSink, pump
from clover.tools.safety import leftovers
from clover.tools.safety.boundary import StepBoundary
from clover.tools.safety.commandenv import command_environment
from clover.tools.safety.execguard import ExecGuard, ExecSession
from clover.tools.safety.overlay import StepView
from clover.tools.safety.sandbox import Sandbox

_SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")  # writable by any command, in or out of the sandbox
_DROP_VARS = {"SHLVL", "_", "PWD"}  # bash sets these itself; carrying them over only confuses it


def _exec_note(text: str) -> str:
    return text if text.startswith("[") else f"[exec check: {text}]"


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


class LocalEnvironment:
    """The Environment protocol on this machine."""

    def __init__(
        self,
        root: str,
        *,
        allowed_roots: Sequence[str] = (),
        timeout: float = 120,
        output_limit: int = 16000,
        spill_dir: str | None = None,
        env: dict[str, str] | None = None,
        wrap_command: Callable[[list[str]], list[str]] | None = None,
        exec_guard: ExecGuard | None = None,
        pass_env: Sequence[str] = (),
        boundary: StepBoundary | None = None,
    ) -> None:
        self.root = os.path.realpath(root)
        self.timeout = timeout
        self.output_limit = output_limit
        # Created on the first spill. A readable (not writable) root: file tools can read spilled output.
        self.spill_dir = spill_dir or os.path.join(
            tempfile.gettempdir(), f"clover-output-{uuid.uuid4().hex[:12]}"
        )
        if spill_dir is None:  # ours: gone when the process ends
            atexit.register(shutil.rmtree, self.spill_dir, ignore_errors=True)
        self.allowed_roots = list(allowed_roots)
        self.readable_roots = [self.spill_dir]
        self.wrap_command = wrap_command
        self.sandbox = wrap_command if isinstance(wrap_command, Sandbox) else None
        self.exec_guard = exec_guard
        self.boundary = boundary  # commands see a copy-on-write view; what they change is settled there
        self._written: set[str] = set()  # what the agent's tools and commands wrote (written_paths)
        # Only an allowlist of the user's environment reaches commands (tools/safety/commandenv.py).
        base = command_environment(os.environ, pass_env, self.root) if env is None else dict(env)
        # Agents cannot answer pagers or credential prompts.
        for key, value in (("PAGER", "cat"), ("GIT_PAGER", "cat"), ("GIT_TERMINAL_PROMPT", "0")):
            base.setdefault(key, value)
        self.base_env = base
        self.cwd = self.root
        self._saved_env: dict[str, str] | None = None
        self.on_output: Callable[[str], None] | None = (
            None  # a running command's output, live (the chat's tail)
        )

    # ------------------------------------------------------------------ commands

    @staticmethod
    def _script(command: str, fd: int) -> str:
        # The EXIT trap writes the exported variables and the cwd to an inherited descriptor (not a
        # path), so it works inside any sandbox that `wrap_command` builds.
        save = (
            "__clover_save() { local __n; for __n in $(compgen -e); do "
            'printf \'%s=%s\\0\' "$__n"  "${!__n}"; done; printf \'\\0%s\' "$PWD"; } >&' + str(fd) + "; "
            "trap '__clover_rc=$?; __clover_save 2>/dev/null; exit $__clover_rc' EXIT"
        )
        return save + "\n" + command + "\n"

    def _load_state(self, raw: bytes, keep_cwd: bool) -> None:
        text = raw.decode("utf-8", "surrogateescape")
        if "\0\0" not in text and not text.startswith("\0"):
            return  # the trap never ran (e.g. the shell was replaced by exec)
        env_part, _, cwd = text.rpartition("\0")
        saved = {}
        for item in env_part.split("\0"):
            name, sep, value = item.partition("=")
            if sep and name and name not in _DROP_VARS:
                saved[name] = value
        self._saved_env = saved
        if keep_cwd and os.path.isdir(cwd):
            self.cwd = cwd

    def execute(self, command: str, cwd: str | None = None, timeout: float | None = None) -> ExecResult:
        """Run `command`; `cwd` (relative to root) applies to this command only."""
        with tempfile.TemporaryFile() as state:
            return self._run(command, cwd, self.timeout if timeout is None else timeout, state)

    def _run(self, command: str, cwd: str | None, timeout: float, state: IO[bytes]) -> ExecResult:
        workdir = self._abs(cwd) if cwd else self.cwd
        if not os.path.isdir(workdir):
            workdir = self.root
        env = dict(self.base_env if self._saved_env is None else self._saved_env)
        prepared = self._prepare(command, env, state)
        if isinstance(prepared, ExecResult):
            return prepared
        argv, session, view, read_only = prepared
        before = self.sandbox.snapshot() if self.sandbox is not None else None
        # no PID namespace around the command: what it leaves running is found and killed after it
        loose = self.sandbox is None and view is None and leftovers.adopt_orphans()
        started = leftovers.now_ticks() if loose else 0
        sink = OutputSink(self.output_limit, self.spill_dir)
        sink.listener = self.on_output
        read_fd, write_fd = os.pipe()
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
                pass_fds=(state.fileno(), *(session.pass_fds if session else ())),
            )
        except OSError as exc:
            os.close(read_fd)
            if session is not None:
                session.spawned()
                session.close()
            if view is not None:
                view.close()
            return ExecResult(output=f"could not start the command: {exc}", returncode=127)
        finally:
            os.close(write_fd)
        if session is not None:
            session.spawned()
        # A thread drains the pipe, so background jobs that keep it open never block or die of SIGPIPE.
        reader = threading.Thread(target=pump, args=(read_fd, sink), daemon=True)
        reader.start()
        timed_out = self._wait(proc, session, view, timeout)
        # Background jobs may hold the pipe open: give them a moment to finish, not more; then
        # they go with the command (a job that escaped the group with setsid is left to the
        # sandbox's PID namespace, which ends with the command).
        reader.join(timeout=2.0 if timed_out else 0.5)
        _kill_group(proc)
        notes = []
        if loose and (killed := leftovers.kill_leftovers(started, group=proc.pid)):
            reader.join(timeout=0.5)
            notes = [f"[killed {len(killed)} process(es) the command left running: {', '.join(killed[:5])}]"]
        output, truncated, spill_path = sink.render()
        notes = (session.close() if session is not None else []) + notes + self._settle(view, before)
        if notes:
            output = (
                output.rstrip("\n")
                + ("\n" if output.strip() else "")
                + "\n".join(_exec_note(n) for n in notes)
            )
        seconds = time.monotonic() - start
        if timed_out:
            output += f"\n[command timed out after {timeout:g}s; its process group was killed]"
            return ExecResult(output, -9, True, truncated, spill_path, seconds)
        state.seek(0)
        self._load_state(state.read(), keep_cwd=cwd is None)
        return ExecResult(output, proc.returncode, False, truncated, spill_path, seconds)

    def _prepare(
        self, command: str, env: dict[str, str], state: IO[bytes]
    ) -> tuple[list[str], ExecSession | None, StepView | None, bool] | ExecResult:
        """The command line inside the exec check, the sandbox and the step boundary (each where
        it is on), or the ExecResult that says why the command does not run."""
        argv = ["bash", "-c", self._script(command, state.fileno())]
        session: ExecSession | None = None
        read_only = False
        if self.exec_guard is not None:
            grant = self.exec_guard.grant_for(command)
            read_only = grant.read_only
            if read_only and self.sandbox is None:
                return ExecResult(
                    "not run: this command may only run read-only, and there is no sandbox to make it so", 126
                )
            if self.exec_guard.check:
                grant.writable = [self.root, *self.allowed_roots, *_SCRATCH]
                session = self.exec_guard.session(grant, env.get("PATH", os.defpath))
                argv = session.wrap(argv)
        if self.sandbox is not None:
            argv = self.sandbox.wrap_command(argv, read_only=read_only)
        elif self.wrap_command is not None:
            argv = self.wrap_command(argv)
        view = None
        if self.boundary is not None and not read_only:
            try:
                view = self.boundary.start()
            except OSError as exc:
                if session is not None:
                    session.close()
                return ExecResult(f"not run: the step boundary could not start: {exc.strerror or exc}", 126)
            argv = view.launcher_argv(argv)
        return argv, session, view, read_only

    def _wait(
        self, proc: subprocess.Popen, session: ExecSession | None, view: StepView | None, timeout: float
    ) -> bool:
        """Wait for the command (the exec check answers its questions meanwhile); True: timed out,
        its group killed. Ctrl-C kills it and keeps (records) what it did before the stop."""
        try:
            if session is not None:
                timed_out = session.wait(proc, timeout)
            else:
                proc.wait(timeout=timeout)
                timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        except KeyboardInterrupt:
            _kill_group(proc)
            if session is not None:
                session.close()
            if view is not None:
                self.boundary.settle(view, keep=True, ask=False)  # type: ignore[union-attr]
            raise
        if timed_out:
            _kill_group(proc)
        return timed_out

    def _settle(self, view: StepView | None, before: object) -> list[str]:
        """End the step: its changes applied (and recorded) through the boundary; the notes that
        say what it did beyond the workspace."""
        notes: list[str] = []
        if view is not None:
            report = self.boundary.settle(view, keep=True)  # type: ignore[union-attr]
            self._written.update(p for p in report.applied if not p.startswith("/"))
            notes += report.notes()
        if before is not None and (wrote := self.sandbox.changes(before)):  # type: ignore[union-attr]
            notes.append(wrote)
        return notes

    # ------------------------------------------------------------------ files

    def _abs(self, path: str) -> str:
        path = os.path.expanduser(path)
        return path if os.path.isabs(path) else os.path.join(self.root, path)

    def _bases(self) -> list[str]:
        """Trusted starting points for no-follow opens: the roots, resolved once."""
        return [self.root, *(os.path.realpath(r) for r in (*self.allowed_roots, *self.readable_roots))]

    def read_file(self, path: str) -> bytes:
        return safeio.read_bytes(os.path.abspath(self._abs(path)), self._bases())

    def write_file(self, path: str, data: bytes) -> None:
        full = os.path.abspath(self._abs(path))
        safeio.write_bytes(full, data, self._bases())
        if full.startswith(self.root + os.sep):
            self._written.add(os.path.relpath(full, self.root).replace(os.sep, "/"))

    def written_paths(self) -> set[str] | None:
        """Known exactly where the step boundary settles commands; without it a command's writes
        are not followed (None)."""
        return set(self._written) if self.boundary is not None else None

    def stat(self, path: str) -> FileStat | None:
        try:
            info = os.stat(self._abs(path))
        except (OSError, ValueError):
            return None
        kind = "dir" if stat.S_ISDIR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other"
        return FileStat(kind, info.st_size)  # type: ignore[arg-type]

    def host_root(self) -> str | None:
        return self.root

    def list_files(self, base: str) -> list[str]:
        base = self._abs(base)
        listed = git_listing(self.run, base)
        if listed is None:
            return walk_plain(base)[:MAX_FILES]
        # --cached still lists files deleted from the work tree; submodules show up as directories.
        return [n for n in listed if os.path.isfile(os.path.join(base, n))][:MAX_FILES]

    def run(self, argv: list[str], cwd: str | None = None, timeout: float | None = None) -> RunResult:
        """One program, wrapped like every command (the sandbox and the deny rules apply), its
        group killed after. It is a check, not a change (a search, the tests, an example run):
        behind the step boundary whatever it writes in the workspace is thrown away, and said."""
        if shutil.which(argv[0], path=self.base_env.get("PATH", os.defpath)) is None:
            return RunResult(127, b"", f"{argv[0]}: command not found")
        wrapped = list(argv)
        session = None
        if (
            self.exec_guard is not None and self.exec_guard.check
        ):  # the deny rules hold (a probe runs user code)
            session = self.exec_guard.session(
                self.exec_guard.grant_for(""), self.base_env.get("PATH", os.defpath)
            )
            wrapped = session.wrap(wrapped)
        wrapped = self.wrap_command(wrapped) if self.wrap_command is not None else wrapped
        view = None
        if self.boundary is not None:
            try:
                view = self.boundary.start()
            except OSError as exc:
                if session is not None:
                    session.close()
                return RunResult(
                    126, b"", f"not run: the step boundary could not start: {exc.strerror or exc}"
                )
            wrapped = view.launcher_argv(wrapped)
        timeout = self.timeout if timeout is None else timeout
        try:
            proc = subprocess.Popen(
                wrapped,
                cwd=self._abs(cwd) if cwd else self.root,
                env=self.base_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=session.pass_fds if session else (),
            )
        except OSError as exc:
            if view is not None:
                view.close()
            return RunResult(127, b"", f"{argv[0]}: {exc.strerror or exc}")
        finally:
            if session is not None:
                session.spawned()
        discarded: tuple[str, ...] = ()
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            return RunResult(-9, out, err.decode("utf-8", "replace"), timed_out=True)
        finally:
            _kill_group(proc)
            notes = session.close() if session is not None else []
            if view is not None:
                report = self.boundary.settle(view, keep=False)  # type: ignore[union-attr]
                discarded = tuple(report.discarded)
                notes += report.notes()
        text = err.decode("utf-8", "replace") + "".join(_exec_note(n) + "\n" for n in notes)
        return RunResult(proc.returncode, out, text, discarded=discarded)

    def list(self, path: str) -> list[str]:
        """Entry names of a directory, sorted; directories end with '/'."""
        with os.scandir(self._abs(path)) as entries:
            return sorted(e.name + "/" if e.is_dir() else e.name for e in entries)
