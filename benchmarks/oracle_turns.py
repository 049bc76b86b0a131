"""Real agent conversations for side-by-side decoder benchmarks: the oracle's trajectories on
held-out SynthFix instances (issue, outline, view, str_replace, the tests), cut before each of
their assistant turns."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def held_out_turns(seed: int, count: int) -> Iterator[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """(the messages before an assistant turn, the tools) for every assistant turn of the oracle's
    trajectories on the first `count` held-out instances of `seed` it solves (of 4 x count tried)."""
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
            messages, tools = traj["messages"], traj["tools"]
            for k, m in enumerate(messages):
                if m["role"] == "assistant":
                    yield messages[:k], tools
