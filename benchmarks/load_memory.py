"""Peak host memory and time of loading a checkpoint with the streaming loader (clover.model.loading.load),
for both expert layouts, each load in a fresh subprocess. (The loader it replaced and the figures of
the two side by side: docs/performance.md, "Loading".)

Measured: the process's peak RSS above its RSS right after the imports (the peak is reset there by
writing 5 to /proc/self/clear_refs, and read as VmHWM afterwards), and the load's wall time. The bound
the loader keeps: on CPU peak <= model bytes + 1.2 x largest shard + 100 MB; onto a GPU <= 1.2 x largest
shard + 100 MB. The peak is judged after every weight has been read once, since weights mapped from the
file (the loader does that for CPU tensors already in the wanted dtype) count in RSS from then on.

    python -m benchmarks.load_memory                      # ~600 MB bf16, 4 shards, both layouts, CPU
    python -m benchmarks.load_memory --device cuda --json figures.json
    python -m benchmarks.load_memory --preset clover-35b-a3b --layers 8 --layouts fused
    python -m benchmarks.load_memory --preset clover-35b-a3b --layers 4 --quantize int4

`--quantize int4|int8`: the loader quantizes on load (model/loading/load_quant.py); the model's bytes
in the bound are then its quantized bytes as loaded, so the peak is judged against the quantized size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MB = 1 << 20


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(directory: str, device: str, quantize: str | None = None) -> None:
    """One load in this (fresh) process; prints one JSON line."""
    import torch

    from clover.model.config import tiny
    from clover.model.loading.load import load_checkpoint
    from clover.model.modeling import CloverForCausalLM

    torch.set_num_threads(1)
    # The loader builds the model on the meta device; torch's first meta op imports torch._dynamo
    # (~160 MB, seconds): an import, whatever the checkpoint's size, so it happens before the baseline.
    with torch.device("meta"):
        CloverForCausalLM(tiny())
    base = _status("VmRSS")
    try:
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        reset = True
    except OSError:
        reset = False
    t0 = time.perf_counter()
    kwargs = {"quantize": quantize} if quantize else {}
    model = load_checkpoint(directory, device=device, dtype=torch.bfloat16, **kwargs).model
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    peak = _status("VmHWM")
    # Weights that still map the file (tensors stored in the wanted dtype) only become resident when
    # first read: read each once, so the peak in use is measured too.
    with torch.no_grad():
        for p in model.parameters():
            p.sum()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    in_use = time.perf_counter() - t0
    tensors = [*model.parameters(), *model.buffers()]  # quantized weights are buffers
    on_host = sum(p.numel() * p.element_size() for p in tensors if p.device.type == "cpu")
    print(
        json.dumps(
            {
                "peak_above_import": peak - base,
                "seconds": seconds,
                "host_param_bytes": on_host,
                "peak_in_use_above_import": _status("VmHWM") - base,
                "seconds_to_in_use": in_use,
                "peak_reset": reset,
            }
        )
    )


def _config(preset: str, layers: int | None):
    from clover.model.config import CloverConfig
    from clover.model.config import preset as named

    if preset == "bench-600mb":  # 0.31B parameters: 627 MB (598 MiB) in bf16, experts ~60% of it
        return CloverConfig(
            vocab_size=32000,
            hidden_size=1024,
            num_hidden_layers=4,
            full_attention_interval=2,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=128,
            linear_num_key_heads=8,
            linear_num_value_heads=16,
            linear_key_head_dim=64,
            linear_value_head_dim=64,
            num_experts=41,
            num_experts_per_tok=4,
            moe_intermediate_size=448,
            shared_expert_intermediate_size=512,
            mask_token_id=31999,
        )
    cfg = named(preset)
    if layers:
        d = cfg.to_dict()
        d.update(num_hidden_layers=layers, layer_types=cfg.layer_types[:layers])
        cfg = CloverConfig.from_dict(d)
    return cfg


def write(directory: Path, preset: str, layers: int | None, layout: str, shards: int) -> dict:
    import torch

    from benchmarks.ckpt_write import in_layout, random_tensors, state_bytes, write_shards

    cfg = _config(preset, layers)
    total = state_bytes(cfg, torch.bfloat16)
    t0 = time.perf_counter()
    files = write_shards(
        in_layout(random_tensors(cfg, torch.bfloat16), layout), directory, cfg, total // shards + 1
    )
    return {
        "model_bytes": total,
        "largest_shard": max(f.stat().st_size for f in files),
        "shards": len(files),
        "write_seconds": time.perf_counter() - t0,
    }


def measure(directory: Path, device: str, repeat: int, quantize: str | None = None) -> dict:
    """The median of `repeat` loads, each in a fresh process (a shared machine is noisy)."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.load_memory",
                "--child",
                str(directory),
                "--device",
                device,
                *(["--quantize", quantize] if quantize else []),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if out.returncode:
            return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if isinstance(runs[0][k], (int, float))}
    return {**runs[0], **med, "repeat": repeat}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--preset", default="bench-600mb", help="bench-600mb, clover-35b-a3b, tiny")
    ap.add_argument("--layers", type=int, default=None, help="cut the preset to this many layers")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--layouts", nargs="+", default=["per_expert", "fused"])
    ap.add_argument("--repeat", type=int, default=3, help="loads per figure (median)")
    ap.add_argument("--dir", default=None, help="where to write the checkpoints (default: a temp dir)")
    ap.add_argument("--json", default=None, help="append the figures to this JSON file")
    ap.add_argument("--quantize", choices=("int4", "int8"), default=None, help="quantize on load")
    a = ap.parse_args(argv)
    if a.child:
        child(a.child, a.device, a.quantize)
        return 0
    root = Path(a.dir or tempfile.mkdtemp(prefix="clover-loadbench-"))
    rows = []
    for layout in a.layouts:
        d = root / layout
        info = write(d, a.preset, a.layers, layout, a.shards)
        slack = 1.2 * info["largest_shard"] + 100 * MB
        r = measure(d, a.device, a.repeat, a.quantize)
        # quantized on load, the model in memory is its quantized bytes (as loaded), not the file's
        held = r.get("host_param_bytes", 0) if a.quantize else info["model_bytes"]
        bound = slack + (held if a.device == "cpu" else 0)
        row = {
            "layout": layout,
            "device": a.device,
            "preset": a.preset,
            **info,
            **r,
            "bound": bound,
            "quantize": a.quantize,
            "model_bytes_loaded": held,
        }
        if "peak_above_import" in r:
            # judged once every weight has been read: mapped weights count from then on
            peak = max(r["peak_above_import"], r["peak_in_use_above_import"])
            row["within_bound"] = peak <= bound
            row["beyond_model"] = peak - (held if a.device == "cpu" else 0)
        rows.append(row)
        print(_line(row), flush=True)
        if not a.dir:
            import shutil

            shutil.rmtree(d, ignore_errors=True)
    if a.json:
        p = Path(a.json)
        existing = json.loads(p.read_text()) if p.is_file() else {}
        existing.setdefault("load_memory", []).extend(rows)
        p.write_text(json.dumps(existing, indent=1))
    return 0 if all(r.get("within_bound", True) for r in rows) else 1


def _line(r: dict) -> str:
    if "error" in r:
        return f"{r['layout']:>10}: error {r['error']}"
    quantized = (
        f" ({r['quantize']} on load: {r['model_bytes_loaded'] / MB:.0f} MB)" if r.get("quantize") else ""
    )
    return (
        f"{r['layout']:>10}: model {r['model_bytes'] / MB:5.0f} MB{quantized}, largest shard "
        f"{r['largest_shard'] / MB:5.0f} MB; peak RSS above imports: at load {r['peak_above_import'] / MB:5.0f} MB, "
        f"every weight read {r['peak_in_use_above_import'] / MB:5.0f} MB (beyond the model "
        f"{r['beyond_model'] / MB:4.0f} MB; bound {r['bound'] / MB:5.0f} MB {'ok' if r['within_bound'] else 'OVER'}); "
        f"time: load {r['seconds']:.2f} s, weights read {r['seconds_to_in_use']:.2f} s"
    )


if __name__ == "__main__":
    sys.exit(main())
