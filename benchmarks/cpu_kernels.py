"""The CPU decoding kernels (kernels/cpu/, numba) against the torch code they replace, side by side in
one process on the same tensors, at Clover-35B-A3B's real shapes (one token, B = 1):

- lm_head: bf16 [248320, 2048] times one row (1 GB read per token): kernels/cpu/gemv.py vs F.linear;
  also the router [256, 2048];
- the one-token gated delta rule of a GDN layer (32 heads, 128 x 128 state): kernels/cpu/delta_rule.py
  vs the torch definition (kernels/reference/delta_rule.py);
- a MoE layer for one token, router and 8 of 256 int4 experts: kernels/cpu/moe.py's one call vs
  the torch ops and torch's int4 kernel (two calls per expert);
- the int4 products on int8 dot products (kernels/cpu/native.py, layout int4v) against numba's float
  row blocks (int4r): one expert's gate_up [1024, 2048] at 1, 2, 4 and 8 rows (another expert each
  call), and the MoE layer for 1 and 4 tokens; lm_head on AVX-512 BF16 dots at 1 and 4 rows.

    python -m benchmarks.cpu_kernels [--threads 2] [--repeats 20]

Each line: the median time of each and their ratio (torch / ours), and for the matrix products the
bytes read per second. The torch form of the delta rule varies between processes here (0.3 to
2.1 ms for the same shapes; it allocates a fresh 2 MB state per call), so read its line with that
range in mind; the model-level comparison is `benchmarks/realsize.py` run with and without
CLOVER_CPU_KERNELS=torch.
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


def line(name: str, torch_s: float, ours_s: float, nbytes: int = 0, labels=("torch", "ours")) -> str:
    rate = f"  ({nbytes / torch_s / 1e9:.1f} vs {nbytes / ours_s / 1e9:.1f} GB/s)" if nbytes else ""
    a, b = labels
    return f"{name:<40} {a} {torch_s * 1e3:8.3f} ms   {b} {ours_s * 1e3:8.3f} ms   {torch_s / ours_s:5.2f}x{rate}"


def _stack(q, native_layout: bool):
    """An int4 expert stack in the integer-dot layout (int4v) or numba's float row blocks (int4r),
    as the loader makes it on CPU with or without the C kernels."""
    import os

    from clover.model.loading.quant_codes import Int4Codes
    from clover.model.loading.quantized import PackedWeight

    count, rows, cols = q.shape
    before = os.environ.get("CLOVER_CPU_NATIVE")
    os.environ["CLOVER_CPU_NATIVE"] = "auto" if native_layout else "off"
    try:
        stack = PackedWeight.empty_stack("int4", count, rows, cols, q.group_size, torch.bfloat16, "cpu")
    finally:
        os.environ.pop("CLOVER_CPU_NATIVE") if before is None else os.environ.update(CLOVER_CPU_NATIVE=before)
    for e in range(count):
        stack.put(e, Int4Codes(q.codes[e], q.scales[e], q.zeros[e], q.group_size))
    return stack


def _random_int4(gen, *shape: int):
    """Random int4 codes around zero point 8 with weights of std ~0.02 (no float matrix first)."""
    from clover.model.loading.quant_codes import Int4Codes

    codes = torch.randint(0, 16, shape, generator=gen, dtype=torch.uint8)
    scales = torch.full((*shape[:-1], shape[-1] // 128), 0.02 / 4.6)
    return Int4Codes(codes, scales, torch.full_like(scales, 8.0), 128)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    with torch.inference_mode():  # as the model decodes (the kernels take no gradient)
        return _compare(args.repeats)


def _compare(r: int) -> int:

    from clover.kernels import cpu

    if not cpu.available():
        print("numba is not installed (or CLOVER_CPU_KERNELS=torch): nothing to compare")
        return 1
    from clover.kernels.cpu import delta_rule, gemv, native
    from clover.kernels.reference.delta_rule import recurrent_gated_delta_rule
    from clover.kernels.reference.moe import routed_experts
    from clover.model.loading.quantized import PackedWeight, QuantExperts

    gen = torch.Generator().manual_seed(0)
    print(f"threads {torch.get_num_threads()}, median of {r}")
    heads, dk, dv = 32, 128, 128
    q = F.normalize(torch.randn(1, 1, heads, dk, generator=gen), dim=-1) * dk**-0.5
    k = F.normalize(torch.randn(1, 1, heads, dk, generator=gen), dim=-1)
    v, g, beta = torch.randn(1, 1, heads, dv), -torch.rand(1, 1, heads), torch.rand(1, 1, heads)
    state = torch.randn(1, heads, dk, dv, generator=gen)
    a = median_seconds(lambda: recurrent_gated_delta_rule(q, k, v, g, beta, state), r)
    b = median_seconds(lambda: delta_rule.step(q, k, v, g, beta, state), r)
    print(line("delta rule, one token (GDN layer)", a, b))

    for name, rows in (("lm_head [248320, 2048] bf16", 248320), ("router [256, 2048] bf16", 256)):
        w = torch.randn(rows, 2048, generator=gen).bfloat16()
        x = torch.randn(4, 2048, generator=gen).bfloat16()
        a = median_seconds(lambda w=w, x=x: F.linear(x[:1], w), r)
        b = median_seconds(lambda w=w, x=x: gemv.linear(x[:1], w), r)
        print(line(name, a, b, w.numel() * 2))
        if native.bf16_available():
            for m in (1, 4):
                a = median_seconds(lambda w=w, x=x, m=m: F.linear(x[:m], w), r)
                b = median_seconds(lambda w=w, x=x, m=m: native.bf16_linear(x[:m], w), r)
                print(
                    line(f"{name.split()[0]}, {m} rows", a, b, w.numel() * 2, labels=("torch", "bf16 dots"))
                )
        del w

    experts, hidden, inter, top = 256, 2048, 512, 8
    gate_up, down = _random_int4(gen, experts, 2 * inter, hidden), _random_int4(gen, experts, hidden, inter)
    aten = QuantExperts(
        PackedWeight.int4(gate_up, torch.bfloat16, "cpu"), PackedWeight.int4(down, torch.bfloat16, "cpu")
    )
    rows = QuantExperts(_stack(gate_up, False), _stack(down, False))
    dots = QuantExperts(_stack(gate_up, True), _stack(down, True)) if native.available() else None
    del gate_up, down
    # a new token each call, so each call routes to other experts and reads them from memory (one
    # token's 8 experts again and again would sit in the cache, as a decoding step's never do)
    tokens = [torch.randn(4, hidden, generator=gen).bfloat16() for _ in range(64)]
    router = torch.randn(experts, hidden, generator=gen).bfloat16() * 0.02
    turn = iter(range(1 << 30))

    def torch_moe():  # the model's path on torch's int4 kernel: router ops, then two calls per expert
        x = tokens[next(turn) % len(tokens)][:1]
        probs = F.linear(x, router).float().softmax(-1)
        weights, ids = probs.topk(top, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True)

        def expert(e: int, xs):
            gate, up = aten.gate_up.mm(xs.contiguous(), e).chunk(2, dim=-1)
            return aten.down.mm((F.silu(gate) * up).contiguous(), e)

        return routed_experts(x, ids, weights.to(x.dtype), expert)

    def layer(experts_, n):
        return lambda: experts_.forward_routed(tokens[next(turn) % len(tokens)][:n], router, top, True)

    a = median_seconds(torch_moe, r)
    b = median_seconds(layer(rows, 1), r)
    print(line("MoE layer, one token (8 of 256)", a, b))
    if dots is None:
        print("int8-dot kernels: not built here (no C compiler or no AVX-512 VNNI)")
        return 0
    vs = ("float", "int8 dots")
    print(line("MoE layer, 1 token", b, median_seconds(layer(dots, 1), r), labels=vs))
    a, b = median_seconds(layer(rows, 4), r), median_seconds(layer(dots, 4), r)
    print(line("MoE layer, 4 tokens", a, b, labels=vs))
    nbytes = rows.gate_up.nbytes() // experts
    for m in (1, 2, 4, 8):
        x = torch.randn(m, hidden, generator=gen).bfloat16()
        a = median_seconds(lambda x=x: rows.gate_up.mm(x, next(turn) % experts), r)
        b = median_seconds(lambda x=x: dots.gate_up.mm(x, next(turn) % experts), r)
        print(line(f"expert gate_up [1024, 2048], {m} rows", a, b, nbytes, labels=vs))
    return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
