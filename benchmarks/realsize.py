"""Clover at real size on one machine, in one process: memory bandwidth, the load under peak-RSS
measurement, one forward's cost against its width, and B = 1 against block decoding on the same
weights; then the closing table against the weight-traffic bound.

    python -m benchmarks.realsize --model /work/big/clover-35b-gptq [--full-layers 40] [--json out.json]
    python -m benchmarks.realsize --random int4 --layers 40 --device cuda     # no checkpoint (GPU)

- Bandwidth: a STREAM-like copy and a read-only sum (benchmarks/cost_curve.py), before the load.
- Load: the process's peak RSS (VmHWM, reset after the imports) and seconds; on a GPU also the
  device memory allocated.
- Weight traffic: the bytes one token's forward reads (every matrix of the mixers, the router, the
  shared expert, top-k routed experts, lm_head), counted off the loaded modules; the bound is the
  copy bandwidth over it.
- Cost curve: benchmarks/cost_curve.py. Break-even tokens per forward at width W: time(W) / time(1).
- Decoding: greedy, no stop token, one prompt: B = 1, then B = W in verify order and in plain blocks
  (order any, threshold 0.9), each with forwards, tokens per forward, tok/s and the share of tokens
  equal to B = 1's (random weights: tokens per forward and agreement say nothing about a trained
  model's; the costs do).

A checkpoint cut to fewer layers than the real model (`--full-layers`) is extrapolated layer type by
layer type (GDN, attention): per-layer time, weight bytes and resident memory scale to the full
count; the embedding, final norm and lm_head count once; load time scales with the bytes of the
layers. Both the measured and the extrapolated figures are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
from pathlib import Path

import torch

from benchmarks.cost_curve import (
    GB,
    Depth,
    bandwidth,
    cost_curve,
    layer_traffic,
    matrix_bytes,
    now,
    resident_bytes,
    use_cpu_clock,
)
from benchmarks.decode import prompt_ids
from clover.model.config import CloverConfig
from clover.model.decoder.generate import DecodeSettings, generate


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def full_config(config: CloverConfig, layers: int) -> CloverConfig:
    """`config` at `layers` layers, every `full_attention_interval`-th one attention."""
    d = dataclasses.asdict(config)
    d.update(num_hidden_layers=layers, layer_types=[])
    return CloverConfig(**d)


def decode(model, prompt: list[int], block: int, order: str | None, new: int, cpu_clock: bool) -> dict:
    """Greedy decoding of `new` tokens. tok/s: the decoder's own (wall clock, prefill excluded); with
    the CPU clock, (new - 4) tokens over the CPU time of a `new`-token run less a 4-token one (the
    prefill, the same in both, cancels)."""

    def settings(n: int) -> DecodeSettings:
        return DecodeSettings(
            block_size=block, order=order, threshold=0.9, max_new_tokens=n, stop_token_ids=[], repetition=None
        )

    short = min(new - 1, 4)
    t0 = now()
    generate(model, [prompt], settings(short))  # also the warm-up
    t1 = now()
    res = generate(model, [prompt], settings(new))
    t2 = now()
    st = res.stats
    rate = (new - short) / max((t2 - t1) - (t1 - t0), 1e-9) if cpu_clock else st["tok_per_s"]
    return {
        "block": block,
        "order": order or "-",
        "forwards": st["forwards"],
        "tpf": st["tokens_per_forward"],
        "tok_per_s": rate,
        "tokens": res.tokens[0],
    }


def _load(a) -> tuple[torch.nn.Module, float, str]:
    from clover.model.loading.load import CheckpointError, load_checkpoint

    if a.random:
        from benchmarks.write_realsize import random_model, realsize_config

        t0 = now()
        model = random_model(realsize_config(a.layers, "tiny" if a.tiny else "35b"), a.random, a.device)
        return model, now() - t0, f"random {a.random}"
    t0 = now()
    try:
        model = load_checkpoint(
            a.model, device=a.device, quantize=None if a.quantize == "none" else a.quantize
        ).model
    except CheckpointError as exc:
        raise SystemExit(f"realsize: {exc}") from None
    raw = json.loads((a.model / "config.json").read_text())
    name = (raw.get("quantization_config") or {}).get("quant_method", raw.get("torch_dtype", "bf16"))
    return model, now() - t0, name + ("" if a.quantize == "none" else f" + {a.quantize} on load")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", type=Path, help="checkpoint directory")
    src.add_argument(
        "--random", choices=("int4", "bf16"), help="no checkpoint: a random model built on the device"
    )
    ap.add_argument("--layers", type=int, default=40, help="with --random: layers to build")
    ap.add_argument("--tiny", action="store_true", help="with --random: the test preset's dimensions")
    ap.add_argument(
        "--quantize",
        default="none",
        choices=("none", "int8", "int4"),
        help="quantize the checkpoint's floating-point matrices on load (lm_head, ...)",
    )
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--full-layers", type=int, default=40, help="the real model's depth, for extrapolation")
    ap.add_argument("--widths", default="1,2,4,8,16,32")
    ap.add_argument(
        "--block",
        type=int,
        default=0,
        help="the block decoders' width (0: the default for the checkpoint, at least 4)",
    )
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", type=Path, help="append the figures to this JSON file")
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="cpu: time by the process's CPU time (use with --threads 1 on a shared machine)",
    )
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    use_cpu_clock(a.clock == "cpu")
    from clover.model.decoder.decode_width import choose_width, traffic_ratio

    dev = torch.device(a.device)
    bw = bandwidth(dev)
    print(
        f"bandwidth ({a.device}, {torch.get_num_threads()} threads, {a.clock} clock): copy {bw['copy_gb_s']:.1f} GB/s, "
        f"read {bw['read_gb_s']:.1f} GB/s",
        flush=True,
    )
    base_rss = _status("VmRSS")
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")  # peak RSS from here
    with torch.no_grad():
        model, load_s, fmt = _load(a)
    peak_load = _status("VmHWM")
    gpu_mem = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else 0
    config = model.config
    depth = Depth(model, a.full_layers)
    layers = list(model.model.layers)
    per_layer = [resident_bytes(m) for m in layers]
    extra_layers = depth.layers(per_layer) - sum(per_layer)
    print(
        f"load ({fmt}): {load_s:.1f} s, peak RSS {peak_load / GB:.2f} GB ({(peak_load - base_rss) / GB:.2f} GB above "
        f"the imports){f', GPU {gpu_mem / GB:.1f} GB' if gpu_mem else ''}; {len(layers)} of {a.full_layers} layers",
        flush=True,
    )

    k = config.num_experts_per_tok
    head = matrix_bytes(model.lm_head)
    traffic = {
        "per_token": depth.layers([layer_traffic(m, k) for m in layers]) + head,
        "per_token_measured": sum(layer_traffic(m, k) for m in layers) + head,
    }
    bound = bw["copy_gb_s"] * GB / traffic["per_token"]
    print(
        f"weight traffic per token at B = 1: {traffic['per_token'] / GB:.2f} GB at full depth "
        f"({traffic['per_token_measured'] / GB:.2f} GB measured): bound {bound:.2f} tok/s at the copy bandwidth",
        flush=True,
    )

    from benchmarks.write_realsize import embedded_dir

    prompt = prompt_ids(a.model or embedded_dir(), config, a.prompt_tokens)
    widths = [int(w) for w in a.widths.split(",") if w]
    print("cost curve, one forward after the prompt (ms at full depth, split):", flush=True)
    with torch.no_grad():
        curve = cost_curve(model, prompt, widths, a.repeats, depth, log=lambda s: print(s, flush=True))
    real = full_config(config, a.full_layers)
    choice = choose_width(real, dev)
    ratios = ", ".join(f"W={w}: {traffic_ratio(real, w):.2f}" for w in widths if w > 1)
    print(f"weight-traffic break-even tokens per forward (uniform routing): {ratios}")
    print(f"default decode width for this checkpoint: {choice.width} ({choice.reason})", flush=True)
    block = a.block or max(choice.width, 4)

    runs = [decode(model, prompt, 1, None, a.new_tokens, a.clock == "cpu")]
    runs += [
        decode(model, prompt, block, order, a.new_tokens, a.clock == "cpu") for order in ("verify", "any")
    ]
    measured_over_full = {
        r["width"]: r["seconds"] / r["seconds_full"] for r in curve if r["kind"] == "causal"
    }
    for r in runs:
        r["agree_b1"] = (
            sum(x == y for x, y in zip(r["tokens"], runs[0]["tokens"], strict=False)) / a.new_tokens
        )
        r["tok_per_s_full"] = r["tok_per_s"] * measured_over_full.get(r["block"], measured_over_full[1])
        print(
            f"decode B={r['block']:<3} {r['order']:7} forwards {r['forwards']:4.0f}, tok/fwd {r['tpf']:.2f}, "
            f"{r['tok_per_s']:.2f} tok/s measured, {r['tok_per_s_full']:.2f} at full depth, "
            f"same tokens as B=1 {r['agree_b1']:.2f}",
            flush=True,
        )
    peak_run = _status("VmHWM")
    summary = {
        "format": fmt,
        "device": a.device,
        "layers": len(layers),
        "full_layers": a.full_layers,
        "peak_rss_gb": peak_run / GB,
        "peak_rss_full_gb": (peak_run + extra_layers * (dev.type == "cpu")) / GB,
        "gpu_gb": gpu_mem / GB,
        "load_s": load_s,
        "load_full_s": load_s
        * (depth.layers(per_layer) + resident_bytes(model) - sum(per_layer))
        / resident_bytes(model),
        "tok_s_b1": runs[0]["tok_per_s_full"],
        "tok_s_block": runs[1]["tok_per_s_full"],
        "block": block,
        "default_width": choice.width,
        "bound_tok_s": bound,
        "bandwidth": bw,
        "traffic": traffic,
    }
    print_closing(summary)
    if a.json:
        existing = json.loads(a.json.read_text()) if a.json.is_file() else {}
        existing.setdefault("realsize", []).append(
            {
                "summary": summary,
                "curve": curve,
                "decode": [{k: v for k, v in r.items() if k != "tokens"} for r in runs],
            }
        )
        a.json.write_text(json.dumps(existing, indent=1))
    return 0


def print_closing(s: dict) -> None:
    scope = (
        ""
        if s["layers"] == s["full_layers"]
        else f"; measured on {s['layers']} layers, extrapolated to {s['full_layers']}"
    )
    print(f"\nclosing table ({s['device']}{scope}):")
    print(
        f"| format | peak RSS | load | tok/s B = 1 | tok/s B = {s['block']} verify | weight-traffic bound "
        "| B = 1 / bound |"
    )
    print("|---|---|---|---|---|---|---|")
    gpu = f" (+{s['gpu_gb']:.1f} GB GPU)" if s["gpu_gb"] else ""
    print(
        f"| {s['format']} | {s['peak_rss_full_gb']:.1f} GB{gpu} | {s['load_full_s']:.0f} s | {s['tok_s_b1']:.2f} | "
        f"{s['tok_s_block']:.2f} | {s['bound_tok_s']:.2f} tok/s ({s['traffic']['per_token'] / GB:.2f} GB/token at "
        f"{s['bandwidth']['copy_gb_s']:.1f} GB/s) | {s['tok_s_b1'] / s['bound_tok_s']:.2f} |"
    )


if __name__ == "__main__":
    raise SystemExit(main())
