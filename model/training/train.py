"""Train Clover with the block-diffusion objective (BD3-LM's x_t ⊕ x_0 layout), on CPU or GPU.

    python -m clover.model.training.train --config tiny.json --data DIR --out DIR [--resume] [--steps N]
        [--batch B] [--seq L] [--lr LR] [--device cpu|cuda] [--time-limit MIN]
        [--short-data DIR --short-share P --short-batch K]
    python -m clover.model.training.train --out DIR --export-to model/weights [--tokenizer tok.json]

The objective is model/training/train_objective.py; the loop, its schedule and checkpoints model/training/trainer.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

from clover.model.config import CloverConfig
from clover.model.training.trainer import TrainArgs, Trainer

# --------------------------------------------------------------------------- export


def export(run_dir: Path, to: Path, tokenizer: Path | None = None, dtype: str = "bfloat16") -> dict[str, Any]:
    """OUT/ckpt/last.pt -> an HF-style directory: config.json, model.safetensors (`dtype` storage;
    config.torch_dtype stays float32 so CPU inference upcasts on load), tokenizer.json."""
    import shutil

    from safetensors.torch import save_file

    blob = torch.load(Path(run_dir) / "ckpt" / "last.pt", map_location="cpu", weights_only=False)
    config = CloverConfig.from_dict(blob["config"])
    config.torch_dtype = "float32"
    to.mkdir(parents=True, exist_ok=True)
    config.save(to / "config.json")
    store = getattr(torch, dtype)
    sd = {k: v.detach().to(store).contiguous() for k, v in blob["model"].items()}
    if config.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
    save_file(sd, str(to / "model.safetensors"), metadata={"format": "pt", "storage_dtype": dtype})
    (to / "model.safetensors").chmod(0o644)  # save_file creates it owner-only
    if tokenizer is not None:
        shutil.copyfile(tokenizer, to / "tokenizer.json")
    params = sum(v.numel() for v in sd.values())
    return {
        "step": blob["step"],
        "tokens": blob["tokens"],
        "minutes": blob.get("elapsed", 0) / 60,
        "params": params,
        "bytes": (to / "model.safetensors").stat().st_size,
    }


# --------------------------------------------------------------------------- CLI


def _logger(path: Path, total: int, start: int):
    """Metrics to JSONL; a rich progress bar on a terminal, plain lines otherwise (nohup logs)."""
    fh = path.open("a", encoding="utf-8")
    bar = None
    if sys.stdout.isatty():
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("step {task.completed}"),
            BarColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
        )
        task = bar.add_task(
            "train", total=total if total < UNTIL_TIME_IS_UP else None, completed=start, info=""
        )
        bar.start()

    def log(rec: dict[str, Any]) -> None:
        fh.write(json.dumps(rec) + "\n")
        fh.flush()
        if bar is not None:
            info = f"loss {rec['loss']:.3f}  {rec['tok_s']:.0f} tok/s  lr {rec['lr']:.1e}"
            bar.update(task, completed=rec["step"], info=info)
            return
        print(
            f"step {rec['step']:>6}  loss {rec['loss']:.4f}  lr {rec['lr']:.2e}  "
            f"{rec['tok_s']:.0f} tok/s  {rec['tokens'] / 1e6:.2f}M tok  {rec['minutes']:.1f} min  B={rec['blocks']}",
            flush=True,
        )

    log.close = bar.stop if bar is not None else (lambda: None)  # type: ignore[attr-defined]
    return log


UNTIL_TIME_IS_UP = 10**9


def resolve_steps(steps: int | None, time_limit: float) -> int:
    """--steps when given; else a time-limited run goes on until its time is up (the cosine follows
    the clock), and an untimed one takes TrainArgs' default."""
    if steps is not None:
        return steps
    return UNTIL_TIME_IS_UP if time_limit > 0 else TrainArgs.steps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m clover.model.training.train", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--config", type=Path, help="CloverConfig JSON (config.json fields)")
    p.add_argument(
        "--data", type=Path, help="directory with packed.pt (python -m clover.model.training.data)"
    )
    p.add_argument("--out", type=Path, required=True, help="run directory (checkpoints, metrics)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/ckpt/last.pt")
    p.add_argument("--init-from", type=Path, help="start from this model directory's weights (fine-tuning)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument(
        "--threads",
        type=int,
        default=2,
        help="CPU threads; on a busy shared machine 1 beats 2 by 5-10x (OpenMP spin-waits)",
    )
    p.add_argument("--export-to", type=Path, help="export OUT/ckpt/last.pt to this directory and exit")
    p.add_argument("--tokenizer", type=Path, help="tokenizer.json to copy on export")
    p.add_argument("--short-data", type=Path, help="a second packed set of shorter rows (see --short-share)")
    defaults = TrainArgs()
    for name, value in defaults.__dict__.items():
        p.add_argument(
            "--" + name.replace("_", "-"), type=type(value), default=None if name == "steps" else value
        )
    a = p.parse_args(argv)
    a.steps = resolve_steps(a.steps, a.time_limit)
    threads = torch.get_num_threads()
    torch.set_num_threads(a.threads)
    try:  # a caller in the same process (`clover train`, tests) keeps its own thread count
        return _run(p, a)
    finally:
        torch.set_num_threads(threads)


