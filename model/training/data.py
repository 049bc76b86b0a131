"""Training data for the embedded Clover: tokenised, packed sequences with a loss mask.

Two sources, packed into one stream of fixed-length rows:
- rendered trajectories ({"text", "spans"} JSONL, or oracle trajectories with a renderer passed in):
  ChatML text where only the assistant spans are targets (thinking, calls, answers); system prompt,
  issue and tool outputs are context;
- plain Python code from this machine's standard library (every token a target), for language
  modelling.

Documents are joined with `<|endoftext|>` and cut into rows of `seq_len` tokens. The result is one
file, `packed.pt` = {"ids": int32 [N, L], "target": bool [N, L], "meta": {...}}:

    python -m clover.evals.synthfix.dataset --tokenizer tok.json --trajectories oracle.jsonl --out DIR
    python -m clover.model.training.data --tokenizer tok.json --trajectories rendered.jsonl --out DIR [--seq 2048]

model/ knows nothing of evals/: the trajectory renderer is passed in; evals/synthfix/dataset.py is the
entry point that renders SynthFix oracle trajectories.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import torch

EOT = "<|endoftext|>"
Doc = tuple[str, list[tuple[int, int]] | None]  # text, target char spans (None: every token)


def encode_doc(
    tokenizer: Any, text: str, spans: list[tuple[int, int]] | None
) -> tuple[list[int], list[bool]]:
    """Token ids of `text` and, per token, whether it is a target (inside a span by its start)."""
    enc = tokenizer.encode(text, add_special_tokens=False)
    if spans is None:
        return list(enc.ids), [True] * len(enc.ids)
    target = [False] * len(enc.ids)
    spans = sorted(spans)
    j = 0
    for i, (start, end) in enumerate(enc.offsets):
        while j < len(spans) and spans[j][1] <= start:
            j += 1
        if j < len(spans) and spans[j][0] <= start < spans[j][1] and end > start:
            target[i] = True
    return list(enc.ids), target


def pack(
    docs: Iterable[tuple[list[int], list[bool]]], seq_len: int, eot_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Join documents with an `<|endoftext|>` (itself a target after a target doc: the model learns
    to stop) and cut into [N, seq_len] rows; the ragged tail is dropped."""
    ids: list[int] = []
    target: list[bool] = []
    for doc_ids, doc_target in docs:
        ids.extend(doc_ids)
        target.extend(doc_target)
        ids.append(eot_id)
        target.append(bool(doc_target and doc_target[-1]))
    n = len(ids) // seq_len
    if n == 0:
        raise ValueError(f"not enough tokens ({len(ids)}) for one row of {seq_len}")
    t_ids = torch.tensor(ids[: n * seq_len], dtype=torch.int32).view(n, seq_len)
    t_tgt = torch.tensor(target[: n * seq_len], dtype=torch.bool).view(n, seq_len)
    return t_ids, t_tgt


