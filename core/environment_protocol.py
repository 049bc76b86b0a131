"""The Environment protocol (where commands run and files live) and the results it hands back:
a shell command's, a program run's, a path's stat."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable


@dataclass
class ExecResult:
    output: str  # stdout and stderr interleaved, possibly cut to head + tail
    returncode: int
    timed_out: bool = False
    truncated: bool = False
    full_output_path: str | None = None  # where the whole output was spilled when cut
    seconds: float = 0.0
    interrupted: bool = False


@dataclass
class RunResult:
    """A program run through `Environment.run`: stdout apart (bytes, uncut), stderr as text."""

    returncode: int  # 127: the program is not installed there
    stdout: bytes = b""
    stderr: str = ""
    timed_out: bool = False
    # paths it changed in the workspace, thrown away (a run is a check; the step boundary keeps none)
    discarded: tuple[str, ...] = ()


FileKind = Literal["file", "dir", "other"]  # other: FIFO, socket, device: never opened by the tools


@dataclass
class FileStat:
    kind: FileKind
    size: int = 0


@runtime_checkable
class Environment(Protocol):
    """Where commands run and files live; everything a tool needs from it is declared here, so no
    tool asks what kind of environment it has. Paths are absolute or relative to `root`.

    `allowed_roots`: further directories the tools may write (--add-dir); `readable_roots`:
    directories they may only read (spilled command output). `read_file` refuses a non-regular
    file (a FIFO, a device: OSError) instead of blocking; on the user's machine (LocalEnvironment)
    neither it nor `write_file` follows a symlink on the way, and a write replaces the file (a new
    inode: a hard link to it elsewhere keeps its old content). `run` starts one program, no shell
    and no session state, confined exactly as `execute`'s commands are (the same sandbox or
    container), so git and rg see only what the agent's shell sees."""

    root: str
    allowed_roots: list[str]
    readable_roots: list[str]
    # What the environment confines its commands with, each None where it has none (a container's
    # own walls are not these): the bubblewrap sandbox (tools/safety/sandbox.py), the step boundary
    # (tools/safety/boundary.py) and the exec check (tools/safety/execguard.py). The CLI wires them to the agent.
    sandbox: Any
    boundary: Any
    exec_guard: Any
    # A running command's output as it comes (the chat shows its tail); None: nobody listens.
    on_output: Callable[[str], None] | None
    # The variables commands start with where they run on this machine (git's commit identity
    # comes from them); None where they run elsewhere.
    base_env: dict[str, str] | None

    def execute(self, command: str, cwd: str | None = None, timeout: float | None = None) -> ExecResult: ...

    def run(self, argv: list[str], cwd: str | None = None, timeout: float | None = None) -> RunResult: ...

    def read_file(self, path: str) -> bytes: ...

    def write_file(self, path: str, data: bytes) -> None: ...

    def list(self, path: str) -> list[str]: ...

    def list_files(self, base: str) -> list[str]:
        """Files under directory `base`, relative to it, sorted, .gitignore honoured."""
        ...

    def stat(self, path: str) -> FileStat | None:
        """What `path` is (symlinks followed), or None when nothing is there."""
        ...

    def host_root(self) -> str | None:
        """`root` as a directory of this machine when the environment's files are this machine's
        own (sandboxed or not), so Clover may read them in-process (its git reads them with a
        library that runs no program); None when they live elsewhere (a container)."""
        ...

    def written_paths(self) -> set[str] | None:
        """Paths (relative to `root`) the agent's tools and commands wrote here this session;
        None when the environment cannot tell (the git tool then commits only what it is named)."""
        ...
