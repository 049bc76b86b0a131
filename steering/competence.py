"""Outside its competence, a small checkpoint says so.

The embedded model was trained on repositories of a dozen files and rows of 1,280 tokens. In a
real-size repository "What does this repository do?" made it think for 30 s and write
`if the / if the` until stopped. A checkpoint may declare its limits in config.json, and then, in
place of a reply past them, the local backend answers briefly that the request needs a larger model
and how to connect one:
- `max_prompt_tokens`: a prompt longer than this is past anything it was trained on: answered at
  once, nothing decoded;
- `max_repo_files`: in a workspace with more files it answers what needs no repository (a greeting,
  a general question) but does not start work on it: a turn that calls a tool there is answered
  honestly instead, and the turn's token budget is short (a reply that runs past it is no answer);
- `min_reply_logprob`: a reply (no tool call) whose tokens average a lower log-probability under
  the model itself, one the decoder stopped as a runaway, or one that says the same eight words
  twice (a fluent loop: the taught feature reply starting over) is a reply it is not confident of.
While the judgement is pending, the turn's thinking and text are held back from the stream, so a
user never sees the garbled reply the honest one replaces. Where the model already changed files in
this request, the reply says which instead (the diff is the result; "this needs a larger model"
would be false of a fix it made).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clover.core.model_protocol import AssistantTurn, EventHandler, StreamEvent
from clover.core.tool_protocol import EDITED_KEY

HONEST = (
    "This needs a larger model than the embedded one ({why}). Connect one with `--base-url URL --model NAME` "
    "(an OpenAI-compatible server) or `--model DIR` (a local checkpoint directory), e.g. "
    "`clover chat --base-url http://127.0.0.1:8000/v1 --model NAME`."
)
# after it changed files in this request, a reply it is not sure of is replaced by what it did:
# the claim "this needs a larger model" would be false of a fix it made
EDITED = (
    "Changed {files} (the diff shows how). The embedded model stops here rather than write a reply it "
    "is not sure of ({why}); a larger model can explain the change: `--base-url URL --model NAME` or `--model DIR`."
)
SHORT_BUDGET = 192  # tokens a turn may take in a repository past the checkpoint's size


@dataclass(frozen=True)
class Limits:
    max_prompt_tokens: int = 0  # 0: no limit
    max_repo_files: int = 0
    min_reply_logprob: float = 0.0  # mean log-probability per token; 0: not judged

    @classmethod
    def of(cls, config: Any) -> Limits:
        """The limits a checkpoint's config (model/config.CloverConfig) declares."""
        return cls(
            int(config.max_prompt_tokens or 0),
            int(config.max_repo_files or 0),
            float(config.min_reply_logprob or 0.0),
        )

    @property
    def active(self) -> bool:
        return bool(self.max_prompt_tokens or self.max_repo_files or self.min_reply_logprob)

    def prompt_too_long(self, prompt_tokens: int) -> str | None:
        if self.max_prompt_tokens and prompt_tokens > self.max_prompt_tokens:
            return f"the conversation is {prompt_tokens} tokens, past the {self.max_prompt_tokens} it handles"
        return None

    def repo_too_big(self, files: int) -> str | None:
        if self.max_repo_files and files > self.max_repo_files:
            return f"this repository has {files} files, past the {self.max_repo_files} it was made for"
        return None

    def judge(
        self, turn: AssistantTurn, finish_reason: str, big_repo: str | None, mean_logprob: Callable[[], float]
    ) -> str | None:
        """Why this decoded turn is outside the checkpoint's competence, or None."""
        if big_repo and (turn.tool_calls or finish_reason != "stop"):
            return big_repo
        if turn.tool_calls or not self.min_reply_logprob:
            return None
        if finish_reason == "repetition" or repeats_itself(turn.text):
            return "its reply ran into a loop"
        score = mean_logprob()
        if score < self.min_reply_logprob:
            return f"its reply scored {score:.2f} per token, below the {self.min_reply_logprob:.2f} it trusts"
        return None


def edited_files(messages: list[Any]) -> list[str]:
    """The files an edit tool changed in the current request: tool results since the last reply
    that ended a request (an assistant message with an answer and no tool call)."""
    found: list[str] = []
    for message in reversed(messages):
        if (
            message.get("role") == "assistant"
            and str(message.get("content") or "").strip()
            and not message.get("tool_calls")
        ):
            break
        if message.get("role") == "tool":
            found.extend(reversed(message.get(EDITED_KEY) or []))
    return list(dict.fromkeys(reversed(found)))


def reply_text(why: str, messages: list[Any]) -> str:
    """What replaces a reply past the limits: what was changed, where something was; else HONEST."""
    files = edited_files(messages)
    return (
        EDITED.format(files=", ".join(f"`{f}`" for f in files), why=why) if files else HONEST.format(why=why)
    )


LOOP_WORDS = 8  # a reply that says the same 8 words twice is going round in circles


def repeats_itself(text: str, span: int = LOOP_WORDS) -> bool:
    """Does a run of `span` words come back in the reply? (The decoder's repetition stop catches
    short loops; a fluent reply that starts over, a taught sentence and all, scores as confident.)"""
    words = text.split()
    seen: set[tuple[str, ...]] = set()
    for i in range(len(words) - span + 1):
        run = tuple(words[i : i + span])
        if run in seen:
            return True
        seen.add(run)
    return False


def honest_turn(
    why: str,
    prompt_tokens: int = 0,
    decoded: int = 0,
    seconds: float = 0.0,
    emit: EventHandler | None = None,
    messages: list[Any] = (),
) -> AssistantTurn:
    """The honest reply as a turn; given `emit` (a turn answered without decoding), its text and
    usage are sent there (a decoded turn's go out with its stats, HeldStream.release sending the text)."""
    turn = AssistantTurn(
        text=reply_text(why, list(messages)),
        prompt_tokens=prompt_tokens,
        completion_tokens=decoded,
        seconds=seconds,
        finish_reason="stop",
    )
    turn.stats = {"outside_competence": 1.0}
    if emit is not None:
        emit(StreamEvent("text", turn.text))
        emit(
            StreamEvent(
                "usage", data={"prompt_tokens": prompt_tokens, "completion_tokens": decoded, **turn.stats}
            )
        )
    return turn


class HeldStream:
    """An event handler that passes everything on but the turn's thinking and text, which it keeps
    until `release(turn)`: the turn's own (as decoded) or the honest reply in their place."""

    def __init__(self, emit: EventHandler) -> None:
        self.emit, self.held = emit, []

    def __call__(self, event: StreamEvent) -> None:
        if event.kind in ("thinking", "text"):
            self.held.append(event)
        else:
            self.emit(event)

    def release(self, replaced: bool, text: str = "") -> None:
        if replaced:
            self.emit(StreamEvent("text", text))
        else:
            for event in self.held:
                self.emit(event)
        self.held = []


__all__ = [
    "EDITED",
    "HONEST",
    "HeldStream",
    "Limits",
    "edited_files",
    "honest_turn",
    "repeats_itself",
    "reply_text",
]
