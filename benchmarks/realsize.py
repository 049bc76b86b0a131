"""Clover at real size on this machine, in one process: memory bandwidth, the load under peak-RSS
measurement, the cost curve of one forward against its width, and B = 1 against block decoding on
the same weights; then the closing table against the weight-traffic bound.

    python -m benchmarks.realsize --model /work/big/clover-35b-gptq [--full-layers 40] [--json out.json]

- Bandwidth: a STREAM-like copy (bytes read + written per second) and a read-only sum, 2 x 512 MB,
  with the threads decoding uses; measured before the model is loaded.
- Load: peak RSS of the process (VmHWM, reset after the imports) and seconds.
- Weight traffic: the bytes a token's forward reads (every dense and quantized matrix of the layers,
  the router, the shared expert, top-k routed experts, lm_head), counted off the loaded modules.
- Cost curve: after a prompt, one forward of W tokens (W = 1, 2, 4, ...) in both shapes the decoders
  use: causal (a B = 1 step at W = 1, a verify check) and a denoising round of a block of W; its time
  split by forward hooks into attention, GDN, router, routed experts, shared expert, lm_head and the
  rest, and the distinct experts it touched. The tokens per forward a decoder needs at width W to
  beat B = 1 is time(W) / time(1).
- Decoding: greedy, no stop token, the same prompt: B = 1, then B = W in verify order and in plain
  blocks (threshold 0.9), each with forwards, tokens per forward and tok/s.

A checkpoint cut to fewer layers than the real model (`--full-layers`) is extrapolated layer by layer:
every figure that grows with depth (forward time split by layer type, weight bytes, resident
memory, load time by file bytes) is scaled to the full layer count with the measured per-layer
costs of each layer type (GDN, attention); the rest (embedding, final norm, lm_head) is counted
once. Both the measured and the extrapolated figures are printed.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch import nn

from benchmarks.decode import prompt_ids
from clover.model.config import FULL_ATTENTION
from clover.model.generate import DecodeSettings, generate
from clover.model.layers.moe import Experts
from clover.model.quantized import PackedWeight, QuantExperts

GB = 1e9
COMPONENTS = ("attention", "gdn", "router", "experts", "shared", "lm_head", "rest")


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def bandwidth(mb: int = 512, repeats: int = 5) -> dict[str, float]:
    """STREAM-like copy (read + write bytes / s) and read (sum) bandwidth, best of `repeats`."""
    n = mb * (1 << 20) // 4
    a, b = torch.ones(n), torch.empty(n)
    copy = read = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        b.copy_(a)
        copy = min(copy, time.perf_counter() - t0)
        t0 = time.perf_counter()
        a.sum()
        read = min(read, time.perf_counter() - t0)
    return {"copy_gb_s": 2 * n * 4 / copy / GB, "read_gb_s": n * 4 / read / GB}


# ---------------------------------------------------------------------- weight bytes


def _matrix_bytes(module: nn.Module) -> int:
    """Bytes of the matrices a forward of `module` reads, whatever their form."""
    total = 0
    for m in module.modules():
        if isinstance(m, PackedWeight):
            total += m.nbytes()
        elif isinstance(m, (nn.Linear, nn.Conv1d)):
            total += m.weight.numel() * m.weight.element_size()
    return total


def expert_bytes(experts: nn.Module) -> int:
    """Bytes of one routed expert (gate, up and down)."""
    if isinstance(experts, QuantExperts):
        return (experts.gate_up.nbytes() + experts.down.nbytes()) // experts.gate_up.shape[0]
    assert isinstance(experts, Experts)
    p = experts.gate_up_proj
    return (p[0].numel() + experts.down_proj[0].numel()) * p.element_size()


def layer_traffic(layer: nn.Module, experts_touched: float) -> int:
    """Bytes one forward of `layer` reads when it touches `experts_touched` distinct experts."""
    mlp = layer.mlp
    dense = _matrix_bytes(layer.mixer) + _matrix_bytes(mlp.gate) + _matrix_bytes(mlp.shared_expert)
    dense += _matrix_bytes(mlp.shared_expert_gate)
    return int(dense + experts_touched * expert_bytes(mlp.experts))


def resident_bytes(module: nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))


class Depth:
    """Measured layers -> the full model's layer counts, per layer type."""

    def __init__(self, model, full_layers: int) -> None:
        cfg = model.config
        self.types = list(cfg.layer_types)
        interval = cfg.full_attention_interval
        full = [FULL_ATTENTION if (i + 1) % interval == 0 else "linear_attention" for i in range(full_layers)]
        self.scale = {t: full.count(t) / max(self.types.count(t), 1) for t in set(self.types)}
        self.full_layers, self.missing = full_layers, [t for t in set(full) if t not in self.types]

    def layers(self, per_layer: list[float]) -> float:
        """Sum over the full model's layers of a per-layer figure measured on these layers."""
        return sum(v * self.scale[t] for v, t in zip(per_layer, self.types, strict=True))


