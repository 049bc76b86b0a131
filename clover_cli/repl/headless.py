"""One-shot headless chat, in the Claude Code / Codex habit: `clover -p "question"`, or anything piped
into `clover chat`. All of stdin is one prompt, the agent runs once in the permission mode the flags
give (a call that would need approval is refused, since no one can answer), the answer goes to
stdout as text, one JSON object, or a JSON line per event. Exit codes: 0 answered, 1 the run failed
(the server is down, a limit, a truncated reply), 2 bad usage."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import IO, Any

from clover.core.protocols import AssistantTurn, Message, Model, ModelError, StreamEvent, ToolCall, ToolResult
from clover.repl.guard import guarded_complete, truncation
from clover.settings import Settings

FORMATS = ("text", "json", "stream-json")


def read_prompt(prompt: str | None, stdin: IO[str]) -> str:
    """`prompt`, with piped stdin appended (`cat log | clover -p "why does this fail?"`); '-' or None:
    stdin alone."""
    piped = "" if stdin.isatty() else stdin.read()
    if prompt in (None, "-"):
        return piped.strip()
    return f"{prompt.strip()}\n\n{piped.strip()}" if piped.strip() else prompt.strip()


class _Recording:
    """The model behind the runaway guard, remembering the last turn (was it cut short?)."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.last: AssistantTurn | None = None
        self.name = getattr(inner, "name", "")
        self.context_window = getattr(inner, "context_window", 0)
        self.bind_workspace = getattr(inner, "bind_workspace", None)
        self.wrap_up = getattr(inner, "wrap_up", True)  # the agent reads it through this wrapper

    def complete(self, messages: list[Message], tools: list[Any], on_event: Any = None,
                 options: Any = None) -> AssistantTurn:
        self.last = guarded_complete(self.inner, messages, tools, on_event, options)
        return self.last


def run_print(
    settings: Settings, root: Path, prompt: str, output_format: str = "text",
    *, out: IO[str] | None = None, err: IO[str] | None = None, model: Model | None = None,
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    if output_format not in FORMATS:
        print(f"clover: --output-format must be one of {', '.join(FORMATS)}, not {output_format!r}", file=err)
        return 2
    if not prompt.strip():
        print("clover: no prompt: pass -p \"QUESTION\" or pipe it on stdin", file=err)
        return 2
    from clover.runner import build_agent, build_environment, build_model, checkpointer

    try:
        inner = model if model is not None else build_model(settings)
        env = build_environment(settings, root)
    except (ModelError, ValueError, OSError) as exc:
        print(f"clover: {exc}", file=err)
        return 2
    recording = _Recording(inner)

    def stream(event: StreamEvent) -> None:
        out.write(json.dumps({"type": event.kind, "text": event.text, "data": event.data}, default=str) + "\n")
        out.flush()

    def tool_result(call: ToolCall, result: ToolResult) -> None:
        out.write(json.dumps({"type": "tool_result", "id": call.id, "name": call.name, "output": result.output,
                              "is_error": result.is_error}, default=str) + "\n")
        out.flush()

    streaming = output_format == "stream-json"
    try:
        agent = build_agent(settings, env, kind="chat", model=recording, on_event=stream if streaming else None,
                            on_tool_result=tool_result if streaming else None,
                            # `clover undo` reverts a -p run
                            recorder=checkpointer(settings, root, prompt.strip().splitlines()[0][:70],
                                                  session=f"p-{time.strftime('%Y%m%d-%H%M%S')}"))
    except ValueError as exc:  # a bad permission rule
        print(f"clover: {exc}", file=err)
        return 2
    result = agent.run(prompt)
    cut = truncation(recording.last) if result.exit_status == "submitted" else None
    ok = result.exit_status == "submitted" and cut is None
    error = result.error.removeprefix("model error: ModelError: ")
    summary = {
        "status": result.exit_status if cut is None else "truncated",
        "result": result.final_text,
        "truncated": cut,
        "error": error,
        "steps": result.steps,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "seconds": round(result.seconds, 3),
        "model": recording.name,
        "mode": settings.mode,
    }
    if output_format == "json":
        out.write(json.dumps(summary, indent=2) + "\n")
    elif output_format == "stream-json":
        out.write(json.dumps({"type": "result", **summary}) + "\n")
    else:
        if result.final_text:
            out.write(result.final_text.rstrip() + "\n")
        if cut:
            print(f"clover: truncated: {cut}", file=err)
        if result.exit_status != "submitted":
            print(f"clover: {result.exit_status}: {error}", file=err)
    out.flush()
    return 0 if ok else 1
