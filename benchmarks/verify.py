"""Verified block decoding against autoregressive decoding on the same weights, side by side.

    python -m benchmarks.verify [--model embedded] [--count 4] [--seed 0] [--block-size 16] [--repeats 3]

The contexts are real agent conversations: the oracle's trajectories on held-out SynthFix instances
(issue, outline, view, str_replace, the tests). At each of their assistant turns the local backend
(tool grammar on, greedy, up to 128 tokens) decodes the model's own next turn with each decoder: B = 1
(autoregressive), B = N with decode order "verify" (model/decoder/verify.py) and B = N "left" (the confidence
threshold). Timing: one warm-up turn through every decoder first (not counted); then `--repeats`
passes over all the turns, the decoders' order reversed on every other pass (B = 1 first, then last),
so neither side always runs on a warmer cache. Prints forwards, tokens per forward and times of each
(medians over the passes), the decode-time ratio to B = 1 per pass as median (min-max), and in how
many turns each decoded the same turn as B = 1 (verify should in all: it is the autoregressive output
computed in fewer rounds, up to float rounding). Forwards and tokens are the same on every pass.
"""

from __future__ import annotations

import argparse
import statistics


def _ratio_line(name: str, ref: list[float], mine: list[float]) -> str:
    r = [a / max(b, 1e-9) for a, b in zip(ref, mine, strict=True)]
    return f"x{statistics.median(r):.2f} (x{min(r):.2f}-x{max(r):.2f} over {len(r)} passes)"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.verify", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="embedded")
    p.add_argument("--count", type=int, default=4, help="held-out instances (their oracle trajectories)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3, help="timed passes over every turn")
    p.add_argument(
        "--orders",
        default="verify,left",
        help="decode orders at B = N, comma-separated; verify+fused: verify with fused rounds",
    )
    a = p.parse_args(argv)
    if a.repeats < 1:
        p.error("--repeats must be at least 1")

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
    turns = list(held_out_turns(a.seed, a.count))
    for model in decoders.values():  # warm-up: kernels compiled, caches and allocator filled
        measure_turn(model, *turns[0])

    names = list(decoders)
    counts = {n: [0.0, 0.0] for n in names}  # forwards, tokens (pass 1)
    cpu = {n: [] for n in names}  # per pass: CPU seconds over all turns
    dec = {n: [] for n in names}  # per pass: decode seconds
    same = {n: 0 for n in names}
    for rep in range(a.repeats):
        order = names if rep % 2 == 0 else names[::-1]
        totals = {n: [0.0, 0.0] for n in names}
        for messages, tools in turns:
            outs = {}
            for name in order:
                m = measure_turn(decoders[name], messages, tools)
                totals[name][0] += m.cpu_seconds
                totals[name][1] += m.decode_seconds
                outs[name] = m
                if rep == 0:
                    counts[name][0] += m.forwards
                    counts[name][1] += m.tokens
            if rep == 0:
                for name in names:
                    same[name] += outs[name].output == outs["B=1"].output
        for name in names:
            cpu[name].append(totals[name][0])
            dec[name].append(totals[name][1])
    n_turns = len(turns)
    print(
        f"{n_turns} turns of {a.count} oracle trajectories (held-out seed {a.seed}), greedy, tool grammar on; "
        f"warm-up, then {a.repeats} passes in alternating order"
    )
    print(
        f"{'':20}{'forwards':>10}{'tokens':>9}{'tok/fwd':>9}{'CPU s':>8}{'decode s':>10}{'same as B=1':>13}"
    )
    for name in names:
        fw, tok = counts[name]
        print(
            f"{name:20}{fw:>10.0f}{tok:>9.0f}{tok / max(fw, 1):>9.2f}{statistics.median(cpu[name]):>8.1f}"
            f"{statistics.median(dec[name]):>10.1f}{same[name]:>10}/{n_turns}"
        )
    for name in names[1:]:
        print(
            f"{name}: {_ratio_line(name, dec['B=1'], dec[name])} decode time, "
            f"{_ratio_line(name, cpu['B=1'], cpu[name])} CPU against B=1"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
