"""Weight-only kernels side by side on one expert-sized matmul (the choice in model/loading/quantized.py).

    python -m benchmarks.quant_kernels [--rows 1024 --cols 2048] [--experts 64] [--threads 2]

x [M, K] @ W.T for M = 1..32 (decode widths), W one expert's gate_up [2 x 512, 2048] of
Clover-35B-A3B. Each call takes the next of `--experts` distinct matrices, so the weights come from
memory, not from the cache (64 experts of int4 are 64 MB, twice this machine's L3), as in decoding.
Candidates: dense fp32 / bf16; torch's int4 (`_weight_int4pack_mm_for_cpu`) and int8
(`_weight_int8pack_mm`) kernels with bf16 and fp32 activations; torchao 0.18's weight-only configs
when torchao is installed (not a dependency); hand-written dequantization (int4 codes or fp8 to bf16,
then the bf16 matmul). Printed: microseconds per matmul and weight bytes read per second.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from clover.model.loading.quant_codes import quantize_int4, quantize_int8
from clover.model.loading.quantized import PackedWeight

WIDTHS = (1, 2, 4, 8, 16, 32)


def _time(fn: Callable[[int], object], count: int, repeats: int, clock=time.perf_counter) -> float:
    """Best seconds per call over `repeats` sweeps of `count` calls (call i uses matrix i)."""
    for i in range(min(count, 4)):
        fn(i)
    best = float("inf")
    for _ in range(repeats):
        t0 = clock()
        for i in range(count):
            fn(i)
        best = min(best, (clock() - t0) / count)
    return best


def _torchao(weights: torch.Tensor, kind: str):
    """torchao's weight-only linear on CPU, or the reason it cannot run here."""
    try:
        from torchao.quantization import Int4WeightOnlyConfig, Int8WeightOnlyConfig, quantize_
    except Exception as exc:  # noqa: BLE001 - any import failure is the answer
        return f"not installed ({type(exc).__name__})"
    mods = []
    try:
        for w in weights:
            lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=torch.bfloat16)
            lin.weight.data = w.to(torch.bfloat16)
            quantize_(lin, Int8WeightOnlyConfig() if kind == "int8" else Int4WeightOnlyConfig(group_size=128))
            mods.append(lin)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:60]}"
    return mods


def candidates(
    weights: torch.Tensor,
) -> dict[str, tuple[Callable[[torch.Tensor, int], torch.Tensor], int, str] | str]:
    """name -> (fn(x, i), weight bytes per matrix, activation dtype) or the reason it is not run."""
    e, n, k = weights.shape
    q4 = quantize_int4(weights, 128)
    codes8, scales8 = quantize_int8(weights)
    bf16, fp32 = weights.to(torch.bfloat16), weights.float()
    p4 = {dt: PackedWeight.int4(q4, dt, "cpu") for dt in (torch.bfloat16, torch.float32)}
    p8 = {dt: PackedWeight.int8(codes8, scales8, dt, "cpu") for dt in (torch.bfloat16, torch.float32)}
    fp8 = weights.to(torch.float8_e4m3fn)
    codes4, scales4, zeros4 = q4.codes, q4.scales.to(torch.bfloat16), q4.zeros.to(torch.bfloat16)

    def dequant4(x, i):
        w = (codes4[i].view(n, k // 128, 128).to(torch.bfloat16) - zeros4[i, ..., None]) * scales4[
            i, ..., None
        ]
        return F.linear(x, w.view(n, k))

    int4_bytes = p4[torch.bfloat16].nbytes() // e
    out: dict = {
        "dense fp32": (lambda x, i: F.linear(x, fp32[i]), n * k * 4, "fp32"),
        "dense bf16": (lambda x, i: F.linear(x, bf16[i]), n * k * 2, "bf16"),
        "int4 aten (bf16 x)": (lambda x, i: p4[torch.bfloat16].mm(x, i), int4_bytes, "bf16"),
        "int4 aten (fp32 x)": (
            lambda x, i: p4[torch.float32].mm(x, i),
            p4[torch.float32].nbytes() // e,
            "fp32",
        ),
        "int8 aten (bf16 x)": (lambda x, i: p8[torch.bfloat16].mm(x, i), n * k + 2 * n, "bf16"),
        "int8 aten (fp32 x)": (lambda x, i: p8[torch.float32].mm(x, i), n * k + 4 * n, "fp32"),
        "int4 dequant+bf16 (hand)": (dequant4, int4_bytes, "bf16"),
        "fp8 dequant+bf16 (hand)": (lambda x, i: F.linear(x, fp8[i].to(torch.bfloat16)), n * k, "bf16"),
    }
    for kind in ("int8", "int4"):
        mods = _torchao(weights, kind)
        name = f"torchao {kind} weight-only"
        out[name] = (
            mods
            if isinstance(mods, str)
            else (lambda x, i, m=mods: m[i](x), (n * k) // (2 if kind == "int4" else 1), "bf16")
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1024, help="N: 2 x expert width (gate and up)")
    ap.add_argument("--cols", type=int, default=2048, help="K: hidden size")
    ap.add_argument("--experts", type=int, default=64, help="distinct matrices cycled through")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: the process's CPU time (with --threads 1, steadier on a shared machine)",
    )
    a = ap.parse_args(argv)
    clock = time.process_time if a.clock == "cpu" else time.perf_counter
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    weights = torch.randn(a.experts, a.rows, a.cols) * 0.02
    widths = [int(w) for w in a.widths.split(",")]
    table = candidates(weights)
    del weights
    print(
        f"x [M, {a.cols}] @ W.T, W [{a.rows}, {a.cols}] cycled over {a.experts} experts; "
        f"{torch.get_num_threads()} threads, {a.clock} clock; us per matmul (GB/s of weight bytes)"
    )
    print(f"{'kernel':28}" + "".join(f"{'M=' + str(m):>16}" for m in widths))
    for name, entry in table.items():
        if isinstance(entry, str):
            print(f"{name:28}  unavailable: {entry}")
            continue
        fn, nbytes, act = entry
        cells = []
        for m in widths:
            x = torch.randn(m, a.cols).to(torch.bfloat16 if act == "bf16" else torch.float32)
            s = _time(lambda i, x=x, fn=fn: fn(x, i), a.experts, a.repeats, clock)
            cells.append(f"{s * 1e6:8.0f} ({nbytes / s / 1e9:4.1f})")
        print(f"{name:28}" + "".join(f"{c:>16}" for c in cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
