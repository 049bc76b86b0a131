"""The Model protocol and what crosses it: messages, tool calls, a model's turn and its streamed
events, per-turn options, the settings a backend reads, and a model's declared capabilities.

Messages are OpenAI chat-completions dicts throughout (`role`, `content`, `tool_calls`,
`tool_call_id`); backends convert to whatever their server or template wants. Thinking is never
stored in a message that goes back to the model, only in the trajectory.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from clover.core.environment_protocol import Environment
    from clover.core.stage_protocol import TurnStage

Message = dict[str, Any]
ToolSpec = dict[str, Any]  # {"type": "function", "function": {"name", "description", "parameters"}}


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


class ModelCapabilities:
    """The optional capabilities of a Model, with the defaults of a model that only answers. A
    backend inherits this and overrides what it offers; a wrapper around a model passes each on.

    - `wrap_up`: whether the agent may ask for a last reply without tools at its step limit;
    - `early_answer_redos`: a fix's answers before any edit that the agent redoes as a turn that
      must call a tool;
    - `rolls_back_test_breaks`: `clover fix` rolls back a change that breaks a passing test;
    - `bind_workspace(env)`: the workspace the model may read for grounding its values;
    - `turn_stage()`: what the agent runs after the model's latest turn, or None;
    - `settings`: the run's settings a backend decodes with, None for a model that reads none (a
      script, a wrapper); a bench run gives each decoder's copy of the model its own."""

    wrap_up: bool = True
    early_answer_redos: int = 0
    rolls_back_test_breaks: bool = False
    settings: BackendSettings | None = None

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
    settings: BackendSettings | None

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
