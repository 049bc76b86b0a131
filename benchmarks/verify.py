"""Verified block decoding against autoregressive decoding on the same weights, side by side.

    python -m benchmarks.verify [--model embedded] [--count 4] [--seed 0] [--block-size 16]

The contexts are real agent conversations: the oracle's trajectories on held-out SynthFix instances
(issue, outline, view, str_replace, the tests). At each of their assistant turns the local backend
(tool grammar on, greedy, up to 128 tokens) decodes the model's own next turn three ways, one after
the other in this process: B = 1 (autoregressive), B = N with decode order "verify" (model/verify.py)
and B = N "left" (the confidence threshold). Prints forwards, tokens per forward and CPU seconds of
each, and in how many turns each decoded the same turn as B = 1 (verify should in all: it is the
autoregressive output computed in fewer rounds, up to float rounding).
"""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.verify", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="embedded")
    p.add_argument("--count", type=int, default=4, help="held-out instances (their oracle trajectories)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument(
        "--orders",
        default="verify,left",
        help="decode orders at B = N, comma-separated; verify+fused: verify with fused rounds",
    )
    a = p.parse_args(argv)

    from benchmarks.oracle_turns import held_out_turns, measure_turn
    from clover.backends.local import LocalCloverModel
    from clover.settings import Settings

    base = Settings(
        model=a.model, max_tokens=128, temperature=0.0, block_size=1, edit_repairs="off", drafts=0
    )
    ar = LocalCloverModel(base)
    decoders = {"B=1": ar}
    for order in a.orders.split(","):
        plain = order.removesuffix("+fused")
        decoders[f"B={a.block_size} {order}"] = ar.with_settings(
            block_size=a.block_size, decode_order=plain, fused_rounds=plain != order
        )

    totals = {
        name: [0.0, 0.0, 0.0, 0, 0.0] for name in decoders
    }  # forwards, tokens, CPU s, same turns, decode s
    turns = 0
    for messages, tools in held_out_turns(a.seed, a.count):
        reference = None
        for name, model in decoders.items():
            m, t = measure_turn(model, messages, tools), totals[name]
            t[0] += m.forwards
            t[1] += m.tokens
            t[2] += m.cpu_seconds
            t[4] += m.decode_seconds
            reference = reference or m.output
            t[3] += m.output == reference
        turns += 1
    print(f"{turns} turns of {a.count} oracle trajectories (held-out seed {a.seed}), greedy, tool grammar on")
    print(
        f"{'':20}{'forwards':>10}{'tokens':>9}{'tok/fwd':>9}{'CPU s':>8}{'decode s':>10}{'same as B=1':>13}"
    )
    for name, (fw, tok, sec, same, dec) in totals.items():
        print(
            f"{name:20}{fw:>10.0f}{tok:>9.0f}{tok / max(fw, 1):>9.2f}{sec:>8.1f}{dec:>10.1f}{same:>10}/{turns}"
        )
    ref = totals["B=1"]
    for name in list(decoders)[1:]:
        t = totals[name]
        print(
            f"{name}: x{ref[2] / max(t[2], 1e-9):.2f} CPU, x{ref[4] / max(t[4], 1e-9):.2f} decode time against B=1"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
