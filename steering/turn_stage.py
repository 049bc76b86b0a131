"""The local decoder's turn stage: what the embedded model needs done after a turn beyond
answering, run by the agent (agent.py) once the model has answered.

- a str_replace's edit chosen among one-site repairs by the model's likelihood, and checked against
  the issue's example where the agent's gate lets that run (edit_choice.py, reproduce.py); an edit
  that would undo a fix the example confirms is held back;
- edits of test files or docstrings the request does not name, and any edit when the request is a
  question, held back (edit_scope.py).

It runs nothing itself: each run of the issue's example is a StageCheck for the agent's runner,
which asks the gate, runs it in the environment as a check and records it in the trajectory. The
decision is structured (core.stage_protocol.StageDecision): the calls as they are to run, and why a call
is held back; the agent answers a held call with its reason instead of running it.
"""

from __future__ import annotations

from typing import Any

from clover.core.model_protocol import AssistantTurn, Message
from clover.core.stage_protocol import CheckRunner, StageDecision


class LocalTurnStage:
    """The stage of one decoded turn of `model` (a LocalCloverModel bound to a workspace);
    `decoded` is what its decode left (local.Decoded: prompt ids, reply text, settings)."""

    def __init__(self, model: Any, decoded: Any) -> None:
        self.model, self.decoded = model, decoded

    def review(
        self, turn: AssistantTurn, messages: list[Message], run_check: CheckRunner | None
    ) -> StageDecision:
        calls = list(turn.tool_calls)
        held: list[str | None] = [None] * len(calls)
        stats: dict[str, float] = {}
        if self._repairs_on() and len(calls) == 1:  # one call: the reply up to its old_str scores it
            from clover.steering.edit_choice import choose_turn_edit

            edit = choose_turn_edit(self.model, calls[0], self.decoded, messages, run_check)
            if edit is not None:
                calls[0], held[0], stats = edit.call, edit.held, dict(edit.stats)
        if self.decoded.settings.grounded:
            from clover.steering.edit_scope import scope_holds

            request = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
            current = next(
                (str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), ""
            )
            held, scoped = scope_holds(calls, held, request, self.model.workspace, current)
            stats |= scoped
        return StageDecision(calls, held, stats)

    def _repairs_on(self) -> bool:
        """The `edit_repairs` setting, or (auto) the checkpoint's config."""
        setting = self.decoded.settings.edit_repairs
        return setting == "on" or (setting == "auto" and bool(self.model.config.edit_repairs))


__all__ = ["LocalTurnStage"]
