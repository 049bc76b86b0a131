"""The training loop: its arguments (`TrainArgs`), the learning-rate schedule, and `Trainer`, which
builds the model and optimizer, takes the steps of the objective (model/training/train_objective.py), saves
and resumes checkpoints.

Checkpoints (model, optimizer, step, RNG states) go to OUT/ckpt/last.pt every --ckpt-minutes and
at the end; `touch OUT/STOP` ends a run cleanly. Batches, block sizes and masks are drawn from a
generator seeded by (seed, step), so a resumed run continues exactly where it stopped.
"""

from __future__ import annotations

import math
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from clover.model.config import CloverConfig
from clover.model.modeling import CloverForCausalLM
from clover.model.training.train_objective import (
    BLOCK_SIZES,
    BLOCK_WEIGHTS,
    diffusion_step_loss,
    sample_block_size,
    step_generator,
)


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


def lr_at(step: int, args: TrainArgs, elapsed: float) -> float:
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    if args.time_limit > 0:
        progress = max(progress, elapsed / (args.time_limit * 60))
    progress = min(1.0, progress)
    floor = args.lr * args.min_lr_ratio
    return floor + (args.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


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
