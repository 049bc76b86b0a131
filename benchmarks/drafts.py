"""What drafts from the prompt buy block decoding (model/decoder/drafts.py), side by side in one process.

    python -m benchmarks.drafts [--model embedded] [--count 4] [--seed 0] [--block-size 16]

The contexts are real agent conversations: the oracle's trajectories on held-out SynthFix
instances (issue, outline, view, str_replace, the tests). At each of their assistant turns the
model decodes its own next turn (the local backend, tool grammar on, greedy, up to 128 tokens)
twice: with `drafts` 0 and with `drafts` N. Prints forwards, tokens per forward and CPU seconds of
each, their ratios, and in how many turns the two decoded the same tokens (drafts change when a
token is accepted, not which token the model predicts, so outputs may still differ where an early
acceptance changed the context of a later position).
"""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.drafts", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="embedded")
    p.add_argument("--count", type=int, default=4, help="held-out instances (their oracle trajectories)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--drafts", type=int, default=3, help="n-gram length of the drafted run")
    a = p.parse_args(argv)

    from benchmarks.oracle_turns import held_out_turns, measure_turn
    from clover.backends.local import LocalCloverModel
    from clover.settings import Settings

    base = Settings(
        model=a.model,
        max_tokens=128,
        temperature=0.0,
        block_size=a.block_size,
        decode_order="left",
        edit_repairs="off",
        drafts=0,
    )
    plain = LocalCloverModel(base)
    drafted = plain.with_settings(drafts=a.drafts)

    totals = {"plain": [0.0, 0.0, 0.0], "drafted": [0.0, 0.0, 0.0]}  # forwards, tokens, CPU seconds
    same = turns = 0
    for messages, tools in held_out_turns(a.seed, a.count):
        outs = []
        for name, model in (("plain", plain), ("drafted", drafted)):
            m, t = measure_turn(model, messages, tools), totals[name]
            t[0] += m.forwards
            t[1] += m.tokens
            t[2] += m.cpu_seconds
            outs.append(m.output)
        turns += 1
        same += outs[0] == outs[1]
    print(f"{turns} turns of {a.count} oracle trajectories, B = {a.block_size}, drafts {a.drafts} against 0")
    print(f"{'':10}{'forwards':>10}{'tokens':>9}{'tok/fwd':>9}{'CPU s':>8}")
    for name, (fw, tok, sec) in totals.items():
        print(f"{name:10}{fw:>10.0f}{tok:>9.0f}{tok / max(fw, 1):>9.2f}{sec:>8.1f}")
    (pf, pt, ps), (df, dt, ds) = totals["plain"], totals["drafted"]
    print(
        f"forwards saved {1 - df / max(pf, 1):.1%}; tokens per forward "
        f"x{(dt / max(df, 1)) / max(pt / max(pf, 1), 1e-9):.2f}; "
        f"CPU x{ps / max(ds, 1e-9):.2f}; same output in {same} of {turns} turns"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
