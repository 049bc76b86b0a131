"""Can a checkpoint copy? Greedy next-token accuracy on the second half of a repeated random sequence.

    python -m benchmarks.copy_probe --model DIR [--length 40] [--trials 10]

A model with an induction mechanism (find the earlier occurrence of the current token, read what
followed) scores near 1; one without scores near 0. A coding agent needs it for every tool call that
names a function, path or code line from its context, so this is the first number to check when a
small model fails held-out tasks while knowing the format. Tokens are drawn uniformly from the
ordinary (non-special) vocabulary.
"""

from __future__ import annotations

import argparse
import sys

import torch


def copy_accuracy(model, vocab: int, first_id: int, length: int, trials: int, seed: int = 0) -> float:
    gen = torch.Generator().manual_seed(seed)
    hits = total = 0
    with torch.no_grad():
        for _ in range(trials):
            x = torch.randint(first_id, vocab, (1, length), generator=gen)
            ids = torch.cat([x, x], 1)
            pred = model(ids)[0, :-1].argmax(-1)
            hits += int((pred[length:] == ids[0, length + 1 :]).sum())
            total += length - 1
    return hits / total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.copy_probe", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="checkpoint directory ('embedded': the shipped model)")
    p.add_argument("--length", type=int, default=40, help="tokens per half")
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    from clover.model import EMBEDDED_DIR
    from clover.model.loading.load import CheckpointError, load_checkpoint
    from clover.model.text.chat import SPECIAL_TOKENS

    torch.set_num_threads(a.threads)
    try:
        loaded = load_checkpoint(EMBEDDED_DIR if a.model == "embedded" else a.model, dtype=torch.float32)
    except CheckpointError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    acc = copy_accuracy(loaded.model, loaded.config.vocab_size, len(SPECIAL_TOKENS), a.length, a.trials)
    print(f"{a.model}: repeat-{a.length} copy accuracy {acc:.3f} ({a.trials} sequences)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
