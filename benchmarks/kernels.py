"""Kernel benchmarks, printed side by side.

CPU (default): the torch chunked delta rule against the naive recurrent loop (the definition).
    python -m benchmarks.kernels --cpu [--lengths 1024 4096 16384] [--heads 4]
GPU (--gpu, CUDA): Triton vs the torch reference vs flash-linear-attention (if `fla` imports) for the
delta rule, GDN block mode, decode-shape block attention and MoE, each with the bytes it must move
against the card's measured copy bandwidth; and a 35B-shaped Clover cut to a few layers doing one
32-token block round against its weight bytes / bandwidth. Figures go to --json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from clover.kernels.reference.delta_rule import chunk_gated_delta_rule, recurrent_gated_delta_rule

DEV = "cuda"  # --smoke runs the GPU sections on CPU (Triton interpreter, tiny shapes)
SMOKE = False
NOMINAL_GBPS = {"H200": 4800, "H100": 3350, "A100": 2039, "L40S": 864, "4090": 1008}


def bench(
    fn: Callable[[], Any],
    *,
    cuda: bool | None = None,
    warmup: int = 2,
    iters: int = 5,
    budget_s: float = 20.0,
) -> float:
    """Median seconds per call (CUDA-synchronised); fewer iterations when a call is slow."""
    cuda = DEV == "cuda" if cuda is None else cuda
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < iters and (not times or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def delta_inputs(n, t, hk, h, dk, dv, device, dtype, seed=0):
    g = torch.Generator(device="cpu").manual_seed(seed)
    q = F.normalize(torch.randn(n, t, hk, dk, generator=g), dim=-1) * dk**-0.5
    k = F.normalize(torch.randn(n, t, hk, dk, generator=g), dim=-1)
    v = torch.randn(n, t, h, dv, generator=g)
    decay = -torch.rand(n, t, h, generator=g) * 0.1
    beta = torch.rand(n, t, h, generator=g)
    s0 = torch.randn(n, h, dk, dv, generator=g) * 0.1
    return [x.to(device, dtype) for x in (q, k, v)] + [x.to(device) for x in (decay, beta, s0)]


# ---------------------------------------------------------------------------------------- CPU


def cpu_delta_rule(lengths: list[int], heads: int, dim: int) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    rows = []
    print(
        f"CPU delta rule: N=1, {heads} value heads on {heads // 2} key heads, dk=dv={dim}, fp32, chunk 64, "
        f"{torch.get_num_threads()} threads"
    )
    print(f"{'T':>7} {'recurrent s':>12} {'chunked s':>10} {'speed-up':>9} {'max |diff|':>11}")
    for t in lengths:
        q, k, v, g, beta, s0 = delta_inputs(1, t, max(heads // 2, 1), heads, dim, dim, "cpu", torch.float32)
        t_chunk = bench(partial(chunk_gated_delta_rule, q, k, v, g, beta, s0), cuda=False, warmup=1, iters=3)
        t0 = time.perf_counter()
        o_rec, _ = recurrent_gated_delta_rule(q, k, v, g, beta, s0)
        t_rec = time.perf_counter() - t0
        diff = (chunk_gated_delta_rule(q, k, v, g, beta, s0)[0] - o_rec).abs().max().item()
        rows.append(
            {"T": t, "recurrent_s": t_rec, "chunked_s": t_chunk, "speedup": t_rec / t_chunk, "max_diff": diff}
        )
        print(f"{t:>7} {t_rec:>12.3f} {t_chunk:>10.4f} {t_rec / t_chunk:>8.1f}x {diff:>11.2e}")
    return rows


# ---------------------------------------------------------------------------------------- GPU


def _sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()


def copy_bandwidth_gbps() -> float:
    """Device-to-device copy of 1 GiB: read + write bytes per second."""
    if DEV != "cuda":
        return 1.0
    a = torch.empty(1 << 30, dtype=torch.uint8, device=DEV)
    b = torch.empty_like(a)
    sec = bench(lambda: b.copy_(a), warmup=2, iters=10)
    return 2 * a.numel() / sec / 1e9


def _nominal() -> float | None:
    name = torch.cuda.get_device_name() if DEV == "cuda" else "cpu"
    return next((v for k, v in NOMINAL_GBPS.items() if k in name), None)


def _row(name: str, sec: float, nbytes: float, bw: float, **extra: Any) -> dict[str, Any]:
    gbps = nbytes / sec / 1e9
    print(f"  {name:44s} {sec * 1e3:9.3f} ms  {gbps:8.0f} GB/s  {100 * gbps / bw:5.1f}% of copy bw")
    return {
        "name": name,
        "ms": sec * 1e3,
        "bytes": nbytes,
        "GBps": gbps,
        "frac_of_copy_bw": gbps / bw,
        **extra,
    }


def gpu_delta_rule(bw: float, lengths: list[int]) -> list[dict[str, Any]]:
    from clover.kernels.triton.delta_rule import chunk_gated_delta_rule as tri

    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla
    except Exception as exc:  # optional
        fla, fla_err = None, f"{type(exc).__name__}: {exc}"
    rows = []
    hk, h, d = (2, 4, 16) if SMOKE else (16, 32, 128)
    print(f"GPU delta rule (35B GDN shape: {h} value / {hk} key heads, dk=dv={d}, bf16, chunk 64)")
    for t in lengths:
        q, k, v, g, beta, s0 = delta_inputs(1, t, hk, h, d, d, DEV, torch.bfloat16)
        # the bytes a fused forward must move: q, k, v, g, beta in; o out; state in and out
        nbytes = (2 * t * hk * d + 2 * t * h * d) * 2 + 2 * t * h * 4 + 2 * h * d * d * 4
        o_ref, s_ref = chunk_gated_delta_rule(q, k, v, g, beta, s0)
        o, s = tri(q, k, v, g, beta, s0)
        err = (o.float() - o_ref.float()).abs().max().item()
        rows.append(
            _row(f"triton   T={t}", bench(partial(tri, q, k, v, g, beta, s0)), nbytes, bw, max_err=err)
        )
        rows.append(
            _row(f"torch    T={t}", bench(partial(chunk_gated_delta_rule, q, k, v, g, beta, s0)), nbytes, bw)
        )
        if fla is None:
            print(f"  fla: not available ({fla_err[:80]})")
            continue

        def run_fla(q=q, k=k, v=v, g=g, beta=beta, s0=s0):  # fla >= 0.5 takes GVA as is
            return fla(q=q, k=k, v=v, g=g, beta=beta, scale=1.0, initial_state=s0, output_final_state=True)

        try:
            o_fla = run_fla()[0]
            err = (o_fla.float() - o_ref.float()).abs().max().item()
            rows.append(_row(f"fla      T={t}", bench(run_fla), nbytes, bw, max_err=err))
        except Exception as exc:
            print(f"  fla failed: {type(exc).__name__}: {str(exc)[:160]}")
    return rows


def gpu_block_gdn(bw: float) -> list[dict[str, Any]]:
    from clover.kernels.reference.block_gdn import block_gdn_attention as ref
    from clover.kernels.triton.block_gdn import block_gdn_attention as tri

    h, d, b = (2, 16, 8) if SMOKE else (32, 128, 32)
    print(f"GPU GDN block mode, decode shape (one block of {b}, {h} heads, dk=dv={d})")
    rows = []
    for nb in (1, 2) if SMOKE else (1, 64):
        q = F.normalize(torch.randn(1, nb, b, h, d, device=DEV), dim=-1)
        k = F.normalize(torch.randn(1, nb, b, h, d, device=DEV), dim=-1)
        v = torch.randn(1, nb, b, h, d, device=DEV, dtype=torch.bfloat16)
        st = torch.randn(1, nb, h, d, d, device=DEV)
        p = [torch.randn(h, device=DEV) for _ in range(3)]
        nbytes = nb * (h * d * d * 4 + 2 * b * h * d * 4 + 2 * b * h * d * 2)
        err = (tri(q, k, v, st, *p).float() - ref(q, k, v, st, *p).float()).abs().max().item()
        rows.append(
            _row(f"triton   blocks={nb}", bench(partial(tri, q, k, v, st, *p)), nbytes, bw, max_err=err)
        )
        rows.append(_row(f"torch    blocks={nb}", bench(partial(ref, q, k, v, st, *p)), nbytes, bw))
    return rows


def gpu_block_attention(bw: float, contexts: list[int]) -> list[dict[str, Any]]:
    from clover.kernels.reference.attention import attention as ref
    from clover.kernels.triton.attention import attention as tri

    hq, hkv, d, b = (4, 2, 16, 8) if SMOKE else (16, 2, 256, 32)
    print(f"GPU block attention, decode shape ({b} queries, {hq} q / {hkv} kv heads, d={d}, bf16)")
    rows = []
    for ctx in contexts:
        q = torch.randn(1, hq, b, d, device=DEV, dtype=torch.bfloat16)
        kc, vc = (torch.randn(1, hkv, ctx, d, device=DEV, dtype=torch.bfloat16) for _ in range(2))
        kb, vb = (torch.randn(1, hkv, b, d, device=DEV, dtype=torch.bfloat16) for _ in range(2))
        gate = torch.randn(1, b, hq * d, device=DEV, dtype=torch.bfloat16)
        nbytes = 2 * hkv * (ctx + b) * d * 2 + 3 * hq * b * d * 2
        k_all, v_all = torch.cat([kc, kb], 2), torch.cat([vc, vb], 2)
        mask = torch.ones(1, 1, b, ctx + b, dtype=torch.bool, device=DEV)
        err = (
            (tri(q, kc, vc, k_block=kb, v_block=vb).float() - ref(q, k_all, v_all, mask).float())
            .abs()
            .max()
            .item()
        )
        sec = bench(partial(tri, q, kc, vc, k_block=kb, v_block=vb, gate=gate), iters=20)
        rows.append(_row(f"triton   ctx={ctx}", sec, nbytes, bw, max_err=err, roofline_ms=nbytes / bw / 1e6))
        rows.append(
            _row(
                f"torch    ctx={ctx} (cat + SDPA)",
                bench(partial(_cat_attention, ref, q, kc, vc, kb, vb, mask), iters=20),
                nbytes,
                bw,
            )
        )
    return rows


def _cat_attention(ref, q, kc, vc, kb, vb, mask):
    """What the model does today: concatenate the cache and the block, then attend."""
    return ref(q, torch.cat([kc, kb], 2), torch.cat([vc, vb], 2), mask)


def gpu_moe(bw: float) -> list[dict[str, Any]]:
    from clover.kernels.reference.moe import moe_experts as ref
    from clover.kernels.triton.moe import moe_experts as tri
    from clover.kernels.triton.moe import moe_experts_grouped_mm

    e, k, hid, inter = (8, 2, 32, 16) if SMOKE else (256, 8, 2048, 512)
    gate_up = torch.randn(e, 2 * inter, hid, device=DEV, dtype=torch.bfloat16) * hid**-0.5
    down = torch.randn(e, hid, inter, device=DEV, dtype=torch.bfloat16) * inter**-0.5
    print(f"GPU MoE ({e} experts, top-{k}, hidden {hid}, expert width {inter}, bf16)")
    rows = []
    for t in (8,) if SMOKE else (32, 512, 4096):
        x = torch.randn(t, hid, device=DEV, dtype=torch.bfloat16)
        ids = torch.rand(t, e, device=DEV).topk(k, dim=-1).indices
        w = torch.rand(t, k, device=DEV, dtype=torch.bfloat16)
        touched = ids.unique().numel()
        nbytes = touched * 3 * hid * inter * 2 + 2 * t * hid * 2
        y_ref = ref(x, ids, w, gate_up, down)
        err = (tri(x, ids, w, gate_up, down).float() - y_ref.float()).abs().max().item()
        flops = 2 * t * k * 3 * hid * inter
        for name, fn in (("triton", tri), ("torch._grouped_mm", moe_experts_grouped_mm), ("torch loop", ref)):
            try:
                sec = bench(partial(fn, x, ids, w, gate_up, down), iters=10)
            except Exception as exc:
                print(f"  {name}: failed: {type(exc).__name__}: {str(exc)[:100]}")
                continue
            extra = {"max_err": err} if name == "triton" else {}
            rows.append(
                _row(
                    f"{name:18s} T={t} ({touched} experts)",
                    sec,
                    nbytes,
                    bw,
                    TFLOPs=flops / sec / 1e12,
                    **extra,
                )
            )
    return rows


def gpu_model_round(bw: float, layers: int, context: int) -> list[dict[str, Any]]:
    """A 35B-shaped Clover with `layers` layers (random bf16 weights): one 32-token denoising round
    after `context` committed tokens, per backend, against weight bytes / bandwidth."""
    from clover.model.config import CloverConfig, clover_35b_a3b, tiny
    from clover.model.modeling import CloverForCausalLM

    base = (tiny() if SMOKE else clover_35b_a3b()).to_dict()
    base.update(num_hidden_layers=layers, layer_types=[], block_size=4 if SMOKE else 32)
    cfg = CloverConfig.from_dict(base)
    torch.manual_seed(0)
    with torch.device(DEV):
        prev = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            model = CloverForCausalLM(cfg).eval()
        finally:
            torch.set_default_dtype(prev)
    b = cfg.block_size
    embed = cfg.vocab_size * cfg.hidden_size * 2
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters()) - embed  # lookup, not a read
    expert_bytes = layers * cfg.num_experts * 3 * cfg.hidden_size * cfg.moe_intermediate_size * 2
    frac = 1 - (1 - cfg.num_experts_per_tok / cfg.num_experts) ** b  # experts a 32-token block touches
    round_bytes = weight_bytes - expert_bytes * (1 - frac)
    print(
        f"GPU model round: 35B shape cut to {layers} layers ({cfg.layer_types.count('full_attention')} attention), "
        f"context {context}, block {b}; weights read per round ~{round_bytes / 1e9:.2f} GB"
    )
    rows = []
    ids = torch.randint(0, cfg.vocab_size - 1, (1, context), device=DEV)
    block = torch.full((1, b), cfg.mask_token_id, device=DEV)
    for name in ("torch", "triton"):
        os.environ["CLOVER_KERNELS"] = name
        cache = model.new_cache(1)
        model.prefill(ids, cache)
        _sync()
        sec = bench(partial(model.denoise, block, cache), iters=10)
        rows.append(
            _row(f"{name:7s} denoise round", sec, round_bytes, bw, roofline_ms=round_bytes / bw / 1e6)
        )
        t0 = time.perf_counter()
        model.commit(block, cache)
        _sync()
        print(
            f"  {name:7s} commit of one block: {(time.perf_counter() - t0) * 1e3:.2f} ms (one call, incl. launch)"
        )
    os.environ.pop("CLOVER_KERNELS", None)
    del model
    if DEV == "cuda":
        torch.cuda.empty_cache()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true", help="CPU: chunked vs recurrent delta rule")
    ap.add_argument("--gpu", action="store_true", help="GPU: Triton vs torch vs fla, bandwidth figures")
    ap.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--heads", type=int, default=4, help="CPU value heads")
    ap.add_argument("--dim", type=int, default=128, help="CPU dk = dv")
    ap.add_argument("--layers", type=int, default=4, help="GPU model cut")
    ap.add_argument("--context", type=int, default=4096, help="GPU model round: committed tokens")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--smoke", action="store_true", help="GPU sections on CPU, tiny shapes (TRITON_INTERPRET=1)"
    )
    args = ap.parse_args(argv)
    global DEV, SMOKE
    if args.smoke:
        DEV, SMOKE, args.gpu = "cpu", True, True
    if not (args.cpu or args.gpu):
        args.cpu = True
    figures: dict[str, Any] = {}
    if args.cpu:
        figures["cpu_delta_rule"] = cpu_delta_rule(args.lengths, args.heads, args.dim)
    if args.gpu:
        if DEV == "cuda" and not torch.cuda.is_available():
            print("--gpu: no CUDA device")
            return 1
        bw = copy_bandwidth_gbps()
        figures["device"] = torch.cuda.get_device_name() if DEV == "cuda" else "cpu (smoke)"
        figures["copy_GBps"], figures["nominal_GBps"] = bw, _nominal()
        print(
            f"{figures['device']}: measured copy bandwidth {bw:.0f} GB/s (nominal {figures['nominal_GBps']})"
        )
        for key, fn in (
            ("delta_rule", lambda: gpu_delta_rule(bw, args.lengths)),
            ("block_gdn", lambda: gpu_block_gdn(bw)),
            ("block_attention", lambda: gpu_block_attention(bw, [40] if SMOKE else [4096, 32768, 131072])),
            ("moe", lambda: gpu_moe(bw)),
            ("model_round", lambda: gpu_model_round(bw, args.layers, args.context)),
        ):
            try:  # one failing section must not lose the others' figures
                figures[key] = fn()
            except Exception as exc:
                figures[key] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                print(f"{key}: FAILED {figures[key]['error']}")
            if args.json:
                args.json.write_text(json.dumps(figures, indent=1, default=str))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
        print(f"figures -> {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
