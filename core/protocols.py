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
    """One call the model asked for. `error` is set when the call could not be parsed."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    raw: str = ""
    error: str | None = None

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
    """What every backend reads of the run's settings (the CLI's `Settings` is one). A dataclass: a
    turn's TurnOptions are applied with `dataclasses.replace`. Declared here so the backends depend
    on core, not on the CLI that loads the settings; a backend's own knobs are its own (the local
    decoder's: backends/local_settings.py)."""

    model: str  # "embedded", a checkpoint directory, "scripted:FILE", or a server's model name
    base_url: str | None
    api_key: str | None
    tool_format: str
    request_timeout: float
    context_window: int
    think: bool
    temperature: float | None
    max_tokens: int


# --------------------------------------------------------------------------- turn stage


@dataclass(frozen=True)
class StageCheck:
    """A program a turn stage asks the agent to run as a check (an issue's example against
    candidate edits): the agent's gate decides, the environment runs it (`Environment.run`, behind
    the step boundary: what it writes is thrown away) and the trajectory records it."""

    argv: list[str]
    timeout: float
    purpose: str = ""  # one line for the trajectory and the screen


# the agent's runner of a stage's checks: the run's result, or None when the gate refused it
CheckRunner = Callable[[StageCheck], "RunResult | None"]


@dataclass
class StageDecision:
    """What a turn stage settled about a model turn: its calls as they are to run (an edit chosen
    among candidates), why a call is held back instead of run (None: it runs; the agent answers a
    held call with the reason), and counters for the turn's stats."""

    calls: list[ToolCall]
    held: list[str | None]
    stats: dict[str, float] = field(default_factory=dict)


class TurnStage(Protocol):
    """What a model needs done after a turn beyond answering, run by the agent (agent.py)."""

    def review(
        self, turn: AssistantTurn, messages: list[Message], run_check: CheckRunner | None
    ) -> StageDecision:
        """Settle `turn`'s calls; `run_check` runs a check through the agent (None: none may run)."""
        ...


class ModelCapabilities:
    """The optional capabilities of a Model, with the defaults of a model that only answers. A
    backend inherits this and overrides what it offers; a wrapper around a model passes each on.

    - `wrap_up`: whether the agent may ask for a last reply without tools at its step limit;
    - `early_answer_redos`: a fix's answers before any edit that the agent redoes as a turn that
      must call a tool;
    - `rolls_back_test_breaks`: `clover fix` rolls back a change that breaks a passing test;
    - `bind_workspace(env)`: the workspace the model may read for grounding its values;
    - `turn_stage()`: what the agent runs after the model's latest turn, or None."""

    wrap_up: bool = True
    early_answer_redos: int = 0
    rolls_back_test_breaks: bool = False

    def bind_workspace(self, env: Environment) -> None:
        """Nothing to ground: a model that reads no workspace ignores it."""

    def turn_stage(self) -> TurnStage | None:
        return None


class ModelWrapper(ModelCapabilities):
    """A model around another (the loop guard, the chat's and the headless runs' observers): its
    capabilities are the inner model's, read when asked (one place, not one copy per wrapper)."""

    inner: Model

    @property  # type: ignore[override]
    def wrap_up(self) -> bool:
        return self.inner.wrap_up

    @property  # type: ignore[override]
    def early_answer_redos(self) -> int:
        return self.inner.early_answer_redos

    @property  # type: ignore[override]
    def rolls_back_test_breaks(self) -> bool:
        return self.inner.rolls_back_test_breaks

    def bind_workspace(self, env: Environment) -> None:
        self.inner.bind_workspace(env)

    def turn_stage(self) -> TurnStage | None:
        return self.inner.turn_stage()


@runtime_checkable
class Model(Protocol):
    """A model answers turns; the capabilities beyond that are declared here with their defaults
    in ModelCapabilities, which backends inherit (see it for what each means)."""

    name: str
    context_window: int
    wrap_up: bool
    early_answer_redos: int
    rolls_back_test_breaks: bool

    def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        on_event: EventHandler | None = None,
        options: TurnOptions | None = None,
    ) -> AssistantTurn: ...

    def bind_workspace(self, env: Environment) -> None: ...

    def turn_stage(self) -> TurnStage | None: ...


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
    # What the environment confines its commands with, each None where it has none (a container's
    # own walls are not these): the bubblewrap sandbox (tools/sandbox.py), the step boundary
    # (tools/boundary.py) and the exec check (tools/execguard.py). The CLI wires them to the agent.
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


# --------------------------------------------------------------------------- tools


@dataclass
class ToolResult:
    """What a call did: `output` is the text the model sees; the fields beside it say the same in
    structured form, for the parts of Clover that act on it (nothing parses `output` back)."""

    output: str
    is_error: bool = False
    # For renderers, not for the model: e.g. {"diff": "...", "path": "..."}.
    data: dict[str, Any] = field(default_factory=dict)
    # Workspace paths (as the tool shows them) this call changed: an edit's file, a commit's files.
    paths: tuple[str, ...] = ()
    exit_code: int | None = None  # the command's exit status, for a call that ran one
    edited: bool = False  # a file tool changed a file (a fix may answer after one)
    # For each line of `output`, the workspace files it shows (a search hit's, a diff section's);
    # empty for a line of none, and for a result that does not say (read rules screen by it).
    line_files: tuple[tuple[str, ...], ...] = ()


# A tool message's key (beside OpenAI's) for the paths the call edited, so the model layer can say
# what was changed (decoding/competence.py) without reading the text back; backends do not send it.
EDITED_KEY = "edited"


# What a tool does, which decides how permissions treat it: "read" only reads files (plan mode
# runs it; `read(...)` rules cover its path), "edit" changes files through the file tools
# (`edit(...)` rules; auto-edit allows it), "run" runs shell commands (`bash(...)` rules), "git"
# reads the repository or commits (per call: `is_read_only`), "other" anything else.
ToolKind = Literal["read", "edit", "run", "git", "other"]


@runtime_checkable
class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    kind: ToolKind

    def run(self, args: dict[str, Any], env: Environment) -> ToolResult: ...

    def is_read_only(self, args: dict[str, Any]) -> bool:
        """Whether this call cannot change files or run commands: a "read" tool's calls. A tool
        whose answer depends on the call (git: status reads, commit writes) overrides it."""
        return self.kind == "read"


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
    """The backend failed (unreachable server, bad key): `str(exc)` is one line for the user.
    `context_overflow`: the prompt did not fit the model's context (the chat compacts and retries)."""

    exit_status = "model_error"
    context_overflow = False


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
