"""A model's turn stage's checks (core.stage_protocol.StageCheck: an issue's example run against
candidate edits), run by the agent as it runs any command: the agent's gate decides about the exact
command line, the environment runs the program as a check (`Environment.run`: behind the step
boundary whatever it writes is thrown away), and each run, or its refusal, is a tool event in the
trajectory marked as the stage's check. A check is not a call of the model's: it never goes back
to the model as a message."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from clover.core.environment_protocol import Environment
from clover.core.environment_protocol import RunResult as StageRun
from clover.core.model_protocol import ToolCall
from clover.core.stage_protocol import StageCheck
from clover.core.stops import AgentStop
from clover.core.tool_protocol import Tool, ToolResult
from clover.tools.safety.redact import redact

if TYPE_CHECKING:
    from clover.agent import Agent

CHECK_OUTPUT = 2000  # characters of a check's output kept in the trajectory (its verdicts come last)


class _CheckTool(Tool):
    """How the gate sees a check (a stage's, the test guard's) where no shell tool is at hand: a
    program that runs code (never read-only)."""

    name = "bash"
    description = "a check the agent runs (an issue's example against candidate edits, the tests)"
    parameters = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
    kind = "run"

    def run(self, args: dict[str, Any], env: Environment) -> ToolResult:
        raise NotImplementedError("a check runs through Agent.run_check or the test guard")

    def is_read_only(self, args: dict[str, Any]) -> bool:
        return False


CHECK_TOOL = _CheckTool()


def run_stage_check(agent: Agent, check: StageCheck, call_id: str) -> StageRun | None:
    """Run `check` for `agent`'s model: its result, or None when the gate refused it (or the
    environment could not start it); either way it is recorded."""
    call = ToolCall("bash", {"command": shlex.join(check.argv)}, id=call_id)
    tool = agent.tools.get("bash", CHECK_TOOL)
    refusal = agent.gate.authorize(call, tool) if agent.gate is not None else None
    if refusal is not None:
        _record(agent, call, check, ToolResult(refusal, is_error=True, data={"denied": True}))
        return None
    if agent.gate is not None:
        # The gate made the exec check's grant for this line as for any shell call, but `env.run`
        # takes none: left in the gate, it would wait there for a later command of the same text
        # (a user's `!cmd`, the tests), which would then start under this check's approval.
        agent.gate.take_grant(call.arguments["command"])
    try:
        result = agent.env.run(check.argv, timeout=check.timeout)
    except (AgentStop, KeyboardInterrupt):
        raise
    except Exception as exc:  # an environment that cannot run it: the check is not run
        _record(agent, call, check, ToolResult(f"not run: {type(exc).__name__}: {exc}", is_error=True))
        return None
    out = result.stdout.decode("utf-8", "replace")
    text = f"exit {result.returncode}{' (timed out)' if result.timed_out else ''}\n{out}{result.stderr}"
    shown = ToolResult(
        text[-CHECK_OUTPUT:],
        is_error=result.returncode != 0,
        exit_code=result.returncode,
        data={"check": "turn_stage"},
    )
    _record(agent, call, check, shown)
    if agent.on_tool_result is not None:
        agent.on_tool_result(call, shown)
    return result


def _record(agent: Agent, call: ToolCall, check: StageCheck, result: ToolResult) -> None:
    agent.record(
        {
            "type": "tool",
            "step": agent.steps,
            "tool_call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
            "output": redact(result.output),
            "is_error": result.is_error,
            "check": "turn_stage",
            "purpose": check.purpose,
            "denied": bool(result.data.get("denied")),
        }
    )


__all__ = ["CHECK_TOOL", "StageRun", "run_stage_check"]
