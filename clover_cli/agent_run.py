"""What bounds one agent run (Limits, and StepLimit: the stop the step limit raises, after which a
wrap-up turn may still answer) and what the run hands back (RunResult)."""

from __future__ import annotations

from dataclasses import dataclass, field

from clover.core.stops import LimitsExceeded


class StepLimit(LimitsExceeded):
    """The step limit ended the run (a wrap-up turn may still answer the user)."""


@dataclass
class Limits:
    max_steps: int = 50
    time_limit: float = 3600.0
    token_limit: int = 2_000_000
    max_format_errors: int = 3  # in a row: malformed calls, or replies with neither answer nor call
    max_repeats: int = 3  # the same call in a row: flagged at this count, the run stops after it
    wrap_up: bool = (
        True  # at the step limit, one more turn without tools (where the model's `wrap_up` allows)
    )
    # a fix: an answer before any file was edited is redone, up to this many times per run, as a
    # turn that must call a tool (TurnOptions tool_choice "required"); the answers it replaces
    # stay in the trajectory
    early_answer_redos: int = 0


@dataclass
class RunResult:
    exit_status: str
    final_text: str = ""
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    model_seconds: float = 0.0
    error: str = ""
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens
