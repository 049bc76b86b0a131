"""`!command` at the prompt runs the command directly, as in Claude Code, and puts its output in the
conversation for the model's next turn. Not a way around the rules: it runs as the agent's `bash`
tool runs it (the same environment: its shell state, sandbox and scrubbed variables), after the same
permission gate; typing it is the approval an "ask" would want, while deny rules and plan mode still
refuse it."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from clover.core.protocols import ToolCall, ToolResult
from clover.tools.redact import redact

if TYPE_CHECKING:
    from clover.repl.app import ChatApp

MARKER = "[I ran this command myself; its output, for context (not a request):]"


def is_user_command(content: str) -> bool:
    return content.startswith(MARKER)


def command_of(content: str) -> str:
    """The command line of a saved `!command` message (for the replay)."""
    line = content[len(MARKER) :].lstrip("\n").split("\n", 1)[0]
    return line.removeprefix("$ ")


def run_user_command(app: ChatApp, command: str) -> ToolResult | None:
    """Run `command` as the user's own; None when it was refused or there was nothing to run."""
    if not command.strip():
        app.renderer.info("!COMMAND runs COMMAND here and adds its output to the conversation")
        return None
    tool = app.agent.tools.get("bash")
    if tool is None:
        app.renderer.error("no shell tool in this session: cannot run commands")
        return None
    app.user_commands += 1
    call = ToolCall("bash", {"command": command}, id=f"user_command_{app.user_commands}")
    app.renderer.tool_call(call, prefix="! ")
    refusal = _refusal(app, call, tool)
    if refusal is not None:
        app.renderer.tool_denied(call, refusal)
        return None
    app.renderer.begin_tool(call)
    app.start_keys()
    try:
        result = tool.run(call.arguments, app.env)
    except KeyboardInterrupt:
        app.renderer.stop_live()
        app.renderer.note("⏹ interrupted: the command was stopped")
        return None
    finally:
        app.stop_keys()
    app.keep_result(call, result)
    content = f"{MARKER}\n$ {command}\n{redact(result.output)}"
    app.agent.messages.append({"role": "user", "content": content})
    if call.id in app.pending_lines:  # the output as it ran, not the message's cut copy
        app.outputs_seen.note(app.agent.messages[-1], app.pending_lines.pop(call.id))
    app.save()
    return result


def _refusal(app: ChatApp, call: ToolCall, tool: object) -> str | None:
    """The agent's gate decides, with the user's own typing as the answer to any question."""
    gate = getattr(app.agent.gate, "inner", app.agent.gate)
    if gate is None:
        return None
    typed = copy.copy(gate)  # the same policy and remembered approvals
    typed.ask_user = lambda *_: "yes"
    return typed.authorize(call, tool)