def _run(p: argparse.ArgumentParser, a: argparse.Namespace) -> int:
    if a.export_to:
        if not (a.out / "ckpt" / "last.pt").is_file():
            p.error(f"no checkpoint at {a.out / 'ckpt' / 'last.pt'}")
        print(json.dumps(export(a.out, a.export_to, a.tokenizer)))
        return 0
    if a.config is None or a.data is None:
        p.error("--config and --data are required for training")
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here")
    from clover.model.training.data import load_packed

    try:
        config = CloverConfig.load(a.config)
        ids, target, meta = load_packed(a.data)
    except ValueError as exc:
        p.error(str(exc))

    def check_vocab(name: str, rows: torch.Tensor) -> None:
        if int(rows.max()) >= config.vocab_size:
            p.error(f"{name}: token id {int(rows.max())} >= vocab_size {config.vocab_size} of {a.config}")

    check_vocab("--data", ids)
    args = TrainArgs(**{k: getattr(a, k) for k in TrainArgs().__dict__})
    short = None
    if a.short_data is not None:
        try:
            short_ids, short_target, _ = load_packed(a.short_data)
        except ValueError as exc:
            p.error(f"--short-data: {exc}")
        check_vocab("--short-data", short_ids)
        short = (short_ids, short_target)
    elif args.short_share > 0:
        p.error("--short-share needs --short-data")
    try:
        trainer = Trainer(config, ids, target, a.out, args, a.device, short)
    except ValueError as exc:
        p.error(str(exc))
    last = a.out / "ckpt" / "last.pt"
    if a.resume:
        if not last.is_file():
            p.error(f"--resume: no checkpoint at {last}")
        trainer.load(last)
    elif a.init_from:
        try:
            trainer.init_weights(a.init_from)
        except (OSError, ValueError, RuntimeError) as exc:
            p.error(f"--init-from {a.init_from}: {str(exc).splitlines()[0]}")
    counts = config.param_counts()
    print(
        f"params {counts['total'] / 1e6:.2f}M (active {counts['active'] / 1e6:.2f}M); data {meta.get('rows')} rows "
        f"x {trainer.seq}; target tokens {meta.get('target_tokens')}; from step {trainer.step}",
        flush=True,
    )
    a.out.mkdir(parents=True, exist_ok=True)
    log = _logger(a.out / "metrics.jsonl", args.steps, trainer.step)
    try:
        trainer.run(log)
    finally:
        log.close()
    print(
        f"done: step {trainer.step}, {trainer.tokens} tokens, {trainer.elapsed / 60:.1f} min -> {last}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