def end_aligned(
    docs: Iterable[tuple[list[int], list[bool]]], seq_len: int, pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """One row per document: its last `seq_len - 1` tokens, left-padded (padding not a target). An
    agent trajectory puts its targets at the end, after a long constant system prompt, so the end
    window keeps every target of the document and the issue and tool outputs they depend on.
    Every row opens with at least one `pad_id`: the token a model trained on these rows expects
    first (its config's prompt_start_ids), cut rows included."""
    if seq_len < 2:
        raise ValueError(f"end-aligned rows need a sequence length of 2 or more, not {seq_len}")
    rows_ids, rows_tgt = [], []
    for doc_ids, doc_target in docs:
        ids, tgt = doc_ids[-(seq_len - 1) :], doc_target[-(seq_len - 1) :]
        pad = seq_len - len(ids)
        rows_ids.append([pad_id] * pad + ids)
        rows_tgt.append([False] * pad + tgt)
    if not rows_ids:
        raise ValueError("no documents")
    return torch.tensor(rows_ids, dtype=torch.int32), torch.tensor(rows_tgt, dtype=torch.bool)


def copy_rows(
    n: int, seq_len: int, first_id: int, vocab: int, seed: int, probs: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Synthetic copying rows: random token chunks (8-64 tokens), each repeated right after itself.
    Tokens are uniform over [first_id, vocab), or drawn from `probs` [vocab] when given.
    The second copy is the target: predicting it takes an induction mechanism (find the earlier
    occurrence, read what followed), without which a model cannot carry a name from the issue into a
    tool call. Mixed into agent data they keep the skill `model.copy_warmup` taught; they do not
    teach it from scratch (see that module: tied embeddings and a phase of its own are needed)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.empty(n, seq_len, dtype=torch.int32)
    target = torch.zeros(n, seq_len, dtype=torch.bool)
    for r in range(n):
        at = 0
        while at < seq_len:
            size = int(torch.randint(8, 65, (1,), generator=g))
            if probs is None:
                chunk = torch.randint(first_id, vocab, (size,), generator=g, dtype=torch.int32)
            else:
                chunk = torch.multinomial(probs, size, replacement=True, generator=g).int()
            both = torch.cat([chunk, chunk])[: seq_len - at]
            ids[r, at : at + len(both)] = both
            target[r, at + size : at + len(both)] = True
            at += len(both)
    return ids, target


def usage_probs(docs: list[tuple[list[int], list[bool]]], vocab: int, first_id: int) -> torch.Tensor:
    """Token probabilities as `docs` use them, sqrt-flattened, special tokens (< first_id) excluded.
    For copying rows: the copy-to-output map is learnt per token, and uniform draws over the whole
    vocabulary would spend most rows on tokens the agent never writes."""
    counts = torch.bincount(
        torch.tensor([t for ids, _ in docs for t in ids], dtype=torch.long), minlength=vocab
    )
    counts[:first_id] = 0
    probs = counts.float().sqrt()
    return probs / probs.sum()


def read_trajectories(
    paths: Iterable[Path],
    render: Callable[[dict, int], tuple[str, list[tuple[int, int]]]] | None,
    seed: int,
    variants: Callable[[dict], list[dict]] | None = None,
) -> Iterator[Doc]:
    """Rendered training docs. A record with "text"/"spans" is used as is; an oracle trajectory is
    rendered by `render(traj, cut)` with a seeded random history cut (see oracle.render_trajectory),
    each of `variants(traj)` (e.g. renamed copies) in its place when given."""
    rng = random.Random(seed)
    for path in paths:
        with Path(path).open(encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                rec = json.loads(line)
                if "text" in rec:
                    yield rec["text"], [tuple(s) for s in rec.get("spans", [])]
                    continue
                if render is None:
                    raise ValueError(f"{path}: trajectory records need a renderer")
                for traj in variants(rec) if variants else [rec]:
                    turns = sum(1 for m in traj["messages"] if m["role"] == "assistant")
                    # Cut 0 (every turn with thinking) half the time, else a random point: the model
                    # then also sees histories whose earlier turns lack thinking, as at inference.
                    cut = 0 if rng.random() < 0.5 else rng.randrange(turns)
                    yield render(traj, cut)


def stdlib_docs(max_chars: int, seed: int = 0) -> Iterator[Doc]:
    """Python standard library sources (tests excluded), shuffled, up to `max_chars` in total."""
    import sysconfig

    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}
    files = sorted(p for p in root.rglob("*.py") if not skip & set(p.relative_to(root).parts[:-1]))
    random.Random(seed).shuffle(files)
    total = 0
    for path in files:
        if total >= max_chars:
            return
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        text = text[:20000]  # long modules: their head is enough, and more files give variety
        total += len(text)
        yield text, None


def build(
    tokenizer_path: Path,
    trajectories: list[Path],
    out_dir: Path,
    *,
    seq_len: int = 2048,
    code_fraction: float = 0.25,
    seed: int = 0,
    render: Callable[[dict, int], tuple[str, list[tuple[int, int]]]] | None = None,
    align: str = "pack",
    all_targets: bool = False,
    variants: Callable[[dict], list[dict]] | None = None,
    copy_fraction: float = 0.0,
) -> dict[str, Any]:
    """Write out_dir/packed.pt; returns its meta (rows, tokens, target tokens per source)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_path))
    eot = tok.token_to_id(EOT)
    if eot is None:
        raise ValueError(f"{tokenizer_path}: no {EOT} token")
    traj = [
        encode_doc(tok, text, None if all_targets else spans)
        for text, spans in read_trajectories(trajectories, render, seed, variants)
    ]
    traj_tokens = sum(len(i) for i, _ in traj)
    # code tokens ~ code_fraction of the mix; ~3.5 characters per token for Python source
    want_code = int(traj_tokens * code_fraction / max(1e-9, 1 - code_fraction)) if traj else 2_000_000
    code = [encode_doc(tok, text, None) for text, _ in stdlib_docs(int(want_code * 3.5), seed)]
    n_copy = 0
    if copy_fraction and not (align == "end" and traj):
        raise ValueError("copying rows need --align end and trajectories")
    if align == "end" and traj:
        # trajectories end-aligned (+ their closing <|endoftext|>), code packed
        t_ids, t_tgt = end_aligned([(i + [eot], t + [True]) for i, t in traj], seq_len, eot)
        parts = [(t_ids, t_tgt)] + ([pack(code, seq_len, eot)] if code else [])
        if copy_fraction > 0:
            from clover.model.text.chat import SPECIAL_TOKENS

            n_copy = int(t_ids.shape[0] * copy_fraction / (1 - copy_fraction))
            vocab, first = tok.get_vocab_size(), len(SPECIAL_TOKENS)
            parts.append(copy_rows(n_copy, seq_len, first, vocab, seed, usage_probs(traj, vocab, first)))
        ids, target = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        order = torch.randperm(ids.shape[0], generator=torch.Generator().manual_seed(seed))
        ids, target = ids[order], target[order]
    else:
        docs = traj + code
        random.Random(seed).shuffle(docs)
        ids, target = pack(docs, seq_len, eot)
    meta = {
        "seq_len": seq_len,
        "align": align,
        "rows": int(ids.shape[0]),
        "tokens": int(ids.numel()),
        "target_tokens": int(target.sum()),
        "trajectories": len(traj),
        "trajectory_tokens": traj_tokens,
        "trajectory_target_tokens": sum(sum(t) for _, t in traj),
        "copy_rows": n_copy,
        "code_docs": len(code),
        "code_tokens": sum(len(i) for i, _ in code),
        "vocab_size": tok.get_vocab_size(with_added_tokens=True),
        "tokenizer": str(Path(tokenizer_path).resolve()),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save({"ids": ids, "target": target, "meta": meta}, out_dir / "packed.pt")
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


def load_packed(data_dir: Path) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    path = Path(data_dir) / "packed.pt"
    if not path.is_file():
        raise ValueError(f"no packed.pt in {data_dir} (build it with python -m clover.model.training.data)")
    blob = torch.load(path, weights_only=True)
    return blob["ids"].long(), blob["target"], blob["meta"]


def make_parser(prog: str = "python -m clover.model.training.data") -> argparse.ArgumentParser:
    """The packing options; evals/synthfix/dataset.py adds its rendering options to the same parser."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--trajectories", type=Path, nargs="*", default=[])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--code-fraction", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--align",
        choices=["pack", "end"],
        default="pack",
        help="trajectories packed, or one end-aligned row each",
    )
    parser.add_argument(
        "--all-targets",
        action="store_true",
        help="loss on every trajectory token, not only the assistant's: more signal per step, "
        "but a small agent model then over-copies (keeps copying past a name); the "
        "embedded model's last phase is assistant-only",
    )
    parser.add_argument(
        "--copy-fraction",
        type=float,
        default=0.0,
        help="share of synthetic copying rows (random chunks repeated), --align end only",
    )
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    args = parser.parse_args(argv)
    for p in [args.tokenizer, *args.trajectories]:
        if not p.is_file():
            parser.error(f"not a file: {p}")
    if not 0 <= args.code_fraction < 1:
        parser.error("--code-fraction must be in [0, 1)")
    if not 0 <= args.copy_fraction < 1:
        parser.error("--copy-fraction must be in [0, 1)")
    return args


def run(
    args: argparse.Namespace,
    render: Callable[[dict, int], tuple[str, list[tuple[int, int]]]] | None = None,
    variants: Callable[[dict], list[dict]] | None = None,
) -> int:
    """Build the packed data for parsed options; prints the meta. Exit code 1 on bad data."""
    start = time.perf_counter()
    try:
        meta = build(
            args.tokenizer,
            args.trajectories,
            args.out,
            seq_len=args.seq,
            code_fraction=args.code_fraction,
            seed=args.seed,
            render=render,
            align=args.align,
            all_targets=args.all_targets,
            variants=variants,
            copy_fraction=args.copy_fraction,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(meta), f"({time.perf_counter() - start:.0f}s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Pre-rendered {"text", "spans"} records only; SynthFix oracle trajectories go through
    `python -m clover.evals.synthfix.dataset` (same options, plus the rendering ones)."""
    return run(parse_args(make_parser(), argv))


if __name__ == "__main__":
    sys.exit(main())
