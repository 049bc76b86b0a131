"""`python -m clover.evals.synthfix --split heldout --count 50 --out DIR` writes DIR/instances.jsonl."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from clover.evals.synthfix.generator import SPLITS, generate, write_jsonl


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clover.evals.synthfix", description=__doc__)
    parser.add_argument("--split", choices=SPLITS, default="train")
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, required=True, help="output directory (repos/ and instances.jsonl)"
    )
    parser.add_argument(
        "--prose-fraction",
        type=float,
        default=0.0,
        help="share of issues written as plain prose, without an import line or example (0: as before)",
    )
    parser.add_argument("--verify", action="store_true", help="check each instance with pytest (slow)")
    args = parser.parse_args(argv)
    if args.count < 0:
        parser.error("--count must be >= 0")
    if not 0.0 <= args.prose_fraction <= 1.0:
        parser.error("--prose-fraction must be within [0, 1]")
    start = time.perf_counter()
    try:
        rows = generate(args.out, args.split, args.count, args.seed, args.prose_fraction)
    except (OSError, RuntimeError) as err:
        print(f"clover: {err}", file=sys.stderr)
        return 1
    path = write_jsonl(rows, args.out / "instances.jsonl")
    seconds = time.perf_counter() - start
    print(f"wrote {len(rows)} {args.split} instances to {path} in {seconds:.1f}s")
    if not args.verify:
        return 0
    from clover.evals.synthfix.verify import verify_instance

    bad = 0
    for row in rows:
        verdict = verify_instance(row)
        bad += not verdict.ok
        print(
            f"{row['instance_id']} {row['family']}: {'ok' if verdict.ok else '; '.join(verdict.problems[:3])}"
        )
    print(f"verified {len(rows) - bad}/{len(rows)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
