"""Real agent conversations for side-by-side decoder benchmarks: the oracle's trajectories on
held-out SynthFix instances (issue, outline, view, str_replace, the tests), cut before each of
their assistant turns."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def held_out_turns(seed: int, count: int) -> Iterator[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """(the messages before an assistant turn, the tools) for every assistant turn of the oracle's
    trajectories on the first `count` held-out instances of `seed` it solves (of 4 x count tried).
    Test-run durations in tool outputs and the workspace's random temporary name are written as fixed
    ones (as `clover bench` does for the former), so two runs decode the same contexts."""
    from clover.evals.synthfix.generator import build_instance
    from clover.evals.synthfix.oracle import OracleError, solve

    with tempfile.TemporaryDirectory() as tmp:
        index = solved = 0
        while solved < count and index < 4 * count:
            row = build_instance(Path(tmp), "heldout", seed, index)
            index += 1
            try:
                traj = solve(row)
            except OracleError:
                continue
            solved += 1
            tools = traj["tools"]
            root = str(traj["root"])  # a fresh temporary directory each run, then the repository's name
            fixed = f"{FIXED_TMP}/{Path(root).name}"
            messages = [_stable(m, root, fixed) for m in traj["messages"]]
            for k, m in enumerate(messages):
                if m["role"] == "assistant":
                    yield messages[:k], tools


FIXED_TMP = "/tmp/clover-workspace"


def _stable(message: dict[str, Any], root: str, fixed: str) -> dict[str, Any]:
    from clover.evals.bench.stable import stable_output

    content = message.get("content")
    if not isinstance(content, str):
        return message
    content = content.replace(root, fixed)
    return {**message, "content": stable_output(content) if message["role"] == "tool" else content}


@dataclass
class MeasuredTurn:
    forwards: float
    tokens: int
    cpu_seconds: float
    decode_seconds: float
    output: tuple[str, str, list[tuple[str, Any]]]  # thinking, text, calls: what "the same turn" compares


def measure_turn(model: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> MeasuredTurn:
    """One assistant turn of `model` (a LocalCloverModel) after `messages`, with its counters."""
    start = time.process_time()
    turn = model.complete(messages, tools)
    cpu = time.process_time() - start
    return MeasuredTurn(
        forwards=turn.stats["forwards"],
        tokens=turn.completion_tokens,
        cpu_seconds=cpu,
        decode_seconds=turn.completion_tokens / max(turn.stats["tok_per_s"], 1e-9),
        output=(turn.thinking, turn.text, [(c.name, c.arguments) for c in turn.tool_calls]),
    )
