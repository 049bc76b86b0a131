"""The status line after each request (its tokens, time, forwards, speed) and the session's totals
that `/status` adds (saved with the session, so a resumed one goes on counting). Each part has a
priority: on a narrow terminal the lowest go first and the line never wraps (one_line.fit_parts)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from clover.agent_run import RunResult
from clover.core.model_protocol import ServedModel

if TYPE_CHECKING:
    from clover.core.model_protocol import Model
    from clover.repl.render import Renderer
    from clover.repl.state import ChatState

Part = tuple[str, int]  # (text, priority: higher stays longer)


def run_parts(result: RunResult) -> list[Part]:
    parts = [(f"{result.tokens:,} tok", 6), (f"{result.seconds:.1f}s", 7)]
    forwards = result.stats.get("forwards", 0)
    if forwards:
        parts.append((f"{forwards:.0f} fwd · {result.completion_tokens / forwards:.2f} tok/fwd", 3))
        forced = result.stats.get("grammar_tokens", 0)  # placed by the tool grammar, no forward
        if forced:
            parts.append(
                (f"{(result.completion_tokens - forced) / forwards:.2f} without {forced:.0f} forced", 1)
            )
    if result.model_seconds >= 0.2 and result.completion_tokens:
        parts.append((f"{result.completion_tokens / result.model_seconds:.1f} tok/s", 4))
    return parts


@dataclass
class Totals:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    model_seconds: float = 0.0
    forwards: float = 0.0

    @classmethod
    def from_saved(cls, data: dict[str, Any]) -> Totals:
        known = {f.name for f in dataclasses.fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except TypeError:  # a damaged file: counting starts again
            return cls()

    def to_saved(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def add(self, result: RunResult) -> None:
        self.requests += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.seconds += result.seconds
        self.model_seconds += result.model_seconds
        self.forwards += result.stats.get("forwards", 0.0)

    def line(self) -> str:
        line = (
            f"session totals: {self.requests} request{'s' if self.requests != 1 else ''} · "
            f"{self.prompt_tokens + self.completion_tokens:,} tok ({self.prompt_tokens:,} in, "
            f"{self.completion_tokens:,} out) · {self.seconds:.1f}s (model {self.model_seconds:.1f}s)"
        )
        if self.forwards:
            line += f" · {self.forwards:,.0f} fwd · {self.completion_tokens / self.forwards:.2f} tok/fwd"
        return line


def print_status(
    state: ChatState, renderer: Renderer, result: RunResult | None = None, full: bool = False
) -> None:
    """The line after a request (and `/status`): model, mode, this run's figures, the context."""
    parts: list[Part] = [(state.model_name(), 2), (state.settings.mode, 9)]
    window = state.model.context_window
    if result is not None:
        parts += run_parts(result)
    if window:
        parts.append((f"ctx {state.used_tokens() / window:.0%} of {window:,}", 8))
    else:  # nothing said how large the context is: the meter does not pretend to know
        parts.append((f"ctx ~{state.used_tokens():,} tok of an unknown window", 8))
    inner = state.model.inner
    source = inner.window_source if isinstance(inner, ServedModel) else ""
    if full and source and window:
        parts.append((f"window from {source}", 3))
    if full:
        parts += [(f"think {'on' if state.settings.think else 'off'}", 5), (f"session {state.session.id}", 5)]
    renderer.status_line(parts)
    if full:
        renderer.status(state.totals.line())
        from clover.containment import DEFENCE_IN_DEPTH

        renderer.status(f"{state.containment.line()} ({DEFENCE_IN_DEPTH})")


UNKNOWN_WINDOW = (
    "the server does not say its context size (not at GET /v1/models, /props, nor Ollama's /api/ps or "
    "/api/show): set context_window in config.toml or CLOVER_CONTEXT_WINDOW; until then the chat "
    "compacts when the server refuses a request as too long"
)


def unknown_window_note(model: Model) -> str | None:
    return UNKNOWN_WINDOW if not model.context_window else None
