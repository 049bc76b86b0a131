"""Training data from SynthFix oracle trajectories: renders them (oracle.render_trajectory, optional
renamed copies from augment.py) and packs them with model/training/data.py.

    python -m clover.evals.synthfix.dataset --tokenizer tok.json --trajectories oracle.jsonl --out DIR \
        [--seq 1280 --align end --tool-prompt compact --renamed-copies 3 --copy-fraction 0.15]

The packing options are model/training/data.py's; this entry point adds the SynthFix-specific rendering, so
model/ stays free of evals/."""

from __future__ import annotations

import sys
from functools import partial

from clover.evals.synthfix.augment import rename_trajectory
from clover.evals.synthfix.oracle import render_trajectory
from clover.model.training import data


def main(argv: list[str] | None = None) -> int:
    parser = data.make_parser("python -m clover.evals.synthfix.dataset")
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument(
        "--renamed-copies",
        type=int,
        default=0,
        help="this many copies of each trajectory with fresh identifiers "
        "(evals/synthfix/augment.py) instead of the original",
    )
    parser.add_argument(
        "--tool-prompt",
        choices=["full", "compact"],
        default="full",
        help="how the system prompt lists tools: the model config's tool_prompt",
    )
    args = data.parse_args(parser, argv)
    if args.renamed_copies < 0:
        parser.error("--renamed-copies must be >= 0")
    variants = None
    if args.renamed_copies > 0:

        def variants(traj: dict) -> list[dict]:
            return [rename_trajectory(traj, (args.seed, k)) for k in range(args.renamed_copies)]

    return data.run(args, partial(render_trajectory, tool_prompt=args.tool_prompt), variants)


if __name__ == "__main__":
    sys.exit(main())
