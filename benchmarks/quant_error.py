"""Quantized against bf16 on a small trained model: the logits' error and greedy agreement.

    python -m benchmarks.quant_error [--model embedded] [--new-tokens 48]

The model (default: the embedded Clover, trained, so agreement means something) is loaded in bf16,
the reference, and again in each quantized form, all with bf16 activations (the CPU path of a big
model): quantize-on-load int8 and int4 (groups of 128), and the published formats written from the
same weights (GPTQ-Int4 and AWQ, groups of 128; block-wise FP8, 128 x 128) then loaded. On the
ten everyday chat prompts (benchmarks/chat_prompts.py) rendered in the chat format: the largest
absolute logit error against bf16 over every prompt position (and bf16's own against fp32, the floor),
the share of positions whose argmax agrees, and the share of greedy decodes (B = 1, `--new-tokens`)
identical to bf16's, with the mean share of identical tokens.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from benchmarks.chat_prompts import PROMPTS
from benchmarks.ckpt_write import model_tensors, write_shards
from benchmarks.quant_ckpt import quantization_config, quantize_tensors
from clover.model.decoder.generate import DecodeSettings, generate
from clover.model.loading.load import load_checkpoint
from clover.model.text.chat import encode_prompt, render_messages


def _write_format(model, method: str, directory: Path) -> Path:
    write_shards(quantize_tensors(model_tensors(model), method), directory, model.config, 1 << 40)
    raw = json.loads((directory / "config.json").read_text())
    raw["quantization_config"] = quantization_config(method)
    (directory / "config.json").write_text(json.dumps(raw))
    return directory


def _greedy(model, ids: list[int], new: int) -> list[int]:
    s = DecodeSettings(block_size=1, max_new_tokens=new, stop_token_ids=[], repetition=None)
    return generate(model, [ids], s).tokens[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    from clover.model import EMBEDDED_DIR
    from clover.model.text.tokenizer import CloverTokenizer

    src = EMBEDDED_DIR if a.model == "embedded" else Path(a.model)
    tok = CloverTokenizer.from_dir(src)
    fp32 = load_checkpoint(src, dtype=torch.float32)
    config = fp32.config
    prompts = [
        encode_prompt(tok, config, render_messages([{"role": "user", "content": p}], think=False))
        for p in PROMPTS
    ]
    variants = {"bf16": load_checkpoint(src, dtype=torch.bfloat16).model}
    for mode in ("int8", "int4"):
        variants[f"{mode} on load"] = load_checkpoint(src, dtype=torch.bfloat16, quantize=mode).model
    with tempfile.TemporaryDirectory() as tmp:
        for method in ("gptq", "awq", "fp8"):
            d = _write_format(fp32.model, method, Path(tmp) / method)
            variants[method] = load_checkpoint(d, dtype=torch.bfloat16).model

    def logits(model, ids):
        with torch.no_grad():
            return model(torch.tensor([ids])).float()[0]

    ref_logits = [logits(variants["bf16"], p) for p in prompts]
    ref_greedy = [_greedy(variants["bf16"], p, a.new_tokens) for p in prompts]
    floor = max(
        (logits(fp32.model, p) - r).abs().max().item() for p, r in zip(prompts, ref_logits, strict=True)
    )
    print(
        f"{src.name}: {len(prompts)} chat prompts, {sum(map(len, prompts))} positions; greedy B = 1, "
        f"{a.new_tokens} tokens; activations bf16. bf16 against fp32: max |logit error| {floor:.3f}"
    )
    print(f"{'weights':14}{'max |err|':>11}{'argmax agrees':>15}{'greedy same':>13}{'tokens same':>13}")
    for name, model in variants.items():
        if name == "bf16":
            continue
        err, agree, total, same, tokens = 0.0, 0, 0, 0, 0.0
        for p, r, g in zip(prompts, ref_logits, ref_greedy, strict=True):
            q = logits(model, p)
            err = max(err, (q - r).abs().max().item())
            agree += int((q.argmax(-1) == r.argmax(-1)).sum())
            total += len(p)
            out = _greedy(model, p, a.new_tokens)
            same += out == g
            tokens += sum(x == y for x, y in zip(out, g, strict=False)) / len(g)
        print(
            f"{name:14}{err:>11.3f}{agree / total:>15.3f}{same:>10}/{len(prompts)}{tokens / len(prompts):>13.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
