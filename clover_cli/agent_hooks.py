"""What the agent calls out to around a tool call: the gate that lets it run and screens its result,
and the recorder of what it changes (checkpoints for undo)."""

from __future__ import annotations

from typing import Any, Protocol

from clover.core.model_protocol import ToolCall
from clover.core.tool_protocol import Tool, ToolResult


class StepRecorder(Protocol):
    """Records what a tool call changes (checkpoints for undo): `begin` just before a call that may
    change files runs, `end` just after, with the step's number. Read-only calls are not wrapped.
    Where the step boundary applies a command's changes it hands them over exactly: `capture`
    (the paths' state before, None outside a step) then `commit` (tools/safety/boundary.py)."""

    def begin(self, step: int) -> None: ...

    def end(self, step: int) -> None: ...

    def capture(self, paths: list[str]) -> Any: ...

    def commit(self, before: Any) -> None: ...


class Gate(Protocol):
    def authorize(self, call: ToolCall, tool: Tool) -> str | None:
        """None lets the call run; a string refuses it and is what the model is told."""

    def screen(self, tool: Tool, result: ToolResult) -> None:
        """Leave out of a call's result what the model may not see (lines of files read rules
        deny), before anyone sees it."""

    def take_grant(self, command: str) -> Any:
        """The exec check's grant `authorize` made for this shell command line (once), or None."""
