"""The status line after each request (its tokens, time, forwards, speed) and the session's totals
that `/status` adds."""

from __future__ import annotations

from dataclasses import dataclass

from clover.agent import RunResult


def run_parts(result: RunResult) -> list[str]:
    parts = [f"{result.tokens:,} tok", f"{result.seconds:.1f}s"]
    forwards = result.stats.get("forwards", 0)
    if forwards:
        parts.append(f"{forwards:.0f} fwd · {result.completion_tokens / forwards:.2f} tok/fwd")
        forced = result.stats.get("grammar_tokens", 0)  # placed by the tool grammar, no forward
        if forced:
            parts.append(f"{(result.completion_tokens - forced) / forwards:.2f} without {forced:.0f} forced")
    if result.model_seconds >= 0.2 and result.completion_tokens:
        parts.append(f"{result.completion_tokens / result.model_seconds:.1f} tok/s")
    return parts


@dataclass
class Totals:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    model_seconds: float = 0.0
    forwards: float = 0.0

    def add(self, result: RunResult) -> None:
        self.requests += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.seconds += result.seconds
        self.model_seconds += result.model_seconds
        self.forwards += result.stats.get("forwards", 0.0)

    def line(self) -> str:
        line = (f"session totals: {self.requests} request{'s' if self.requests != 1 else ''} · "
                f"{self.prompt_tokens + self.completion_tokens:,} tok ({self.prompt_tokens:,} in, "
                f"{self.completion_tokens:,} out) · {self.seconds:.1f}s (model {self.model_seconds:.1f}s)")
        if self.forwards:
            line += f" · {self.forwards:,.0f} fwd · {self.completion_tokens / self.forwards:.2f} tok/fwd"
        return line
