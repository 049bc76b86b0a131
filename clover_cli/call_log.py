"""What a headless run (`clover fix`, `clover -p`) says while it runs, and the record of its calls.

Every tool call ends here (the agent's `on_call_done`), whatever became of it. A refused or failed
call is one stderr line at once (tool, short arguments, reason), a `permission_denials` /
`tool_errors` entry in the json result, and a `tool_result` event in stream-json. On a terminal,
stderr also shows progress from the first second: loading the model, each step, each call and how it
ended. The last test command the agent ran is kept for the fix's summary."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import IO, Any

from clover.core.model_protocol import StreamEvent, ToolCall
from clover.core.tool_protocol import Tool, ToolResult
from clover.terminal_text import visible

_KEY_ARGS = ("command", "path", "pattern", "symbol", "query", "url")
# A command is taken as a test run when one of its words names tests: pytest, `npm test`,
# tests/test_calc.py, unittest, `go test ./...`, tox, nox. (Only the summary's label depends on it.)
_TEST_WORD = re.compile(r"test|^tox$|^nox$", re.IGNORECASE)


def shorten(text: str, width: int) -> str:
    """One line of at most `width` characters; what is left out is marked with an ellipsis."""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def shorten_middle(text: str, width: int) -> str:
    """One line of at most `width` characters; a longer one keeps its start and its end around an
    ellipsis. A command's end says what it runs on (which tests, which file) and a path's end names
    the file, while their start is often a long directory (a venv's interpreter in a deep checkout)
    that would otherwise fill the whole width and make every call's line look the same."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    head = width // 3
    return text[:head].rstrip() + "…" + text[len(text) - (width - head - 1) :].lstrip()


def short_args(call: ToolCall) -> str:
    args = call.arguments if isinstance(call.arguments, dict) else {}
    for key in _KEY_ARGS:
        if isinstance(args.get(key), str) and args[key].strip():
            return shorten_middle(args[key], 60)
    return shorten(json.dumps(args, ensure_ascii=False, default=str), 60) if args else ""


def is_test_command(command: str) -> bool:
    return any(_TEST_WORD.search(word.strip("'\"")) for word in command.split())


def tool_result_event(call: ToolCall, result: ToolResult) -> dict[str, Any]:
    """stream-json's record of one call's end; `refused`: the permission gate said no."""
    return {
        "type": "tool_result",
        "id": call.id,
        "name": call.name,
        "arguments": call.arguments,
        "output": result.output,
        "is_error": result.is_error,
        "refused": bool(result.data.get("denied")),
    }


@dataclass
class TestRun:
    command: str
    exit_code: int | None
    timed_out: bool
    after_last_edit: bool  # False: a file was edited after it ran, so it says nothing of the final code


class CallLog:
    """The agent's `on_call_done`, and the headless run's voice on stderr."""

    def __init__(
        self,
        err: IO[str],
        *,
        emit: Callable[[dict[str, Any]], None] | None = None,
        progress: bool | None = None,
    ) -> None:
        self.err, self.emit = err, emit
        self.progress = err.isatty() if progress is None else progress
        self.tools: dict[str, Tool] = {}
        self.denials: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.mutated = False  # a call that can change files ran (an edit that took, or a command)
        self.edits = 0
        self.last_test: TestRun | None = None
        self.step = 0
        self._transient = False

    def bind(self, tools: dict[str, Tool]) -> None:
        self.tools = tools

    # ------------------------------------------------------------------ progress (a terminal only)

    def say(self, text: str) -> None:
        """A progress line, on a terminal only."""
        if self.progress:
            self._line(f"clover: {text}")

    def note(self, text: str) -> None:
        """A line that is always said (what Clover did on its own, e.g. compacting)."""
        self._line(f"clover: {text}")

    def on_step(self, step: int) -> None:
        self.step = step
        if self.progress:
            self._line(f"clover: step {step} · waiting for the model…", transient=True)

    def on_event(self, event: StreamEvent) -> None:
        if self.progress and event.kind == "tool_call":
            name = str(event.data.get("name", "?"))
            call = ToolCall(name, event.data.get("arguments") or {})
            self._line(f"clover: step {self.step} · {name} {short_args(call)} …", transient=True)

    # ------------------------------------------------------------------ every call's end

    def __call__(self, call: ToolCall, result: ToolResult) -> None:
        data = result.data if isinstance(result.data, dict) else {}
        entry = {"tool_name": call.name, "tool_use_id": call.id, "tool_input": call.arguments}
        reason = shorten(result.output, 300)
        if data.get("denied"):
            self.denials.append({**entry, "reason": result.output})
            self._line(f"clover: refused: {self._what(call)}: {reason}")
        elif result.is_error:
            self.errors.append({**entry, "error": result.output})
            self._line(f"clover: failed: {self._what(call)}: {reason}")
            if data.get("interrupted"):  # it was running: it may have changed files before it stopped
                self._may_have_changed(call)
        else:
            self._ran(call, result, data)
        if self.emit is not None:
            self.emit(tool_result_event(call, result))

    def _ran(self, call: ToolCall, result: ToolResult, data: dict[str, Any]) -> None:
        code = result.exit_code
        if result.edited:
            self.edits += 1
            if self.last_test is not None:
                self.last_test.after_last_edit = False
        self._may_have_changed(call)
        command = call.arguments.get("command") if isinstance(call.arguments, dict) else None
        if isinstance(command, str) and isinstance(code, int) and is_test_command(command):
            self.last_test = TestRun(command, code, bool(data.get("timed_out")), True)
        if self.progress:
            end = f" → exit {code}" if isinstance(code, int) else " ✓"
            self._line(f"clover: step {self.step} · {self._what(call)}{end}")

    def _may_have_changed(self, call: ToolCall) -> None:
        tool = self.tools.get(call.name)
        if tool is not None and not tool.is_read_only(call.arguments):
            self.mutated = True

    def _what(self, call: ToolCall) -> str:
        args = short_args(call)
        return f"{call.name} {args}" if args else call.name

    def _line(self, text: str, transient: bool = False) -> None:
        """On a terminal a transient line (what is happening now) is replaced by the next line."""
        if self._transient:
            self.err.write("\r\x1b[K")
        text = visible(text)  # tool names, arguments and reasons are the model's and the tools' text
        self.err.write(text if transient else text + "\n")
        self.err.flush()
        self._transient = transient

    def done(self) -> None:
        """Clear a transient line before the run's report."""
        if self._transient:
            self.err.write("\r\x1b[K")
            self.err.flush()
            self._transient = False

    # ------------------------------------------------------------------ the json result

    def record(self) -> dict[str, Any]:
        return {
            "permission_denials": self.denials,
            "tool_errors": self.errors,
            "last_test": asdict(self.last_test) if self.last_test else None,
        }
