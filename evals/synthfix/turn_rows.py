"""One-turn rows from oracle fix trajectories: the history as the agent shows it, then one turn.

    python -m clover.evals.synthfix.turn_rows --trajectories RUN/oracle.jsonl --out RUN/fix_turns.jsonl \
        [--turns 1 --renamed-copies 1 --seed 0 --tool-prompt compact]

A fix and a "where is X defined?" chat question start alike: an outline of a name. What comes next
(view the code to find the bug, or answer with the definition) is decided by the user's message
alone, because the agent shows earlier turns without their thinking. In a whole trajectory that
decision is a few tokens among hundreds of targets, and a small model trained on both answered
fixes with the chat reply. These rows stop right after turn `--turns` (its thinking and
its call are the only target): short enough for the trainer's short set, next to the chat rows
(`chat_tasks --history-cut`) that make the other choice after the same first step.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from clover.evals.synthfix.augment import rename_trajectory
from clover.evals.synthfix.generator import read_jsonl, write_jsonl
from clover.evals.synthfix.oracle import render_trajectory


def turn_row(traj: dict[str, Any], turn: int, tool_prompt: str = "compact") -> dict[str, Any]:
    """{"text", "spans"}: the trajectory up to and including assistant turn `turn` (0-based), earlier
    turns without thinking (as the agent's history shows them), that turn the only loss span."""
    text, spans = render_trajectory(traj, turn, tool_prompt)
    if not spans:
        raise ValueError(f"{traj.get('instance_id')}: no assistant turn {turn}")
    start, end = spans[0]
    return {"text": text[:end], "spans": [(start, end)]}


def generate(
    trajectories: list[dict[str, Any]], turns: list[int], copies: int, seed: int, tool_prompt: str = "compact"
) -> list[dict[str, Any]]:
    """Rows for each trajectory x turn; with `copies` > 0, that many renamed copies (augment.py) instead
    of the original, so the names must be copied from the issue, not recalled."""
    rows = []
    for traj in trajectories:
        variants = [rename_trajectory(traj, (seed, k)) for k in range(copies)] if copies > 0 else [traj]
        for variant in variants:
            rows += [turn_row(variant, turn, tool_prompt) for turn in turns]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m clover.evals.synthfix.turn_rows", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--trajectories", type=Path, required=True, help="oracle trajectories (oracle.py's JSONL)"
    )
    parser.add_argument("--out", type=Path, required=True, help="JSONL of rendered rows to write")
    parser.add_argument(
        "--turns", type=int, nargs="+", default=[1], help="0-based assistant turns, one row each"
    )
    parser.add_argument("--renamed-copies", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tool-prompt", choices=["full", "compact"], default="compact")
    args = parser.parse_args(argv)
    if min(args.turns) < 0 or args.renamed_copies < 0:
        parser.error("--turns and --renamed-copies must be >= 0")
    try:
        rows = generate(
            read_jsonl(args.trajectories), args.turns, args.renamed_copies, args.seed, args.tool_prompt
        )
        write_jsonl(rows, args.out)
    except (OSError, ValueError, KeyError) as exc:
        print(f"clover: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(rows)} turn rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
