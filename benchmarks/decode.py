"""Block-diffusion decoding side by side: block sizes x thresholds on the same weights and prompt.

    python -m benchmarks.decode --model DIR [--prompt-tokens 64] [--new-tokens 64]

For every block size B (1 = autoregressive, the baseline) and threshold: network forwards, tokens per
forward, decode tok/s, speed-up over B=1, and agreement with the B=1 greedy output (fraction of
identical tokens position by position). Then prefill tok/s for 1k / 4k-token prompts on a small
random config (CPU by default). Stop tokens are ignored so every row decodes the same length.
With random weights the agreement column measures nothing about quality: only trained weights
make it meaningful.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

from clover.model.config import CloverConfig, tiny
from clover.model.decoder.generate import DecodeSettings, generate
from clover.model.modeling import CloverForCausalLM

PROMPT_TEXT = (
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n"
    "Explain what this function does, find the performance problem and fix it.\n"
)


def prompt_ids(directory: Path, config: CloverConfig, n: int, seed: int = 0) -> list[int]:
    """n prompt tokens: the checkpoint's tokenizer on a code prompt (repeated), else random ids."""
    if (directory / "tokenizer.json").is_file():
        from clover.model.text.tokenizer import CloverTokenizer

        tok = CloverTokenizer.from_dir(directory)
        ids = tok.encode(PROMPT_TEXT)
        ids = (ids * (n // max(len(ids), 1) + 1))[:n]
        if all(i < config.vocab_size for i in ids):
            return ids
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, config.vocab_size, (n,), generator=g).tolist()
    return [i if i != config.mask_token_id else 0 for i in ids]


def agreement(a: list[int], b: list[int]) -> float:
    n = max(len(a), len(b))
    return sum(x == y for x, y in zip(a, b, strict=False)) / n if n else 1.0


def run_decode(
    model, prompt: list[int], block: int, threshold: float, new: int, repeats: int
) -> dict[str, Any]:
    s = DecodeSettings(block_size=block, threshold=threshold, max_new_tokens=new, stop_token_ids=[])
    generate(model, [prompt], s)  # warm-up (allocations, lazy init)
    best = None
    for _ in range(repeats):
        res = generate(model, [prompt], s)
        if best is None or res.stats["tok_per_s"] > best.stats["tok_per_s"]:
            best = res
    assert best is not None
    return {"block": block, "threshold": threshold, **best.stats, "ids": best.tokens[0]}


def small_config() -> CloverConfig:
    """Bigger than the test preset, still CPU-sized: every layer type, real-ish ratios."""
    return tiny(
        vocab_size=4096,
        hidden_size=256,
        num_hidden_layers=8,
        full_attention_interval=4,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=32,
        linear_num_key_heads=4,
        linear_num_value_heads=8,
        linear_key_head_dim=32,
        linear_value_head_dim=32,
        num_experts=16,
        num_experts_per_tok=4,
        moe_intermediate_size=128,
        shared_expert_intermediate_size=128,
        mask_token_id=4095,
        max_position_embeddings=8192,
    )


def prefill_rate(model, n: int, repeats: int) -> float:
    ids = torch.randint(0, model.config.vocab_size - 1, (1, n), device=model.lm_head.weight.device)
    best = 0.0
    for i in range(repeats + 1):  # the first run is a warm-up
        cache = model.new_cache(1)
        t0 = time.perf_counter()
        model.prefill(ids, cache)
        if ids.is_cuda:
            torch.cuda.synchronize()
        if i:
            best = max(best, n / (time.perf_counter() - t0))
    return best


def print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(title)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover - rich is a core dependency
        for r in [header, *rows]:
            print("  ".join(f"{c:>10}" for c in r))
        return
    table = Table()
    for h in header:
        table.add_column(h, justify="right")
    for r in rows:
        table.add_row(*r)
    Console(width=120).print(table)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, type=Path, help="checkpoint directory")
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--block-sizes", default="1,4,8,16,32")
    p.add_argument("--thresholds", default="0.5,0.7,0.9")
    p.add_argument("--prefill-lengths", default="1024,4096", help="'' to skip the prefill table")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    p.add_argument("--repeats", type=int, default=1, help="timed runs per row (the best is kept)")
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    from clover.model.loading.load import CheckpointError, load_checkpoint

    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    try:
        model, config, _ = load_checkpoint(args.model, device=args.device, dtype=dtype)
    except CheckpointError as exc:
        raise SystemExit(f"decode.py: {exc}") from None
    prompt = prompt_ids(args.model, config, args.prompt_tokens)
    blocks = [int(b) for b in args.block_sizes.split(",") if b]
    thresholds = [float(t) for t in args.thresholds.split(",") if t]

    base = run_decode(model, prompt, 1, 1.0, args.new_tokens, args.repeats)
    rows = [base]
    for b in blocks:
        if b > 1:
            rows += [run_decode(model, prompt, b, t, args.new_tokens, args.repeats) for t in thresholds]
    table = [
        [
            str(r["block"]),
            "-" if r["block"] == 1 else f"{r['threshold']:.2f}",
            f"{r['forwards']:.0f}",
            f"{r['tokens_per_forward']:.2f}",
            f"{r['rounds_per_block']:.2f}",
            f"{r['tok_per_s']:.1f}",
            f"{r['tok_per_s'] / base['tok_per_s']:.2f}x",
            f"{agreement(r['ids'], base['ids']):.2f}",
        ]
        for r in rows
    ]
    n_params = sum(t.numel() for t in model.parameters())
    print_table(
        f"decode: {args.model.name} ({n_params / 1e6:.2f}M params, {args.device}, "
        f"{torch.get_num_threads()} threads), prompt {len(prompt)} tok, {args.new_tokens} new tok, greedy",
        ["B", "thresh", "forwards", "tok/fwd", "rounds/blk", "tok/s", "vs B=1", "agree B=1"],
        table,
    )

    prefill = []
    lengths = [int(n) for n in args.prefill_lengths.split(",") if n]
    if lengths:
        torch.manual_seed(0)
        small = CloverForCausalLM(small_config()).to(args.device, dtype).eval()
        n_small = sum(t.numel() for t in small.parameters())
        prefill = [{"tokens": n, "tok_per_s": prefill_rate(small, n, args.repeats)} for n in lengths]
        print_table(
            f"prefill: small random config ({n_small / 1e6:.2f}M params, {args.device})",
            ["prompt tokens", "tok/s"],
            [[str(r["tokens"]), f"{r['tok_per_s']:.0f}"] for r in prefill],
        )
    if args.json:
        out = {
            "decode": [
                {k: v for k, v in r.items() if k != "ids"} | {"agreement": agreement(r["ids"], base["ids"])}
                for r in rows
            ],
            "prefill": prefill,
        }
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
