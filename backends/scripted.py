"""Replay assistant turns from a file (or a list): demos, UI tests, deterministic agent tests.

A turn is `{"thinking": str, "text": str, "tool_calls": [{"name", "arguments"}]}` or
`{"raw": "<reply in the model's text format>"}` (parsed by model/text/chat.py), with optional
`"delay": seconds` (an interruptible sleep before answering) and `"error": "message"` (the turn
fails with a ModelError). The file is a JSON list, `{"turns": [...]}`, or JSONL, one turn a line.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from clover.core.model_protocol import (
    AssistantTurn,
    EventHandler,
    Message,
    ModelCapabilities,
    StreamEvent,
    ToolCall,
    ToolSpec,
    TurnOptions,
)
from clover.core.stops import ModelError
from clover.model.text.chat import parse_assistant, tool_schemas


def load_turns(path: str | Path) -> list[dict[str, Any]]:
    """The turns of a script file; a ModelError names the file and the problem."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise ModelError(f"scripted model: cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                data.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ModelError(f"scripted model: {path} line {lineno}: invalid JSON ({exc.msg})") from None
    if isinstance(data, dict):
        data = data.get("turns", [data])
    if not isinstance(data, list):
        raise ModelError(f"scripted model: {path} must hold a list of turns")
    return data


def _check(turn: Any, where: str) -> dict[str, Any]:
    if not isinstance(turn, dict):
        raise ModelError(f"scripted model: {where} must be a JSON object, not {type(turn).__name__}")
    unknown = set(turn) - {
        "thinking",
        "text",
        "tool_calls",
        "raw",
        "delay",
        "error",
        "prompt_tokens",
        "completion_tokens",
    }
    if unknown:
        raise ModelError(f"scripted model: {where} has unknown keys {sorted(unknown)}")
    return turn


class ScriptedModel(ModelCapabilities):
    def __init__(
        self,
        script: str | Path | list[dict[str, Any]],
        *,
        name: str | None = None,
        context_window: int = 131072,
    ) -> None:
        if isinstance(script, list):
            self.source, self.turns = "<list>", list(script)
        else:
            self.source, self.turns = str(script), load_turns(script)
        self.name = name or f"scripted:{Path(self.source).name}"
        self.context_window = context_window
        self.position = 0
        self.requests: list[list[Message]] = []  # what the agent sent, for tests and demos

    def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        on_event: EventHandler | None = None,
        options: TurnOptions | None = None,  # a replay answers as recorded
    ) -> AssistantTurn:
        emit = on_event or (lambda event: None)
        start = time.monotonic()
        self.requests.append([dict(m) for m in messages])
        if self.position >= len(self.turns):
            raise ModelError(f"scripted model: no more turns in {self.source}")
        where = f"turn {self.position + 1} of {self.source}"
        turn = _check(self.turns[self.position], where)
        self.position += 1
        delay = float(turn.get("delay", 0) or 0)
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:  # short naps: Ctrl-C lands at once
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        if turn.get("error"):
            raise ModelError(str(turn["error"]))
        if "raw" in turn:
            thinking, text, parsed = parse_assistant(str(turn["raw"]), tool_schemas(tools))
            calls = [ToolCall(p.name, p.arguments, raw=p.raw, error=p.error) for p in parsed]
        else:
            thinking, text = str(turn.get("thinking", "")), str(turn.get("text", ""))
            calls = []
            for i, spec in enumerate(turn.get("tool_calls") or []):
                if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                    raise ModelError(f'scripted model: {where}: tool call {i + 1} needs a "name"')
                args = spec.get("arguments", {})
                if not isinstance(args, dict):
                    raise ModelError(
                        f"scripted model: {where}: arguments of {spec['name']} must be an object"
                    )
                calls.append(
                    ToolCall(spec["name"], dict(args), raw=json.dumps(spec), error=spec.get("error"))
                )
        if thinking:
            emit(StreamEvent("thinking", thinking))
        if text:
            emit(StreamEvent("text", text))
        for call in calls:
            emit(StreamEvent("tool_call", data={"name": call.name, "arguments": call.arguments}))
        # Rough counts (4 characters a token) unless the script gives them: limits still work.
        prompt = int(turn.get("prompt_tokens", len(json.dumps(messages, default=str)) // 4))
        completion = int(
            turn.get("completion_tokens", (len(thinking) + len(text) + sum(len(c.raw) for c in calls)) // 4)
        )
        emit(StreamEvent("usage", data={"prompt_tokens": prompt, "completion_tokens": completion}))
        return AssistantTurn(
            text=text,
            thinking=thinking,
            tool_calls=calls,
            prompt_tokens=prompt,
            completion_tokens=completion,
            seconds=time.monotonic() - start,
            finish_reason="tool_calls" if calls else "stop",
        )
