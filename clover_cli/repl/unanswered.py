"""Turns left without their answer. A request the model never answered because its backend failed
is taken out of the conversation and put back at the prompt: retried, it is one user turn, not two
in a row (templates that require alternation reject that). An interrupted request stays (the user
stopped it; the conversation is kept, as the chat says). A call an
interruption left without its result gets one, so the conversation stays valid for the next turn."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clover.agent_run import RunResult
from clover.core.model_protocol import Message
from clover.core.stops import ModelError

if TYPE_CHECKING:
    from clover.repl.ui import ChatUI


def take_back(messages: list[Message], ui: ChatUI, text: str, result: RunResult) -> None:
    if result.exit_status != ModelError.exit_status:
        return
    if not messages or messages[-1].get("role") != "user":
        return
    messages.pop()
    if ui.back_at_prompt(text):
        ui.renderer.info("the request had no answer: it is back at the prompt (Enter sends it again)")
    else:
        ui.renderer.info("the request had no answer: it is not kept in the conversation")


def repair(messages: list[Message]) -> None:
    """After an interruption every tool call of the last assistant turn must have its answer."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            wanted = [c.get("id") for c in messages[i].get("tool_calls") or []]
            have = {m.get("tool_call_id") for m in messages[i + 1 :] if m.get("role") == "tool"}
            for j, call in enumerate(messages[i].get("tool_calls") or []):
                if wanted[j] not in have:
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": wanted[j],
                            "name": call.get("function", {}).get("name", ""),
                            "content": "not run: interrupted by the user",
                        }
                    )
            return
