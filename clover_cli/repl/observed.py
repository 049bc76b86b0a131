"""The model and the permission gate as the chat's agent sees them: each model turn streams into the
renderer behind the runaway guard, is labelled when cut short, and a context-length refusal is met
by compacting and asking once more; each tool call is shown before it runs, with what an "always"
answer would remember, and a refusal carries what the user said instead."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from clover.core.protocols import (
    AssistantTurn,
    Environment,
    Message,
    Model,
    ModelError,
    Tool,
    ToolCall,
    TurnOptions,
    TurnStage,
)
from clover.repl.compaction import is_overflow
from clover.repl.guard import guarded_complete, truncation
from clover.repl.permissions_view import always_rules, rule_label
from clover.repl.render import describe_call

if TYPE_CHECKING:
    from clover.repl.app import ChatApp


class ObservedModel:
    """The model as the agent sees it: each turn streams into the renderer and settles on screen."""

    def __init__(self, inner: Model, app: ChatApp) -> None:
        self.inner, self.app = inner, app
        self.options: TurnOptions | None = None  # per-session turn options (/think)

    @property
    def name(self) -> str:
        return str(getattr(self.inner, "name", self.app.settings.model))

    @property
    def context_window(self) -> int:
        return int(getattr(self.inner, "context_window", 0) or 0)

    # the model's capabilities (core.protocols.ModelCapabilities), passed on to the agent
    @property
    def wrap_up(self) -> bool:
        return self.inner.wrap_up

    @property
    def early_answer_redos(self) -> int:
        return self.inner.early_answer_redos

    @property
    def rolls_back_test_breaks(self) -> bool:
        return self.inner.rolls_back_test_breaks

    def bind_workspace(self, env: Environment) -> None:
        self.inner.bind_workspace(env)

    def turn_stage(self) -> TurnStage | None:
        return self.inner.turn_stage()

    def complete(
        self,
        messages: list[Message],
        tools: list[Any],
        on_event: Any = None,
        options: TurnOptions | None = None,
    ) -> AssistantTurn:
        options = _merged(self.options, options)
        try:
            return self._complete(messages, tools, options)
        except ModelError as exc:
            if not is_overflow(exc):
                raise
            # The server's context is smaller than we knew: compact (in place) and ask once more.
            self.app.renderer.note(
                f"the conversation is too long for {self.name}'s context: compacting and retrying"
            )
            if not self.app.compact(forced=True):
                raise
            return self._complete(messages, tools, options)

    def _complete(
        self, messages: list[Message], tools: list[Any], options: TurnOptions | None
    ) -> AssistantTurn:
        renderer = self.app.renderer
        renderer.begin_turn()
        turn: AssistantTurn | None = None
        try:
            turn = guarded_complete(self.inner, messages, tools, renderer.on_event, options)
            self.app.context_tokens = turn.prompt_tokens + turn.completion_tokens
            return turn
        finally:
            renderer.end_turn(turn)
            cut = truncation(turn)
            if cut:
                renderer.warn(f"⚠ truncated: {cut}")


def _merged(session: TurnOptions | None, turn: TurnOptions | None) -> TurnOptions | None:
    """The session's options (/think) with the ones this turn sets (the agent's wrap-up) on top."""
    if session is None or turn is None:
        return turn or session
    return dataclasses.replace(session, **{k: v for k, v in vars(turn).items() if v is not None})


STOPPED = (
    "The user declined this tool call and stopped the turn; their next message says what to do "
    "instead. Do not retry the call before it."
)
NOT_REACHED = "Not run: the user declined an earlier call of this turn and will say what to do instead."


class ObservedGate:
    """Shows each call as it is about to run, and the refusal when the gate says no. After a plain
    no the rest of the turn's calls are not run (nor asked about): the turn ends there."""

    def __init__(self, inner: Any, app: ChatApp) -> None:
        self.inner, self.app = inner, app

    def authorize(self, call: ToolCall, tool: Tool) -> str | None:
        renderer = self.app.renderer
        renderer.tool_call(call)
        if self.app.turn_stopped:
            renderer.tool_denied(call, "not reached: an earlier call of this turn was declined")
            return NOT_REACHED
        approver = self.app.approver
        shown = describe_call(call)
        approver.call_shown = shown if len(shown) + 2 <= self.app.console.width else ""  # else cut on screen
        approver.stopped = False
        approver.all_edits = self.app.settings.mode == "ask"  # in auto-edit only a rule asks about an edit
        # Call ids repeat across requests (the step counter restarts): only this approval counts.
        approver.previewed.discard(call.id)
        approver.feedback.pop(call.id, None)
        rules = always_rules(self.inner, call.name, call.arguments or {}, tool)
        labels = list(dict.fromkeys(" ".join(rule_label(r).split()) for r in rules))
        labels = [label if len(label) <= 60 else label[:59] + "…" for label in labels]
        approver.always_hint = ", ".join(labels[:3]) + (
            f" and {len(labels) - 3} more" if len(labels) > 3 else ""
        )
        refusal = self.inner.authorize(call, tool) if self.inner is not None else None
        feedback = approver.feedback.pop(call.id, None)
        if refusal is not None and feedback:
            refusal = f"The user declined this tool call and said: {feedback}\nDo that instead."
        elif refusal is not None and approver.stopped:
            self.app.turn_stopped = True
            renderer.tool_denied(call, "declined")
            return STOPPED
        if refusal is not None:
            renderer.tool_denied(call, refusal)
        else:
            renderer.begin_tool(call)
        return refusal

    def __getattr__(self, name: str) -> Any:  # policy, remembered, ... of the real gate
        return getattr(self.inner, name)
