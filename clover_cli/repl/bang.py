"""`!command` at the prompt runs the command directly, as in Claude Code, and puts its output in the
conversation for the model's next turn. Not a way around the rules: it runs as the agent's `bash`
tool runs it (the same environment: its shell state, sandbox and scrubbed variables), after the same
permission gate; typing it is the approval an "ask" would want, while deny rules and plan mode still
refuse it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING

from clover.core.model_protocol import ToolCall
from clover.core.tool_protocol import Tool, ToolResult
from clover.tools.safety.redact import redact

if TYPE_CHECKING:
    from clover.repl.state import ChatState
    from clover.repl.ui import ChatUI
    from clover.tools.safety.permgate import PermissionGate

MARKER = "[I ran this command myself; its output, for context (not a request):]"


def is_user_command(content: str) -> bool:
    return content.startswith(MARKER)


def command_of(content: str) -> str:
    """The command line of a saved `!command` message (for the replay)."""
    line = content[len(MARKER) :].lstrip("\n").split("\n", 1)[0]
    return line.removeprefix("$ ")


def run_user_command(
    state: ChatState, ui: ChatUI, keep: Callable[[ToolCall, ToolResult], None], command: str
) -> ToolResult | None:
    """Run `command` as the user's own, its result shown and kept by `keep`; None when it was
    refused or there was nothing to run. The caller saves the session."""
    renderer = ui.renderer
    if not command.strip():
        renderer.info("!COMMAND runs COMMAND here and adds its output to the conversation")
        return None
    tool = state.agent.tools.get("bash")
    if tool is None:
        renderer.error("no shell tool in this session: cannot run commands")
        return None
    state.user_commands += 1
    call = ToolCall("bash", {"command": command}, id=f"user_command_{state.user_commands}")
    renderer.tool_call(call, prefix="! ")
    refusal = _refusal(state.gate.inner, call, tool)
    if refusal is not None:
        renderer.tool_denied(call, refusal)
        return None
    renderer.begin_tool(call)
    ui.start_keys()
    try:
        result = tool.run(call.arguments, state.env)
    except KeyboardInterrupt:
        renderer.stop_live()
        renderer.note("⏹ interrupted: the command was stopped")
        return None
    finally:
        ui.stop_keys()
    keep(call, result)
    content = f"{MARKER}\n$ {command}\n{redact(result.output)}"
    state.agent.messages.append({"role": "user", "content": content})
    if call.id in state.pending_lines:  # the output as it ran, not the message's cut copy
        state.outputs_seen.note(state.agent.messages[-1], state.pending_lines.pop(call.id))
    return result


def _refusal(gate: PermissionGate, call: ToolCall, tool: Tool) -> str | None:
    """The agent's gate decides, with the user's own typing as the answer to any question."""
    typed = copy.copy(gate)  # the same policy and remembered approvals
    typed.ask_user = lambda *_: "yes"
    return typed.authorize(call, tool)
