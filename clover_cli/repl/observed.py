"""The model and the permission gate as the chat's agent sees them: each model turn streams into the
renderer behind the runaway guard, is labelled when cut short, and a context-length refusal is met
by compacting and asking once more; each tool call is shown before it runs, with what an "always"
answer would remember, and a refusal carries what the user said instead."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from clover.core.model_protocol import AssistantTurn, Message, Model, ModelWrapper, ToolCall, TurnOptions
from clover.core.stops import ModelError
from clover.core.tool_protocol import Tool, ToolResult
from clover.loop_guard import LoopGuard, truncation
from clover.repl.compaction import is_overflow
from clover.repl.one_line import describe_call
from clover.repl.permissions_view import always_rules, rule_label
from clover.repl.render import Renderer

if TYPE_CHECKING:
    from clover.repl.state import ChatState
    from clover.repl.ui import ChatUI
    from clover.tools.safety.permgate import PermissionGate


class ObservedModel(ModelWrapper):
    """The model as the agent sees it (runner.build_agent's `wrap_model`, around the loop guard):
    each turn streams into the renderer and settles on screen. `inner` is the backend itself (what
    /model switches); `compact(forced)` makes room when the server refuses a request as too long;
    `state` gets each turn's real context size."""

    def __init__(
        self, guarded: LoopGuard, renderer: Renderer, compact: Callable[[bool], bool], state: ChatState
    ) -> None:
        self.guard, self.renderer, self.compact, self.state = guarded, renderer, compact, state
        self.options: TurnOptions | None = None  # per-session turn options (/think)

    @property
    def inner(self) -> Model:
        return self.guard.inner

    @inner.setter
    def inner(self, model: Model) -> None:
        self.guard.inner = model

    @property
    def name(self) -> str:
        return self.guard.name

    @property
    def context_window(self) -> int:
        return self.guard.context_window

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
            self.renderer.note(
                f"the conversation is too long for {self.name}'s context: compacting and retrying"
            )
            if not self.compact(True):
                raise
            return self._complete(messages, tools, options)

    def _complete(
        self, messages: list[Message], tools: list[Any], options: TurnOptions | None
    ) -> AssistantTurn:
        renderer = self.renderer
        renderer.begin_turn()
        turn: AssistantTurn | None = None
        try:
            turn = self.guard.complete(messages, tools, renderer.on_event, options)
            self.state.context_tokens = turn.prompt_tokens + turn.completion_tokens
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
    """Shows each call as it is about to run, and the refusal when the gate says no (runner.build_agent's
    `wrap_gate`; /mode puts another permission gate inside). After a plain no the rest of the turn's
    calls are not run (nor asked about): the turn ends there."""

    def __init__(self, inner: PermissionGate, ui: ChatUI, state: ChatState) -> None:
        self.inner, self.ui, self.state = inner, ui, state

    def authorize(self, call: ToolCall, tool: Tool) -> str | None:
        renderer = self.ui.renderer
        renderer.tool_call(call)
        if self.state.turn_stopped:
            renderer.tool_denied(call, "not reached: an earlier call of this turn was declined")
            return NOT_REACHED
        approver = self.ui.approver
        shown = describe_call(call)
        approver.call_shown = shown if len(shown) + 2 <= self.ui.console.width else ""  # else cut on screen
        approver.stopped = False
        approver.all_edits = self.state.settings.mode == "ask"  # in auto-edit only a rule asks about an edit
        # Call ids repeat across requests (the step counter restarts): only this approval counts.
        approver.previewed.discard(call.id)
        approver.feedback.pop(call.id, None)
        rules = always_rules(self.inner, call.name, call.arguments or {}, tool)
        labels = list(dict.fromkeys(" ".join(rule_label(r).split()) for r in rules))
        labels = [label if len(label) <= 60 else label[:59] + "…" for label in labels]
        approver.always_hint = ", ".join(labels[:3]) + (
            f" and {len(labels) - 3} more" if len(labels) > 3 else ""
        )
        refusal = self.inner.authorize(call, tool)
        feedback = approver.feedback.pop(call.id, None)
        if refusal is not None and feedback:
            refusal = f"The user declined this tool call and said: {feedback}\nDo that instead."
        elif refusal is not None and approver.stopped:
            self.state.turn_stopped = True
            renderer.tool_denied(call, "declined")
            return STOPPED
        if refusal is not None:
            renderer.tool_denied(call, refusal)
        else:
            renderer.begin_tool(call)
        return refusal

    # What the rest of the run asks of the agent's gate, answered by the permission gate inside.
    @property
    def policy(self) -> Any:  # the exec check's rules (tools/safety/execguard.py) and the /permissions view
        return self.inner.policy

    def screen(self, tool: Tool, result: ToolResult) -> None:  # a read's lines of denied files
        self.inner.screen(tool, result)

    @property
    def remembered(self) -> list[Any]:  # "always" answers of this session
        return self.inner.remembered

    def take_grant(self, command: str) -> Any:  # the exec check (tools/safety/execguard.py)
        return self.inner.take_grant(command)

    def approve_held(self, held: list[Any]) -> set[str]:  # the step boundary (tools/safety/boundary.py)
        return self.inner.approve_held(held)
