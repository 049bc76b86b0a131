"""The CPU decoding kernels (kernels/cpu/, numba) against the torch code they replace, side by side in
one process on the same tensors, at Clover-35B-A3B's real shapes (one token, B = 1):

- lm_head: bf16 [248320, 2048] times one row (1 GB read per token): kernels/cpu/gemv.py vs F.linear;
  also the router [256, 2048];
- the one-token gated delta rule of a GDN layer (32 heads, 128 x 128 state): kernels/cpu/delta_rule.py
  vs the torch definition (kernels/reference/delta_rule.py);
- the causal conv of one token (8192 channels, kernel 4): the written-out form vs F.conv1d;
- one token's routed experts, 8 of 256 at int4 (model/quantized.py's one-token path vs the general
  routed path, both on torch's int4 kernel).

    python -m benchmarks.cpu_kernels [--threads 2] [--repeats 20]

Each line: the median time of each and their ratio (torch / ours), and for the matrix products the
bytes read per second.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F


def median_seconds(fn, repeats: int) -> float:
    fn()
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def line(name: str, torch_s: float, ours_s: float, nbytes: int = 0) -> str:
    rate = f"  ({nbytes / torch_s / 1e9:.1f} vs {nbytes / ours_s / 1e9:.1f} GB/s)" if nbytes else ""
    return f"{name:<34} torch {torch_s * 1e3:8.3f} ms   ours {ours_s * 1e3:8.3f} ms   {torch_s / ours_s:5.2f}x{rate}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    from clover.kernels import cpu

    if not cpu.available():
        print("numba is not installed (or CLOVER_CPU_KERNELS=torch): nothing to compare")
        return 1
    from clover.kernels.cpu import delta_rule, gemv
    from clover.kernels.reference.delta_rule import recurrent_gated_delta_rule
    from clover.kernels.reference.moe import routed_experts
    from clover.model.quantized import PackedWeight, QuantExperts, quantize_int4

    gen = torch.Generator().manual_seed(0)
    r = args.repeats
    print(f"threads {args.threads}, median of {r}")
    for name, rows in (("lm_head [248320, 2048] bf16", 248320), ("router [256, 2048] bf16", 256)):
        w = torch.randn(rows, 2048, generator=gen).bfloat16()
        x = torch.randn(1, 2048, generator=gen).bfloat16()
        a = median_seconds(lambda w=w, x=x: F.linear(x, w), r)
        b = median_seconds(lambda w=w, x=x: gemv.linear(x, w), r)
        print(line(name, a, b, w.numel() * 2))
        del w

    heads, dk, dv = 32, 128, 128
    q = F.normalize(torch.randn(1, 1, heads, dk, generator=gen), dim=-1) * dk**-0.5
    k = F.normalize(torch.randn(1, 1, heads, dk, generator=gen), dim=-1)
    v, g, beta = torch.randn(1, 1, heads, dv), -torch.rand(1, 1, heads), torch.rand(1, 1, heads)
    state = torch.randn(1, heads, dk, dv, generator=gen)
    a = median_seconds(lambda: recurrent_gated_delta_rule(q, k, v, g, beta, state), r)
    b = median_seconds(lambda: delta_rule.step(q, k, v, g, beta, state), r)
    print(line("delta rule, one token (GDN layer)", a, b))

    channels, kernel = 8192, 4
    u = torch.randn(1, channels, kernel, generator=gen).bfloat16()
    cw = torch.randn(channels, 1, kernel, generator=gen).bfloat16()
    a = median_seconds(lambda: F.silu(F.conv1d(u, cw, groups=channels)), r)
    b = median_seconds(
        lambda: F.silu((u.unfold(2, kernel, 1).float() * cw[:, 0].float()[:, None]).sum(-1).to(u.dtype)), r
    )
    print(line("causal conv, one token", a, b))

    experts, hidden, inter, top = 256, 2048, 512, 8
    gate_up = quantize_int4(torch.randn(experts, 2 * inter, hidden, generator=gen) * 0.02, 128)
    down = quantize_int4(torch.randn(experts, hidden, inter, generator=gen) * 0.02, 128)
    moe = QuantExperts(
        PackedWeight.int4(gate_up, torch.bfloat16, "cpu"), PackedWeight.int4(down, torch.bfloat16, "cpu")
    )
    del gate_up, down
    x = torch.randn(1, hidden, generator=gen).bfloat16()
    ids = torch.randperm(experts, generator=gen)[:top][None]
    weights = torch.rand(1, top, generator=gen).softmax(-1).bfloat16()

    def general():
        def expert(e: int, xs):
            gate, up = moe.gate_up.mm(xs.contiguous(), e).chunk(2, dim=-1)
            return moe.down.mm((F.silu(gate) * up).contiguous(), e)

        return routed_experts(x, ids, weights, expert)

    a = median_seconds(general, r)
    b = median_seconds(lambda: moe(x, ids, weights), r)
    print(line("8 of 256 int4 experts, one token", a, b))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
