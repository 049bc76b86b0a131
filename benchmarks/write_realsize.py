"""Write a Clover-35B-A3B-shaped checkpoint with random weights, quantized as published (GPTQ-Int4 by
default), layer by layer: one shard of about one layer in memory at a time, never the model.

    python -m benchmarks.write_realsize --out /work/big/clover-35b-gptq [--layers 40] [--format gptq]

Real dimensions (vocab 248320, hidden 2048, 256 experts top-8 of width 512 plus a shared expert, 30
GDN + 10 attention layers at 40); `--layers N` keeps the first N layers (every 4th is attention), the
per-layer costs being the same. The codes are drawn straight in the stored form (benchmarks/
quant_ckpt.py `random_quantized`), so nothing is quantized here: at 40 layers ~20 GB of disk.
The tokenizer is the embedded model's (8192 ids, the chat format's special tokens), so `clover chat
--model DIR` runs on it; its words are noise (random weights).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import Tensor

from benchmarks.ckpt_write import write_shards
from benchmarks.quant_ckpt import FORMATS, hf_name, is_quantized, quantization_config, random_quantized
from clover.model.config import CloverConfig, clover_35b_a3b, tiny
from clover.model.modeling import CloverForCausalLM

SHARD_BYTES = 512 << 20  # about one layer of int4 experts per shard


def realsize_config(layers: int = 40, shape: str = "35b") -> CloverConfig:
    """The 35B-A3B shape cut to `layers` (the first ones), with the embedded tokenizer's special ids.
    shape "tiny": the test preset's dimensions instead (a run of the whole pipeline in seconds)."""
    from clover.model.text.tokenizer import CloverTokenizer

    tok = CloverTokenizer.from_dir(embedded_dir())
    ids = tok.special_ids()
    d = (
        clover_35b_a3b().to_dict()
        if shape == "35b"
        else tiny(vocab_size=tok.vocab_size, block_size=32).to_dict()
    )
    d.update(
        num_hidden_layers=layers,
        layer_types=[],
        mask_token_id=ids["<|mask|>"],  # every 4th (tiny: 2nd) attention
        eos_token_ids=tok.stop_ids(),
        pad_token_id=ids["<|endoftext|>"],
        max_position_embeddings=32768,
    )
    return CloverConfig.from_dict(d)


def embedded_dir() -> Path:
    import clover.model

    return clover.model.EMBEDDED_DIR


def neutral(name: str) -> float | None:
    """The constant a random checkpoint gives `name` (norms that pass their input through, GDN's
    decay and block-mode values at their neutral settings), or None: drawn at random."""
    if name.endswith(("linear_attn.norm.weight", "block_size_calibration")):
        return 1.0  # GDN's gated norm: weight 1 is identity
    if name.endswith(("norm.weight", "A_log", "dt_bias", "block_logit_scale", "memory_logit")):
        return 0.0  # zero-centred RMSNorm: weight 0 is identity
    return None


def tensors(config: CloverConfig, method: str, group_size: int, seed: int) -> Iterator[tuple[str, Tensor]]:
    """The checkpoint's tensors in file order, each made when it is written."""
    with torch.device("meta"):
        meta = CloverForCausalLM(config)
    gen = torch.Generator().manual_seed(seed)
    for name, p in meta.state_dict().items():
        value = neutral(name)
        if value is not None:
            yield (
                (hf_name(name) if method != "fp8" else name),
                torch.full(p.shape, value, dtype=torch.bfloat16),
            )
        else:
            yield from random_quantized(name, tuple(p.shape), method, gen, group_size)


def random_model(config: CloverConfig, form: str, device: str, seed: int = 0) -> CloverForCausalLM:
    """A random model built in place on `device`, no checkpoint: "bf16" (every weight bf16), or "int4"
    (what a GPTQ-Int4 checkpoint loads as: the quantized projections and experts int4 in groups of
    128, the rest bf16). For a full-size run where writing and reading 20-70 GB would not fit."""
    from clover.model.loading.load_quant import Placer
    from clover.model.loading.quant_codes import Int4Codes

    with torch.device("meta"):
        model = CloverForCausalLM(config)
    gen = torch.Generator(device=device).manual_seed(seed)
    placer = Placer(model, None, torch.bfloat16, lambda name: device)

    def codes(n: int, k: int) -> Int4Codes:
        group = next(g for g in (128, 64, 32) if k % g == 0)
        q = torch.randint(0, 16, (n, k), generator=gen, device=device, dtype=torch.uint8)
        scales = torch.full((n, k // group), 0.02 / 4.6, device=device)  # weights of std ~0.02
        return Int4Codes(q, scales, torch.full_like(scales, 8.0), group)

    for name, p in list(model.named_parameters()):
        if (
            form == "int4"
            and is_quantized(name)
            and name.endswith(("gate_up_proj", "down_proj"))
            and p.dim() == 3
        ):
            for e in range(p.shape[0]):
                placer.expert(name, e, "whole", codes(*p.shape[1:]), p.shape[0])
            continue
        if form == "int4" and is_quantized(name):
            placer.whole(name, codes(*p.shape))
            continue
        value = neutral(name)
        if value is None:
            t = torch.randn(p.shape, generator=gen, device=device, dtype=torch.bfloat16) * 0.02
        else:
            t = torch.full(p.shape, value, device=device, dtype=torch.bfloat16)
        parent, _, leaf = name.rpartition(".")
        owner = model.get_submodule(parent)
        owner._parameters[leaf] = torch.nn.Parameter(t, requires_grad=False)
    from clover.model.layers.rope import RotaryEmbedding

    model.model.rotary_emb = RotaryEmbedding(config.rotary_dim, config.rope_theta).to(device)
    return model.eval()


def write(
    out: Path, layers: int, method: str, group_size: int = 128, seed: int = 0, shape: str = "35b"
) -> dict:
    config = realsize_config(layers, shape)
    t0 = time.perf_counter()
    files = write_shards(tensors(config, method, group_size, seed), out, config, SHARD_BYTES)
    raw = json.loads((out / "config.json").read_text())
    raw["quantization_config"] = quantization_config(method, group_size)
    (out / "config.json").write_text(json.dumps(raw, indent=2) + "\n")
    shutil.copy(embedded_dir() / "tokenizer.json", out / "tokenizer.json")
    return {
        "files": len(files),
        "bytes": sum(f.stat().st_size for f in files),
        "seconds": time.perf_counter() - t0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--format", default="gptq", choices=FORMATS)
    ap.add_argument("--group-size", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--tiny", action="store_true", help="the test preset's dimensions (group size 32): a dry run"
    )
    a = ap.parse_args(argv)
    if not 1 <= a.layers <= 40:
        print("write_realsize: --layers must be 1..40", file=sys.stderr)
        return 2
    if a.tiny:
        a.group_size = 32
    if a.out.exists() and any(a.out.iterdir()):
        print(f"write_realsize: {a.out} is not empty", file=sys.stderr)
        return 2
    r = write(a.out, a.layers, a.format, a.group_size, a.seed, "tiny" if a.tiny else "35b")
    print(
        f"wrote {a.out}: {a.layers} layers, {a.format}, {r['files']} shards, {r['bytes'] / 1e9:.2f} GB "
        f"in {r['seconds']:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
