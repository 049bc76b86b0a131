"""A resumed session on screen: the saved conversation replayed compactly (requests, tool calls,
answers), the compaction summary and the agent's own nudges not counted as requests."""

from __future__ import annotations

import json

from rich.text import Text

from clover.agent import EMPTY_REPLY
from clover.core.model_protocol import Message, ToolCall
from clover.repl import compaction
from clover.repl.bang import command_of, is_user_command
from clover.repl.outputs import SeenLines
from clover.repl.render import Renderer
from clover.terminal_text import visible


def is_request(message: Message) -> bool:
    """A user message the person typed (not a compaction summary, the agent's own nudge or the
    output of a `!command`)."""
    content = str(message.get("content") or "")
    return (
        message.get("role") == "user"
        and not content.startswith(compaction.MARKER)
        and content != EMPTY_REPLY
        and not is_user_command(content)
    )


REPLAY_MESSAGES = 40


def _lines(count: int) -> str:
    return f"{count} line{'s' if count != 1 else ''}"


def replay(renderer: Renderer, messages: list[Message], seen: SeenLines | None = None) -> None:
    """The saved conversation on screen, compactly: requests, tool calls, answers; each result's line
    count as it ran (`seen`), else as its message has it."""
    seen = seen or SeenLines()
    if len(messages) > REPLAY_MESSAGES:
        renderer.info(f"… {len(messages) - REPLAY_MESSAGES} earlier messages")
        messages = messages[-REPLAY_MESSAGES:]
    for m in messages:
        role, content = m.get("role"), str(m.get("content") or "")
        if role == "user" and content.startswith(compaction.MARKER):
            renderer.info("⟳ (earlier conversation compacted)")
        elif role == "user" and is_user_command(content):
            count = seen.lines(m)
            count = len(content.splitlines()) - 2 if count is None else count
            renderer.console.print(Text(visible(f"! {command_of(content)}"), style="bold"))
            renderer.info(f"  ⎿ {_lines(count)}")
        elif role == "user" and content != EMPTY_REPLY:
            lines = content.strip().splitlines() or [""]
            shown = "› " + lines[0] + (" …" if len(lines) > 1 else "")
            renderer.console.print(Text(visible(shown), style="bold"))
        elif role == "assistant":
            for call in m.get("tool_calls") or []:
                fn = call.get("function", {})
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except (TypeError, ValueError):
                    args = {}
                renderer.tool_call(ToolCall(str(fn.get("name", "")), args if isinstance(args, dict) else {}))
            if content.strip() and content != compaction.ACK:
                renderer.answer(content)
        elif role == "tool":
            count = seen.lines(m)
            renderer.info(f"  ⎿ {_lines(len(content.splitlines()) if count is None else count)}")
