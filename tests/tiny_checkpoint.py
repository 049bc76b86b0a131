"""A tiny RANDOM Clover checkpoint directory for tests and benchmarks: config.json,
model.safetensors and a byte-level BPE tokenizer.json (~300 tokens, the chat format's special
tokens and the tool-call markup tokens included, as in the shipped tokenizer), trained here on a
few strings. Built once per process and cached.

Random weights decode gibberish; what the tests check is the plumbing, not the words.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

from clover.model.text.chat import SPECIAL_TOKENS

VOCAB = 300
# The shipped tokenizer (model/training/tokenizer_build.py) has these as single tokens right after the chat
# specials (ids 10..13); the tool-call grammar relies on them.
MARKUP_TOKENS = ["<function=", "</function>", "<parameter=", "</parameter>"]

# Enough text that the BPE learns a few merges over code, chat markup and tool calls.
CORPUS = [
    "def add(a, b):\n    return a + b\n",
    "import os\nimport sys\n\nclass Foo:\n    def __init__(self):\n        self.x = 1\n",
    "The quick brown fox jumps over the lazy dog. Fix the bug in calc.py, then run the tests.",
    "<tool_call>\n<function=bash>\n<parameter=command>\npytest -q\n</parameter>\n</function>\n</tool_call>",
    "<tool_call>\n<function=view>\n<parameter=path>\ncalc.py\n</parameter>\n</function>\n</tool_call>",
    "You are a helpful coding assistant. Use the tools to explore the repository.",
    "system user assistant tool function parameter description required string integer",
    '{"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}',
]

_cache: dict[str, Path] = {}


def train_tokenizer(vocab_size: int = VOCAB):
    """A byte-level BPE `tokenizers.Tokenizer` with SPECIAL_TOKENS first (ids 0..9), then the
    tool-call markup tokens (ids 10..13)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[*SPECIAL_TOKENS, *MARKUP_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS * 4, trainer)
    return tok


def config_for(tokenizer, **overrides: Any):
    from clover.model.config import tiny

    ids = {t: tokenizer.token_to_id(t) for t in SPECIAL_TOKENS}
    base: dict[str, Any] = dict(
        vocab_size=tokenizer.get_vocab_size(with_added_tokens=True),
        mask_token_id=ids["<|mask|>"],
        eos_token_ids=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
        max_position_embeddings=32768,
        block_size=4,
    )
    base.update(overrides)
    return tiny(**base)


def build_tiny_checkpoint(directory: str | Path, seed: int = 0, **overrides: Any) -> Path:
    """Write a tiny random checkpoint into `directory` (created) and return it."""
    import torch

    from clover.model.loading.load import save_checkpoint
    from clover.model.modeling import CloverForCausalLM

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer()
    config = config_for(tok, **overrides)
    torch.manual_seed(seed)
    model = CloverForCausalLM(config).eval()
    save_checkpoint(model, d)
    tok.save(str(d / "tokenizer.json"))
    return d


def tiny_checkpoint_dir() -> Path:
    """The per-process cached tiny checkpoint (do not modify it; copy it first)."""
    if "dir" not in _cache:
        root = Path(tempfile.mkdtemp(prefix="clover-tiny-ckpt-"))
        atexit.register(shutil.rmtree, root, True)
        _cache["dir"] = build_tiny_checkpoint(root / "tiny")
    return _cache["dir"]


if __name__ == "__main__":  # python -m tests.tiny_checkpoint DIR
    import sys

    out = build_tiny_checkpoint(sys.argv[1] if len(sys.argv) > 1 else "tiny-clover")
    print(out)
