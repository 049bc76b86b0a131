"""The `bash` tool: one command through the environment's shell session."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clover.core.environment_protocol import Environment
from clover.core.tool_protocol import Tool, ToolKind, ToolResult
from clover.tools.textio import error

MAX_TIMEOUT = 3600.0


def exit_trailer(code: int | None) -> str:
    """The line a finished command's output ends with (a timed-out one says so instead)."""
    return f"\n[exit code {code}]"


@dataclass
class BashTool(Tool):
    name: str = "bash"
    description: str = (
        "Run a bash command in the workspace. The working directory and exported variables persist "
        "between calls; stdin is closed, so nothing interactive. Long output is cut to head and tail."
    )
    parameters: dict[str, Any] = field(
        default_factory=lambda: {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout": {"type": "number", "description": "seconds (default: the environment's)"},
            },
            "required": ["command"],
        }
    )
    kind: ToolKind = "run"

    def run(self, args: dict[str, Any], env: Environment) -> ToolResult:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return error("bash: 'command' is required")
        timeout = args.get("timeout")
        if timeout is not None:
            try:
                timeout = min(max(float(timeout), 1.0), MAX_TIMEOUT)
            except (TypeError, ValueError):
                return error(f"bash: timeout must be a number of seconds, got {timeout!r}")
        try:
            result = env.execute(command, timeout=timeout)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # the environment broke (e.g. a remote one went away)
            return error(f"bash: could not run the command: {exc}")
        data = {
            "returncode": result.returncode,
            "timed_out": result.timed_out,
            "full_output_path": result.full_output_path,
            "seconds": round(result.seconds, 3),
        }
        output = result.output if result.output.strip() else "(no output)"
        if result.timed_out:
            return ToolResult(
                f"{output}\n[timed out; exit code {result.returncode}]",
                is_error=True,
                data=data,
                exit_code=result.returncode,
            )
        return ToolResult(
            output.rstrip() + exit_trailer(result.returncode), data=data, exit_code=result.returncode
        )