# ---------------------------------------------------------------------- the cost curve


class Split:
    """Forward hooks that time each component and count the distinct experts each layer touches."""

    def __init__(self, model) -> None:
        self.model, self.handles = model, []
        self.seconds: dict[str, float] = defaultdict(float)
        self.per_layer: list[float] = [0.0] * len(model.model.layers)
        self.per_layer_parts: list[dict[str, float]] = [defaultdict(float) for _ in model.model.layers]
        self.touched: list[int] = []
        self._starts: dict[int, float] = {}

    def _watch(self, module: nn.Module, on_done) -> None:
        def pre(mod, args):
            self._starts[id(mod)] = time.perf_counter()

        def post(mod, args, out):
            on_done(time.perf_counter() - self._starts.pop(id(mod)), args)

        self.handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]

    def __enter__(self) -> Split:
        for i, layer in enumerate(self.model.model.layers):
            kind = "attention" if layer.layer_type == FULL_ATTENTION else "gdn"
            parts = self.per_layer_parts[i]

            def add(name, dt, parts=parts):
                self.seconds[name] += dt
                parts[name] += dt

            self._watch(layer, lambda dt, a, i=i: self.per_layer.__setitem__(i, self.per_layer[i] + dt))
            self._watch(layer.mixer, lambda dt, a, kind=kind, add=add: add(kind, dt))
            self._watch(layer.mlp, lambda dt, a, add=add: add("mlp", dt))
            self._watch(layer.mlp.experts, lambda dt, a, add=add: (add("experts", dt), self.touched.append(int(a[1].unique().numel()))))
            self._watch(layer.mlp.shared_expert, lambda dt, a, add=add: add("shared", dt))
            self._watch(layer.mlp.shared_expert_gate, lambda dt, a, add=add: add("shared", dt))
        self._watch(self.model.lm_head, lambda dt, a: self.seconds.__setitem__("lm_head", self.seconds["lm_head"] + dt))
        return self

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()

    def parts(self, total: float) -> dict[str, float]:
        """Seconds per component; router = the MoE block less its experts; rest = what no hook saw."""
        s = dict(self.seconds)
        mlp = s.pop("mlp", 0.0)
        s["router"] = mlp - s.get("experts", 0.0) - s.get("shared", 0.0)
        s["rest"] = total - sum(s.get(k, 0.0) for k in COMPONENTS if k != "rest")
        return {k: s.get(k, 0.0) for k in COMPONENTS}


def _forward(model, cache, kind: str, width: int, gen: torch.Generator) -> None:
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (1, width), generator=gen, device=model.device)
    ids[ids == model.config.mask_token_id] = 0
    if kind == "causal":  # a B = 1 step (commit + its logits) or a verify check of W tokens
        model.lm_head(model.peek(ids, cache))
    else:  # a denoising round: every position masked but the first
        block = torch.full((1, width), model.config.mask_token_id, device=model.device)
        block[0, 0] = ids[0, 0]
        model.denoise(block, cache)


def cost_curve(model, prompt: list[int], widths: list[int], repeats: int, depth: Depth) -> list[dict]:
    cache = model.new_cache(1)
    model.prefill(torch.tensor([prompt], device=model.device), cache)
    gen = torch.Generator().manual_seed(0)
    rows = []
    for kind in ("causal", "denoise"):
        for w in widths:
            if kind == "denoise" and w == 1:
                continue  # B = 1 takes its logits from the committed prefix: no forward
            _forward(model, cache, kind, w, gen)  # warm-up
            best = None
            for _ in range(repeats):
                with torch.no_grad(), Split(model) as split:
                    t0 = time.perf_counter()
                    _forward(model, cache, kind, w, gen)
                    total = time.perf_counter() - t0
                if best is None or total < best[0]:
                    best = (total, split)
            total, split = best
            parts = split.parts(total)
            layers_full = depth.layers(split.per_layer)
            outside = total - sum(split.per_layer)  # embedding, final norm, lm_head, glue
            touched = sum(split.touched) / max(len(split.touched), 1)
            rows.append({
                "kind": kind, "width": w, "seconds": total, "seconds_full": outside + layers_full,
                "parts": parts, "parts_full": _parts_full(split, parts, depth), "experts_touched": touched,
            })  # fmt: skip
            print(_curve_line(rows[-1]), flush=True)
    base = next(r for r in rows if r["kind"] == "causal" and r["width"] == 1)
    for r in rows:
        r["break_even_tpf"] = r["seconds_full"] / base["seconds_full"]
    return rows


