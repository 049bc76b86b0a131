"""The turn stage protocol: what a model asks the agent to do after a turn beyond answering (settle
its calls, run checks through the agent's gate), and the decision it hands back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from clover.core.environment_protocol import RunResult
    from clover.core.model_protocol import AssistantTurn, Message, ToolCall


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
