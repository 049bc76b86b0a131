"""Train Clover with the block-diffusion objective (BD3-LM's x_t ⊕ x_0 layout), on CPU or GPU.

    python -m clover.model.train --config tiny.json --data DIR --out DIR [--resume] [--steps N]
        [--batch B] [--seq L] [--lr LR] [--device cpu|cuda] [--time-limit MIN]
        [--short-data DIR --short-share P --short-batch K]
    python -m clover.model.train --out DIR --export-to model/weights [--tokenizer tok.json]

Per step: one block size B for the batch from BLOCK_SIZES (weighted toward 32 and 1); per block a
mask rate t ~ U(0, 1]; every target position of the block (assistant output, or code) is replaced
by `<|mask|>` with probability t; context positions stay clean, as prompt tokens do at inference.
The loss is the plain mean cross-entropy over the masked target positions. BD3-LM's 1/t weighting
makes the loss an ELBO, but with batches of one or two rows a block with small t and one masked
token would get a weight up to 1/t ~ 100: the mean is the lower-variance choice for a short run.
B = 1 is autoregressive: `forward_train` then takes each prediction from the clean stream, so the
plain causal `forward` gives the same logits at half the cost and is used instead.

Checkpoints (model, optimizer, step, RNG states) go to OUT/ckpt/last.pt every --ckpt-minutes and
at the end; `touch OUT/STOP` ends a run cleanly. Batches, block sizes and masks are drawn from a
generator seeded by (seed, step), so a resumed run continues exactly where it stopped.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from clover.model.config import CloverConfig
from clover.model.modeling import CloverForCausalLM

BLOCK_SIZES = (1, 2, 4, 8, 16, 32)
BLOCK_WEIGHTS = (0.3, 0.04, 0.08, 0.12, 0.16, 0.3)


@dataclass
class TrainArgs:
    steps: int = 1000
    batch: int = 1
    seq: int = 0  # 0: the packed row length
    lr: float = 2e-3
    min_lr_ratio: float = 0.1
    warmup: int = 30
    weight_decay: float = 0.05
    clip: float = 1.0
    seed: int = 0
    time_limit: float = 0.0  # minutes; 0: none. Also drives the cosine when set.
    ckpt_minutes: float = 10.0
    log_every: int = 5
    # weights of BLOCK_SIZES (1, 2, 4, 8, 16, 32); B = 1 is autoregressive and costs half a step
    block_weights: str = ",".join(map(str, BLOCK_WEIGHTS))
    # share of B > 1 blocks masked as a suffix (left-order decoding's pattern) rather than at random
    suffix_masks: float = 0.0
    # share of B > 1 steps whose masked targets are the model's own causal (B = 1) argmax, not the
    # data: verified decoding keeps a draft token only where it equals that argmax
    distill: float = 0.0
    # share of steps that draw `short_batch` rows of the --short-data set (its own, shorter row length)
    short_share: float = 0.0
    short_batch: int = 4

    def weights(self) -> list[float]:
        values = [float(v) for v in self.block_weights.split(",")]
        if len(values) != len(BLOCK_SIZES) or min(values) < 0 or sum(values) <= 0:
            raise ValueError(
                f"--block-weights needs {len(BLOCK_SIZES)} weights >= 0 for block sizes {BLOCK_SIZES}"
            )
        if not 0.0 <= self.suffix_masks <= 1.0:
            raise ValueError("--suffix-masks must be a share between 0 and 1")
        if not 0.0 <= self.distill <= 1.0:
            raise ValueError("--distill must be a share between 0 and 1")
        if not 0.0 <= self.short_share <= 1.0 or self.short_batch < 1:
            raise ValueError("--short-share must be a share between 0 and 1, --short-batch at least 1")
        return values


# --------------------------------------------------------------------------- objective


def step_generator(seed: int, step: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


def sample_block_size(
    gen: torch.Generator, seq_len: int, block_weights: tuple[float, ...] | list[float] = BLOCK_WEIGHTS
) -> int:
    sizes = [b for b in BLOCK_SIZES if seq_len % b == 0 and block_weights[BLOCK_SIZES.index(b)] > 0]
    weights = torch.tensor([block_weights[BLOCK_SIZES.index(b)] for b in sizes])
    return sizes[int(torch.multinomial(weights, 1, generator=gen))]


def add_noise(
    x0: torch.Tensor,
    target: torch.Tensor,
    block: int,
    mask_id: int,
    gen: torch.Generator,
    suffix_fraction: float = 0.0,
) -> torch.Tensor:
    """x_t: each target position masked with its block's rate t ~ U(0, 1].

    With `suffix_fraction` > 0, that share of the blocks is masked from a cut c ~ U{0..B-1} to the
    block's end instead: the pattern left-order decoding meets (the block's tokens left of the
    frontier known, all right of it masked). Random masks mostly show a masked token with known
    tokens on its right, which decoding never does; a model trained only on them is seldom sure of a
    token two places right of the frontier, so each round keeps few tokens."""
    n, length = x0.shape
    t = 1.0 - torch.rand(n, length // block, 1, generator=gen)  # (0, 1]
    t = t.expand(-1, -1, block).reshape(n, length)
    masked = torch.rand(n, length, generator=gen) < t
    if suffix_fraction > 0:  # drawn only when used: older runs' masks stay as they were
        blocks = length // block
        cut = torch.randint(0, block, (n, blocks, 1), generator=gen)
        suffix = (torch.arange(block).view(1, 1, block) >= cut).reshape(n, length)
        use = (
            (torch.rand(n, blocks, 1, generator=gen) < suffix_fraction)
            .expand(-1, -1, block)
            .reshape(n, length)
        )
        masked = torch.where(use, suffix, masked)
    masked &= target
    return torch.where(masked, torch.full_like(x0, mask_id), x0)


def diffusion_step_loss(
    model: CloverForCausalLM,
    x0: torch.Tensor,
    target: torch.Tensor,
    block: int,
    gen: torch.Generator,
    suffix_fraction: float = 0.0,
    distill: bool = False,
) -> tuple[torch.Tensor, int]:
    """(mean CE over the masked target positions, their count). Position 0 predicts nothing.

    `distill` (B > 1 only): the targets are the model's own causal argmax at those positions given
    the row's tokens before them (the same pass's clean stream, no gradient through it), so the
    denoiser learns to draft what the causal pass that verifies it would write, not the data where
    the two differ."""
    mask_id = model.config.mask_token_id
    if block == 1:  # autoregressive: every target position, inputs clean
        x_t, use = x0, target.clone()
    else:
        x_t = add_noise(x0, target, block, mask_id, gen, suffix_fraction)
        use = (x_t == mask_id) & target
    use[:, 0] = False
    count = int(use.sum())
    if count == 0:
        return sum(p.sum() for p in model.parameters()) * 0.0, 0
    if distill and block > 1:  # the clean stream of the same pass is the causal path
        logits, teacher = model.forward_train(x_t, x0, block, select=use, causal=True)
        return F.cross_entropy(logits.float(), teacher.argmax(-1)), count
    logits = model.forward_train(x_t, x0, block, select=use)
    return F.cross_entropy(logits.float(), x0[use]), count


def lr_at(step: int, args: TrainArgs, elapsed: float) -> float:
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    if args.time_limit > 0:
        progress = max(progress, elapsed / (args.time_limit * 60))
    progress = min(1.0, progress)
    floor = args.lr * args.min_lr_ratio
    return floor + (args.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


# --------------------------------------------------------------------------- trainer


def _useful_rows(
    ids: torch.Tensor, target: torch.Tensor, seq: int, name: str
) -> tuple[torch.Tensor, torch.Tensor]:
    if seq % max(BLOCK_SIZES):
        raise ValueError(f"{name}: the row length must be a multiple of {max(BLOCK_SIZES)}, not {seq}")
    # rows with (almost) no target, e.g. a window inside a system prompt, teach nothing
    keep = target[:, 1:seq].sum(1) >= 8
    if not keep.any():
        raise ValueError(f"{name}: no row has target tokens")
    return ids[keep, :seq], target[keep, :seq]


class Trainer:
    """`short` (ids, target): a second packed set of shorter rows (e.g. chat rows of ~300 tokens at
    416): a `short_share` of the steps draws `short_batch` of them, so short examples come several
    to a step instead of one row padded to the long length each, without leaving the long rows'
    training (a run on short rows alone made the embedded model forget how to fix bugs)."""

    def __init__(
        self,
        config: CloverConfig,
        ids: torch.Tensor,
        target: torch.Tensor,
        out: Path,
        args: TrainArgs,
        device: str = "cpu",
        short: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        self.config, self.args, self.out, self.device = config, args, Path(out), device
        seq = args.seq or ids.shape[1]
        if seq > ids.shape[1]:
            raise ValueError(f"--seq {seq} is longer than the packed rows ({ids.shape[1]})")
        self.block_weights = args.weights()
        self.ids, self.target = _useful_rows(ids, target, seq, "--data")
        self.seq = seq
        self.short = None
        if short is not None and args.short_share > 0:
            self.short = _useful_rows(short[0], short[1], short[0].shape[1], "--short-data")
        torch.manual_seed(args.seed)
        self.model = CloverForCausalLM(config).to(device)
        decay = [p for n, p in self.model.named_parameters() if p.dim() >= 2 and "embed" not in n]
        rest = [p for n, p in self.model.named_parameters() if not (p.dim() >= 2 and "embed" not in n)]
        self.opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": args.weight_decay}, {"params": rest, "weight_decay": 0.0}],
            lr=args.lr,
            betas=(0.9, 0.95),
            eps=1e-8,
        )
        self.step = 0
        self.tokens = 0
        self.elapsed = 0.0  # training seconds over all sessions
        self.history: list[dict[str, float]] = []

    # ------------------------------------------------------------------ one step

    def batch(self, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """This step's rows: from the short set for a `short_share` of the steps (drawn only when
        there is one, so runs without it keep their batches), else from the long one."""
        ids, target, n = self.ids, self.target, self.args.batch
        if self.short is not None and float(torch.rand((), generator=gen)) < self.args.short_share:
            (ids, target), n = self.short, self.args.short_batch
        rows = torch.randint(0, ids.shape[0], (n,), generator=gen)
        return ids[rows].to(self.device), target[rows].to(self.device)

    def loss_at(self, step: int) -> tuple[torch.Tensor, int, int, int]:
        """(loss, masked positions, block size, tokens in the batch) of step `step`."""
        gen = step_generator(self.args.seed, step)
        x0, target = self.batch(gen)
        block = sample_block_size(gen, x0.shape[1], self.block_weights)
        # drawn only when used, so runs without it keep their masks
        distill = (
            self.args.distill > 0 and block > 1 and float(torch.rand((), generator=gen)) < self.args.distill
        )
        loss, count = diffusion_step_loss(
            self.model, x0, target.bool(), block, gen, self.args.suffix_masks, distill
        )
        return loss, count, block, x0.numel()

    def train_step(self) -> dict[str, float]:
        self.model.train()
        lr = lr_at(self.step, self.args, self.elapsed)
        for group in self.opt.param_groups:
            group["lr"] = lr
        loss, count, block, tokens = self.loss_at(self.step)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.clip)
        self.opt.step()
        self.step += 1
        self.tokens += tokens
        return {
            "step": self.step,
            "loss": float(loss.detach()),
            "block": block,
            "masked": count,
            "lr": lr,
            "grad_norm": float(norm),
            "tokens": tokens,
        }

    # ------------------------------------------------------------------ checkpoints

    def state(self) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "step": self.step,
            "tokens": self.tokens,
            "elapsed": self.elapsed,
            "history": self.history,
            "config": self.config.to_dict(),
            "args": self.args.__dict__,
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate()},
        }

    def save(self) -> Path:
        ckpt = self.out / "ckpt"
        ckpt.mkdir(parents=True, exist_ok=True)
        tmp = ckpt / "last.pt.tmp"
        torch.save(self.state(), tmp)
        tmp.replace(ckpt / "last.pt")  # never leave a half-written checkpoint behind
        return ckpt / "last.pt"

    def load(self, path: Path) -> None:
        blob = torch.load(path, map_location=self.device, weights_only=False)
        self.model.load_state_dict(blob["model"])
        self.opt.load_state_dict(blob["optimizer"])
        self.step, self.tokens = blob["step"], blob["tokens"]
        self.elapsed, self.history = blob.get("elapsed", 0.0), blob.get("history", [])
        torch.set_rng_state(blob["rng"]["torch"])
        random.setstate(blob["rng"]["python"])

    def init_weights(self, model_dir: Path) -> None:
        """Fine-tuning: take the weights of an exported model directory (any storage dtype)."""
        from safetensors.torch import load_file

        state = load_file(str(Path(model_dir) / "model.safetensors"))
        if self.config.tie_word_embeddings:
            state.setdefault("lm_head.weight", state["model.embed_tokens.weight"])
        own = self.model.state_dict()
        self.model.load_state_dict({k: v.to(own[k].dtype) if k in own else v for k, v in state.items()})

    # ------------------------------------------------------------------ loop

    def run(self, log=print) -> None:
        args = self.args
        stop = {"flag": False}

        def on_signal(signum, frame) -> None:  # finish the step, save, leave
            stop["flag"] = True

        old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        last_save = time.monotonic()
        window: list[dict[str, float]] = []
        win_start, win_tokens = time.monotonic(), 0
        try:
            while self.step < args.steps and not stop["flag"]:
                t0 = time.monotonic()
                rec = self.train_step()
                self.elapsed += time.monotonic() - t0
                window.append(rec)
                win_tokens += rec["tokens"]
                if self.step % args.log_every == 0 or self.step == args.steps:
                    secs = time.monotonic() - win_start
                    summary = {
                        "step": self.step,
                        "loss": sum(r["loss"] for r in window if r["masked"])
                        / max(1, sum(1 for r in window if r["masked"])),
                        "lr": rec["lr"],
                        "tok_s": win_tokens / max(secs, 1e-9),
                        "tokens": self.tokens,
                        "minutes": self.elapsed / 60,
                        "blocks": [r["block"] for r in window],
                    }
                    self.history.append({k: v for k, v in summary.items() if k != "blocks"})
                    log(summary)
                    window, win_start, win_tokens = [], time.monotonic(), 0
                if (self.out / "STOP").exists():
                    stop["flag"] = True
                if args.time_limit > 0 and self.elapsed >= args.time_limit * 60:
                    stop["flag"] = True
                if time.monotonic() - last_save >= args.ckpt_minutes * 60:
                    self.save()
                    last_save = time.monotonic()
        finally:
            self.save()
            for s, handler in old.items():
                signal.signal(s, handler)


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
    p = argparse.ArgumentParser(prog="python -m clover.model.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", type=Path, help="CloverConfig JSON (config.json fields)")
    p.add_argument("--data", type=Path, help="directory with packed.pt (python -m clover.model.data)")
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
    from clover.model.data import load_packed

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
