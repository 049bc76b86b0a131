"""Do `clover fix` answers name what the agent found? Reads `clover bench --out` directories.

    python -m benchmarks.answer_names RUN_DIR [RUN_DIR ...]

For each task whose agent looked a symbol up (its first `outline` call) and ended with an answer,
the answer's first code span should be that symbol: "`cart_total` in cart.py used ...". Two runs
of the same weights, one with the answer's code spans grounded (`grounded_spans`, answer_spans.py)
and one without, put side by side what grounding does to the replies a user reads; the fixes
themselves are the bench's own figures.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

FIRST_SPAN = re.compile(r"`([^`\n]+)`")


def named(run: Path) -> tuple[int, int]:
    """(answers whose first span is the looked-up symbol, answers counted) over a bench run."""
    right = total = 0
    for path in sorted(run.glob("tasks/*/*.traj.jsonl")):
        events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        turns = [e for e in events if e.get("type") == "assistant"]
        symbol = next(
            (
                c["arguments"].get("symbol")
                for e in turns
                for c in e.get("tool_calls") or []
                if c.get("name") == "outline"
            ),
            None,
        )
        answers = [e for e in turns if not e.get("tool_calls")]
        if not symbol or not answers:
            continue
        first = FIRST_SPAN.search(answers[-1].get("text") or "")
        total += 1
        right += bool(first and first.group(1) == symbol)
    return right, total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.answer_names", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("runs", type=Path, nargs="+", help="clover bench --out directories")
    args = p.parse_args(argv)
    for run in args.runs:
        if not (run / "tasks").is_dir():
            print(f"clover: {run} is not a clover bench --out directory", file=sys.stderr)
            return 2
        right, total = named(run)
        print(f"{run}: {right}/{total} answers name the looked-up symbol first")
    return 0


if __name__ == "__main__":
    sys.exit(main())
