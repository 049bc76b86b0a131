"""The three protocols everything plugs into (Model, Environment, Tool) and their data types.

Messages are OpenAI chat-completions dicts throughout (`role`, `content`, `tool_calls`,
`tool_call_id`); backends convert to whatever their server or template wants. Thinking is never
stored in a message that goes back to the model, only in the trajectory.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Message = dict[str, Any]
ToolSpec = dict[str, Any]  # {"type": "function", "function": {"name", "description", "parameters"}}


# --------------------------------------------------------------------------- model


@dataclass
class ToolCall:
    """One call the model asked for. `error` is set when the call could not be parsed; `held` when
    the backend holds it back (it would undo a fix the issue's reproduction confirms): the agent
    answers with that reason instead of running it."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    raw: str = ""
    error: str | None = None
    held: str | None = None

    def to_message(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments, ensure_ascii=False)},
        }


@dataclass
class AssistantTurn:
    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    # Backend-specific counters, e.g. {"forwards": 12, "tokens_per_forward": 3.1, "tok_per_s": 40.0}.
    stats: dict[str, float] = field(default_factory=dict)
    finish_reason: str = ""

    def to_message(self) -> Message:
        """The turn as it goes back to the model: answer and tool calls, no thinking."""
        msg: Message = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            msg["tool_calls"] = [c.to_message() for c in self.tool_calls]
        return msg


EventKind = Literal["thinking", "text", "tool_call", "block_round", "usage", "status"]


@dataclass
class StreamEvent:
    """A streamed piece of a turn.

    thinking / text: `text` is the delta. tool_call: `data` = {"name", "arguments"}.
    block_round (diffusion decoder): `data` = {"tokens": [str | None, ...] (None = still masked),
    "block": int, "round": int}. usage / status: counters in `data`.
    """

    kind: EventKind
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)


EventHandler = Callable[[StreamEvent], None]


@dataclass(frozen=True)
class TurnOptions:
    """What a caller may change for one turn, on any backend; None keeps the backend's setting.
    (`clover serve` takes them per request, the chat's /think per session.)"""

    think: bool | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    tool_choice: str | None = (
        None  # "none": answer without calling a tool (the tools stay listed); "required": call one
    )

    def overrides(self) -> dict[str, Any]:
        return {
            k: v
            for k, v in (
                ("think", self.think),
                ("max_tokens", self.max_tokens),
                ("temperature", self.temperature),
            )
            if v is not None
        }


class BackendSettings(Protocol):
    """What a backend reads of the run's settings (the CLI's `Settings` is one). A dataclass: a turn's
    TurnOptions are applied with `dataclasses.replace`. Declared here so the backends depend on
    core, not on the CLI that loads the settings."""

    model: str  # "embedded", a checkpoint directory, "scripted:FILE", or a server's model name
    base_url: str | None
    api_key: str | None
    tool_format: str
    request_timeout: float
    context_window: int
    think: bool
    temperature: float | None
    max_tokens: int
    # local decoding
    block_size: int
    threshold: float
    decode_order: str
    device: str | None
    quantize: str
    threads: int
    grounded: bool
    copy_bias: float
    drafts: int
    fused_rounds: bool
    edit_repairs: str
    grounded_spans: str


@runtime_checkable
class Model(Protocol):
    """Optional: `wrap_up` (bool, default True), whether the agent may ask for a last reply without
    tools at its step limit; a wrapper around a model passes it on."""

    name: str
    context_window: int

    def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        on_event: EventHandler | None = None,
        options: TurnOptions | None = None,
    ) -> AssistantTurn: ...


@runtime_checkable
class ServedModel(Protocol):
    """A model a server serves (backends/openai_compat.py): it lists the server's models (None:
    the server does not say) and says where its context size was read ('' when not read)."""

    window_source: str

    def served_models(self) -> list[str] | None: ...


# --------------------------------------------------------------------------- environment


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


# --------------------------------------------------------------------------- tools


@dataclass
class ToolResult:
    output: str
    is_error: bool = False
    # For renderers, not for the model: e.g. {"diff": "...", "path": "..."}.
    data: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    read_only: bool  # True: cannot change files or run commands (allowed in plan mode)

    def run(self, args: dict[str, Any], env: Environment) -> ToolResult: ...

    def is_read_only(self, args: dict[str, Any]) -> bool:
        """Whether this call cannot change files or run commands. Tools that subclass Tool inherit
        `read_only`; a tool whose answer depends on the call (git: status reads, commit writes)
        overrides it."""
        return self.read_only


def tool_spec(tool: Tool) -> ToolSpec:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


# Permission modes, strictest first (tools/permissions.py enforces them; the settings choose one).
MODES = ("plan", "ask", "auto-edit", "yolo")


# --------------------------------------------------------------------------- control flow


class AgentStop(Exception):
    """Ends a run; `exit_status` names why."""

    exit_status = "error"


class Submitted(AgentStop):
    exit_status = "submitted"


class LimitsExceeded(AgentStop):
    exit_status = "limits_exceeded"


class FormatError(AgentStop):
    exit_status = "format_error"


class RepeatedCalls(AgentStop):
    exit_status = "repeated_calls"


class Interrupted(AgentStop):
    exit_status = "interrupted"


class ModelError(AgentStop):
    """The backend failed (unreachable server, bad key): `str(exc)` is one line for the user."""

    exit_status = "model_error"
    context_overflow = False  # the server refused the request as too long for its context


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C's KeyboardInterrupt would be, so a run it stops ends as
    an interrupted one does (the running command's processes killed, the step recorded, the result
    printed), then exits 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_status(self) -> str:
        import signal

        return "hung_up" if self.signum == signal.SIGHUP else "terminated"

    def __str__(self) -> str:
        import signal

        return f"stopped by {signal.Signals(self.signum).name}"
