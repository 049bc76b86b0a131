"""Teach a small Clover to copy from its context before agent training: the induction phase.

    python -m clover.model.training.copy_warmup --init-from DIR|embedded --out DIR [--data PACKED] [--target 0.95]
        [--steps 3000] [--tool-prompt compact]

A coding agent copies all the time: a function name from the issue into a search, a path from the
search into `view`, a line from `view` into `str_replace`. The 9M embedded model trained on agent
traces alone never learnt it (`benchmarks/copy_probe.py`: 0.000), and every held-out task then
fails at its first call. Two things were needed:

- tied input and output embeddings. Copying is "read a token's embedding somewhere, write the same
  token out"; with tied embeddings that is one matrix near the identity and it holds for every
  token at once. With untied ones the map is learnt token by token: a fresh untied model on
  full-vocabulary copying stays at chance while the tied one learns it (our runs: 0.000 vs 0.79
  after 1,500 steps). Small Qwen models tie them too.
- copying at varied distances. Repeats at one fixed offset are learnt by position (RoPE) in a few
  hundred steps and the skill then fails at any other offset; with the length drawn per batch only
  a real induction mechanism (find the earlier occurrence, read what followed) works. It appears
  suddenly after a plateau (~2,500 steps here).

Rows are a random chunk followed by itself; the loss is on the second copy. Half the batches draw
tokens uniformly from the ordinary vocabulary, half as the agent data uses them (sqrt frequency,
from --data) so the skill covers the tokens that matter. An untied --init-from is tied on the way
in, starting from its input embeddings. Stops once the mean accuracy of the last 100 batches
reaches --target, or after --steps; the output is a model directory for `model.train --init-from`.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from clover.model import EMBEDDED_DIR
from clover.model.loading.load import CheckpointError, load_checkpoint, save_checkpoint
from clover.model.modeling import CloverForCausalLM

FIRST_ORDINARY_ID = 200  # below: special and single-byte tokens


def tied_copy(directory: Path, tool_prompt: str | None = None) -> CloverForCausalLM:
    """The checkpoint in fp32 with tied embeddings (an untied one takes its input embeddings);
    `tool_prompt` replaces the config's when given."""
    loaded = load_checkpoint(directory, dtype=torch.float32)
    config = dataclasses.replace(loaded.config, tie_word_embeddings=True, torch_dtype="float32")
    if tool_prompt is not None:
        config.tool_prompt = tool_prompt
    model = CloverForCausalLM(config)
    state = {k: v for k, v in loaded.model.state_dict().items() if k != "lm_head.weight"}
    model.load_state_dict(state, strict=False)
    return model


def usage_probs_from_packed(data: Path, vocab: int) -> torch.Tensor:
    ids = torch.load(data / "packed.pt", map_location="cpu")["ids"].long().flatten()
    counts = torch.bincount(ids, minlength=vocab).float()
    counts[:FIRST_ORDINARY_ID] = 0
    probs = counts.sqrt()
    return probs / probs.sum()


def warm_up(
    model: CloverForCausalLM,
    probs: torch.Tensor | None,
    *,
    steps: int,
    target: float,
    lr: float,
    batch: int,
    lengths: tuple[int, int],
    seed: int,
    log=print,
) -> float:
    """Train copying in place; returns the final mean accuracy over the last 100 batches."""
    gen = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95))
    accs: list[float] = []
    start = time.monotonic()
    model.train()
    for step in range(steps):
        n = int(torch.randint(lengths[0], lengths[1] + 1, (1,), generator=gen))
        if step % 2 and probs is not None:
            chunk = torch.multinomial(probs, batch * n, replacement=True, generator=gen).view(batch, n)
        else:
            chunk = torch.randint(FIRST_ORDINARY_ID, vocab, (batch, n), generator=gen)
        ids = torch.cat([chunk, chunk], 1)
        logits = model(ids)[:, n:-1]
        loss = F.cross_entropy(logits.reshape(-1, vocab), ids[:, n + 1 :].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        accs.append((logits.argmax(-1) == ids[:, n + 1 :]).float().mean().item())
        recent = sum(accs[-100:]) / len(accs[-100:])
        if step % 100 == 0:
            log(
                f"step {step:>5}  loss {loss.item():.3f}  copy acc (last 100) {recent:.3f}  "
                f"{time.monotonic() - start:.0f} s"
            )
        if len(accs) >= 100 and recent >= target:
            log(f"step {step:>5}  copy acc (last 100) {recent:.3f}: target reached")
            break
    model.eval()
    return sum(accs[-100:]) / max(1, len(accs[-100:]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m clover.model.training.copy_warmup", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--init-from", required=True, help="model directory to start from ('embedded': the shipped one)"
    )
    p.add_argument("--out", type=Path, required=True, help="model directory to write")
    p.add_argument("--data", type=Path, help="packed data (model.data) whose token use half the rows follow")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--target", type=float, default=0.95, help="stop at this copy accuracy")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lengths", default="16,48", help="chunk length range, drawn per batch")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--tool-prompt", choices=["full", "compact"], help="set the config's tool_prompt (as the data)"
    )
    a = p.parse_args(argv)
    try:
        lo, hi = (int(x) for x in a.lengths.split(","))
        if not 2 <= lo <= hi:
            raise ValueError
    except ValueError:
        p.error(f"--lengths {a.lengths!r}: expected two integers LO,HI with 2 <= LO <= HI")
    if not 0 < a.target <= 1:
        p.error("--target must be in (0, 1]")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    source = EMBEDDED_DIR if a.init_from == "embedded" else Path(a.init_from)
    try:
        model = tied_copy(source, a.tool_prompt)
        probs = usage_probs_from_packed(a.data, model.config.vocab_size) if a.data else None
    except (CheckpointError, OSError, KeyError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    acc = warm_up(
        model, probs, steps=a.steps, target=a.target, lr=a.lr, batch=a.batch, lengths=(lo, hi), seed=a.seed
    )
    save_checkpoint(model, a.out)
    if (source / "tokenizer.json").is_file():
        shutil.copyfile(source / "tokenizer.json", a.out / "tokenizer.json")
    print(f"copy accuracy {acc:.3f}; wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
