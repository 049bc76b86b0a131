"""Command output without wall-clock timings, so that a bench run can be repeated exactly.

pytest's summary line says how long the tests took ("1 passed in 0.51s"); the agent reads it back and
a small model's next tokens depend on it, so two runs of one decoder on one task could differ, and an
A/B comparison of two decoders carried a task or two of noise. `clover bench --fixed-timings` runs
the agent in an environment whose command output has such durations written as a fixed one ("in
0.01s"); by default it sees the real ones, as a user's agent does, and the summary says
which. Object addresses in reprs ("<cart.Cart object at 0x7fce64784f50>",
which pytest prints in a failed assertion's explanation) differ from process to process the same
way, and a hand-written task's outcome once turned on one: they are written as FIXED_ADDRESS.
Everything else passes through unchanged.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from clover.core.environment_protocol import ExecResult

# pytest's summary ("= 2 failed, 1 passed in 0.12s =", "in 61.20s (0:01:01)") and unittest's
# ("Ran 3 tests in 0.001s")
_DURATION = re.compile(
    r"(\b(?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected|tests?|no tests ran)"
    r" in )\d+(?:\.\d+)?s(?: \(\d+:\d\d:\d\d\))?"
)
FIXED = "0.01s"
_ADDRESS = re.compile(r"(\bat )0x[0-9a-f]{6,16}\b")
FIXED_ADDRESS = "0x7f0000000000"


def stable_output(text: str) -> str:
    """`text` with test-run durations written as FIXED and object addresses as FIXED_ADDRESS."""
    text = _DURATION.sub(lambda m: m.group(1) + FIXED, text)
    return _ADDRESS.sub(lambda m: m.group(1) + FIXED_ADDRESS, text)


class StableTimings:
    """An Environment whose `execute` output has test-run durations fixed (everything else delegated)."""

    def __init__(self, env: Any) -> None:
        object.__setattr__(self, "_env", env)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def __setattr__(self, name: str, value: Any) -> None:  # e.g. `env.on_output = ...` reaches the real one
        setattr(self._env, name, value)

    def execute(self, command: str, cwd: str | None = None, timeout: float | None = None) -> ExecResult:
        result = self._env.execute(command, cwd=cwd, timeout=timeout)
        return dataclasses.replace(result, output=stable_output(result.output))


__all__ = ["FIXED", "FIXED_ADDRESS", "StableTimings", "stable_output"]
