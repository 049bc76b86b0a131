"""Train the embedded Clover's byte-level BPE tokenizer (`tokenizer.json`, ~8k tokens).

Byte-level means every string is representable: text is split with a Qwen2-style regex (digits
one by one, words with their leading space, punctuation runs, newline runs), each piece is mapped
to bytes, and BPE merges are learnt on top. The chat and tool-call markers are added tokens with
fixed ids 0..13, so they are always single tokens and never merged with their neighbours.

    python -m clover.model.training.tokenizer_build --out model/weights/tokenizer.json [--vocab-size 8192] [FILES...]

The default corpus is this machine's Python standard library sources (`sysconfig`'s stdlib path),
shuffled with `--seed` and capped at `--max-mb`; extra text files are appended.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import sysconfig
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

# Control tokens: dropped by decode(skip_special_tokens=True).
CONTROL_TOKENS: tuple[str, ...] = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>")
# Markup the model writes as text (thinking, Qwen3-Coder tool calls): single tokens, kept on decode.
MARKUP_TOKENS: tuple[str, ...] = (
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<function=",
    "</function>",
    "<parameter=",
    "</parameter>",
)
ALL_ADDED: tuple[str, ...] = CONTROL_TOKENS + MARKUP_TOKENS

# Qwen2-style split: contractions, letter runs with one leading non-letter, single digits,
# punctuation runs with their newlines, newline runs, other whitespace.
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_SKIP_DIRS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


def _empty_tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def train_tokenizer(texts: Iterable[str], vocab_size: int = 8192, min_frequency: int = 2) -> Tokenizer:
    """A byte-level BPE tokenizer trained on `texts`, added tokens first (ids 0..13)."""
    needed = len(ALL_ADDED) + len(pre_tokenizers.ByteLevel.alphabet())
    if vocab_size < needed:
        raise ValueError(f"vocab_size must be at least {needed} (added tokens + 256 byte symbols)")
    tok = _empty_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in ALL_ADDED],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    # The trainer marks every reserved token special; the markup must survive skip_special_tokens.
    data = json.loads(tok.to_str())
    for entry in data["added_tokens"]:
        entry["special"] = entry["content"] in CONTROL_TOKENS
    return Tokenizer.from_str(json.dumps(data, ensure_ascii=False))


def stdlib_sources(seed: int = 0, max_bytes: int | None = None) -> list[Path]:
    """The standard library's .py files (tests and site-packages excluded), shuffled by `seed`."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if not _SKIP_DIRS & set(p.relative_to(root).parts[:-1]))
    random.Random(seed).shuffle(files)
    if max_bytes is None:
        return files
    picked, total = [], 0
    for path in files:
        size = path.stat().st_size
        if total + size > max_bytes:
            continue
        picked.append(path)
        total += size
    return picked


def read_texts(paths: Iterable[Path]) -> Iterator[str]:
    for path in paths:
        try:
            yield path.read_text(encoding="utf-8", errors="replace")
        except OSError as err:  # unreadable file: skip it, say so
            print(f"warning: skipping {path}: {err.strerror}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m clover.model.training.tokenizer_build", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("files", nargs="*", type=Path, help="extra text files for the corpus")
    parser.add_argument("--out", type=Path, required=True, help="where to write tokenizer.json")
    parser.add_argument("--vocab-size", type=int, default=8192)
    parser.add_argument("--min-frequency", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0, help="order and sampling of the stdlib files")
    parser.add_argument("--max-mb", type=float, default=24.0, help="cap on stdlib source bytes")
    parser.add_argument("--no-stdlib", action="store_true", help="train on the given files only")
    args = parser.parse_args(argv)
    missing = [str(f) for f in args.files if not f.is_file()]
    if missing:
        parser.error(f"not a file: {', '.join(missing)}")
    paths = [] if args.no_stdlib else stdlib_sources(args.seed, int(args.max_mb * 1e6))
    paths += args.files
    if not paths:
        parser.error("empty corpus: give text files or drop --no-stdlib")
    start = time.perf_counter()
    try:
        tok = train_tokenizer(read_texts(paths), args.vocab_size, args.min_frequency)
    except ValueError as err:
        parser.error(str(err))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(args.out))
    print(
        f"trained on {len(paths)} files in {time.perf_counter() - start:.1f}s: "
        f"{tok.get_vocab_size()} tokens -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