def _parts_full(split: Split, parts: dict[str, float], depth: Depth) -> dict[str, float]:
    """Each layer component extrapolated to the full depth; lm_head and the rest counted once."""
    out = {k: parts[k] for k in ("lm_head", "rest")}
    for k in ("attention", "gdn", "experts", "shared"):
        out[k] = depth.layers([p.get(k, 0.0) for p in split.per_layer_parts])
    mlp_full = depth.layers([p.get("mlp", 0.0) for p in split.per_layer_parts])
    out["router"] = mlp_full - out["experts"] - out["shared"]
    return {k: out[k] for k in COMPONENTS}


def _curve_line(r: dict) -> str:
    p = r["parts_full"]
    split = " ".join(f"{k} {p[k] * 1e3:.0f}" for k in COMPONENTS)
    return (f"  {r['kind']:8} W={r['width']:<3} {r['seconds'] * 1e3:8.1f} ms measured, {r['seconds_full'] * 1e3:8.1f} ms "
            f"full depth [{split} ms]; experts touched per layer {r['experts_touched']:.1f}")  # fmt: skip


# ---------------------------------------------------------------------- decoding


def decode(model, prompt: list[int], block: int, order: str | None, new: int) -> dict:
    s = DecodeSettings(block_size=block, order=order, threshold=0.9, max_new_tokens=new, stop_token_ids=[],
                       repetition=None)  # fmt: skip
    generate(model, [prompt], DecodeSettings(block_size=block, order=order, max_new_tokens=min(new, 4),
                                             stop_token_ids=[], repetition=None))  # warm-up  # fmt: skip
    res = generate(model, [prompt], s)
    st = res.stats
    return {"block": block, "order": order or "-", "forwards": st["forwards"], "tpf": st["tokens_per_forward"],
            "tok_per_s": st["tok_per_s"], "tokens": res.tokens[0]}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--quantize", default="none", choices=("none", "int8", "int4"),
                    help="quantize the checkpoint's floating-point matrices on load (lm_head, ...)")
    ap.add_argument("--full-layers", type=int, default=40, help="the real model's depth, for extrapolation")
    ap.add_argument("--widths", default="1,2,4,8,16,32")
    ap.add_argument("--block", type=int, default=0, help="the block decoders' width (0: the default this picks)")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--format-name", default="", help="the closing table's format label")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    from clover.model.decode_width import choose_width
    from clover.model.load import CheckpointError, load_checkpoint

    bw = bandwidth()
    print(f"bandwidth: copy {bw['copy_gb_s']:.1f} GB/s, read {bw['read_gb_s']:.1f} GB/s "
          f"({torch.get_num_threads()} threads)", flush=True)  # fmt: skip
    base_rss = _status("VmRSS")
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    t0 = time.perf_counter()
    try:
        model, config, _ = load_checkpoint(a.model, quantize=None if a.quantize == "none" else a.quantize)
    except CheckpointError as exc:
        raise SystemExit(f"realsize: {exc}") from None
    load_s = time.perf_counter() - t0
    peak_load = _status("VmHWM")
    depth = Depth(model, a.full_layers)
    layers = list(model.model.layers)
    per_layer_resident = [resident_bytes(m) for m in layers]
    file_bytes = sum(f.stat().st_size for f in a.model.glob("*.safetensors"))
    layer_file_share = sum(per_layer_resident) / max(resident_bytes(model), 1)
    extra_layers = depth.layers(per_layer_resident) - sum(per_layer_resident)
    print(f"load: {load_s:.1f} s, peak RSS {peak_load / GB:.2f} GB ({(peak_load - base_rss) / GB:.2f} GB above the "
          f"imports); {len(layers)} of {a.full_layers} layers", flush=True)  # fmt: skip

    k = config.num_experts_per_tok
    traffic = {"per_token": depth.layers([layer_traffic(m, k) for m in layers]) + _matrix_bytes(model.lm_head)}
    traffic["per_token_measured"] = sum(layer_traffic(m, k) for m in layers) + _matrix_bytes(model.lm_head)
    bound = bw["copy_gb_s"] * GB / traffic["per_token"]
    print(f"weight traffic per token at B = 1: {traffic['per_token'] / GB:.2f} GB full depth "
          f"({traffic['per_token_measured'] / GB:.2f} GB measured): bound {bound:.2f} tok/s at the copy bandwidth",
          flush=True)  # fmt: skip

    prompt = prompt_ids(a.model, config, a.prompt_tokens)
    widths = [int(w) for w in a.widths.split(",") if w]
    print("cost curve (one forward after the prompt; ms; full depth extrapolated):", flush=True)
    curve = cost_curve(model, prompt, widths, a.repeats, depth)
    choice = choose_width(config, torch.device("cpu"))
    block = a.block or choice.width if (a.block or choice.width) > 1 else 8
    print(f"default decode width for this checkpoint here: {choice.width} ({choice.reason})", flush=True)

    runs = [decode(model, prompt, 1, None, a.new_tokens)]
    for order in ("verify", "any"):
        runs.append(decode(model, prompt, block, order, a.new_tokens))
    t1 = {r["width"]: r["seconds_full"] / r["seconds"] for r in curve if r["kind"] == "causal"}
    for r in runs:
        r["agree_b1"] = sum(x == y for x, y in zip(r["tokens"], runs[0]["tokens"], strict=False)) / a.new_tokens
        scale = t1.get(1 if r["block"] == 1 else r["block"], t1[1])
        r["tok_per_s_full"] = r["tok_per_s"] / scale
        print(f"decode B={r['block']:<3} {r['order']:7} forwards {r['forwards']:4.0f}, tok/fwd {r['tpf']:.2f}, "
              f"{r['tok_per_s']:.2f} tok/s measured, {r['tok_per_s_full']:.2f} full depth, "
              f"same tokens as B=1 {r['agree_b1']:.2f}", flush=True)  # fmt: skip
    peak_run = _status("VmHWM")
    full_peak = peak_run + extra_layers
    load_full = load_s * (1 + (depth.layers([1.0] * len(layers)) / len(layers) - 1) * layer_file_share)
    summary = {
        "format": a.format_name or _format_name(a.model, a.quantize), "layers": len(layers), "full_layers": a.full_layers,
        "peak_rss_gb": peak_run / GB, "peak_rss_full_gb": full_peak / GB, "load_s": load_s, "load_full_s": load_full,
        "tok_s_b1": runs[0]["tok_per_s_full"], "tok_s_block": runs[1]["tok_per_s_full"], "block": block,
        "bound_tok_s": bound, "bandwidth": bw, "traffic": traffic, "file_gb": file_bytes / GB,
    }  # fmt: skip
    _closing(summary)
    if a.json:
        out = {"summary": summary, "curve": curve, "decode": [{k: v for k, v in r.items() if k != "tokens"} for r in runs]}
        a.json.write_text(json.dumps(out, indent=1))
    return 0


def _format_name(directory: Path, quantize: str) -> str:
    raw = json.loads((directory / "config.json").read_text())
    method = (raw.get("quantization_config") or {}).get("quant_method", "bf16")
    return method + ("" if quantize == "none" else f" + {quantize} rest")


def _closing(s: dict) -> None:
    depth = "" if s["layers"] == s["full_layers"] else f" (measured on {s['layers']} layers, extrapolated)"
    print(f"\nclosing table{depth}:")
    print("| format | peak RSS | load | tok/s B = 1 | tok/s B = %d verify | weight-traffic bound | B = 1 / bound |" % s["block"])
    print("|---|---|---|---|---|---|---|")
    print(f"| {s['format']} | {s['peak_rss_full_gb']:.1f} GB | {s['load_full_s']:.0f} s | {s['tok_s_b1']:.2f} | "
          f"{s['tok_s_block']:.2f} | {s['bound_tok_s']:.2f} tok/s ({s['traffic']['per_token'] / GB:.2f} GB/token at "
          f"{s['bandwidth']['copy_gb_s']:.1f} GB/s) | {s['tok_s_b1'] / s['bound_tok_s']:.2f} |")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
