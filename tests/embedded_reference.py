"""The shipped model's reference generation: a fixed chat prompt decoded greedily with B = 1, with
B = 32 left order, and with B = 16 verified rounds (the default decoder: B = 1's tokens). `python -m
tests.embedded_reference` re-records tests/data/embedded_greedy.json after the weights in model/weights/
change."""

from __future__ import annotations

import json
from pathlib import Path

WEIGHTS = Path(__file__).resolve().parents[1] / "model" / "weights"
RECORD = Path(__file__).resolve().parent / "data" / "embedded_greedy.json"
MESSAGES = [
    {"role": "system", "content": "You are Clover, a coding agent."},
    {"role": "user", "content": "The function add(a, b) in calc.py returns a - b. Please fix it."},
]
NEW_TOKENS = 24


def reference_tokens() -> dict[str, list[int]]:
    import torch

    from clover.model.decoder.generate import DecodeSettings, generate
    from clover.model.loading.load import load_checkpoint
    from clover.model.text.chat import encode_prompt, render_messages
    from clover.model.text.tokenizer import CloverTokenizer

    torch.manual_seed(0)
    loaded = load_checkpoint(WEIGHTS, device="cpu", dtype=torch.float32)
    tokenizer = CloverTokenizer.from_dir(WEIGHTS)
    prompt = encode_prompt(
        tokenizer, loaded.config, render_messages(MESSAGES, think=True, template=loaded.chat_template)
    )
    out = {}
    for key, block, order in (("B1", 1, None), ("B32", 32, "left"), ("B16-verify", 16, "verify")):
        settings = DecodeSettings(
            block_size=block,
            order=order,
            temperature=0.0,
            max_new_tokens=NEW_TOKENS,
            stop_token_ids=tokenizer.stop_ids(),
        )
        out[key] = list(generate(loaded.model, [prompt], settings).tokens[0])
    return out


if __name__ == "__main__":
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps(reference_tokens(), indent=1) + "\n")
    print(f"recorded {RECORD}")
