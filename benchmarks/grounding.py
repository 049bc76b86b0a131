"""What grounded decoding costs (steering/grounding.py): building a file's index, and one
token's mask step, against one forward of the model.

    python -m benchmarks.grounding [--model embedded] [--mb 1.0] [--paths 10000] [--repeat 5]

The file is this repository's own Python sources, repeated up to the size asked for (deterministic). Index
build = FileIndex (line starts, indentation) + the first token's allowed set (the tokens that can start a
line). Mask step = one token more of an old_str (the node's occurrences narrowed), its allowed next tokens and
their ban row, walked along 20 real lines of the file (a fresh index each). The forward is one of the model's
decoding forwards after a 1,024-token prompt (B = 1: an AR step; B = 32: one diffusion round)."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def source_text(size: int) -> bytes:
    files = sorted(p for d in ("clover_cli", "model", "tools", "evals") for p in (ROOT / d).rglob("*.py"))
    chunk = b"".join(p.read_bytes() for p in files)
    return (chunk * (size // max(len(chunk), 1) + 1))[:size].rsplit(b"\n", 1)[0] + b"\n"


clock = time.process_time  # CPU time of this process: a busy machine does not inflate it


def _ms(f, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = clock()
        f()
        times.append(clock() - t0)
    return 1000 * statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.grounding", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="embedded")
    p.add_argument("--mb", type=float, default=1.0, help="file size in MB")
    p.add_argument("--paths", type=int, default=10000, help="workspace files for the path trie")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)

    import torch

    from clover.backends.local import checkpoint_dir, load_model
    from clover.model.text.tokenizer import CloverTokenizer
    from clover.steering.tool_grammar import ToolCallGrammar
    from clover.steering.value_nodes import CandidateSet, FileIndex, Vocab

    torch.set_num_threads(1)
    directory = checkpoint_dir(args.model)
    tok = CloverTokenizer.from_dir(directory)
    net, config = load_model(directory, "cpu")[:2]
    net.eval()
    t0 = clock()
    vocab = Vocab(tok, config.vocab_size)
    vocab_ms = 1000 * (clock() - t0)
    data = source_text(int(args.mb * 1_000_000))

    build_ms = _ms(lambda: FileIndex(vocab, data), args.repeat)
    first_ms = _ms(lambda: FileIndex(vocab, data).first_tokens(), args.repeat) - build_ms
    index = FileIndex(vocab, data)
    index.first_tokens()

    # mask steps along real lines: values of 1..40 tokens from 50 line starts spread over the file
    grammar = ToolCallGrammar(
        tok,
        [{"type": "function", "function": {"name": "x", "parameters": {}}}],
        opened=False,
        stop_ids=tok.stop_ids(),
        vocab_size=config.vocab_size,
        mask_id=config.mask_token_id,
    )
    steps: list[float] = []
    for s in index.starts[:: max(len(index.starts) // 20, 1)][:20]:
        fresh = FileIndex(vocab, data)  # nothing cached but the first-token set
        fresh._first = index.first_tokens()
        node = fresh.root
        for t in vocab.tok.encode(fresh.text[s : s + 200].decode("utf-8", "replace"))[:40]:
            if t not in node.options():
                break
            t0 = clock()
            node = node.next(t)
            opts = node.options()
            grammar._ban_row([grammar.param_close if o < 0 else o for o in opts], ban_listed=False)
            steps.append(clock() - t0)
    step_ms = 1000 * statistics.median(steps)
    step_p90 = 1000 * sorted(steps)[int(0.9 * len(steps))]

    names = [f"pkg{i % 97}/sub{i % 13}/module_{i}.py" for i in range(args.paths)]
    paths_ms = _ms(lambda: CandidateSet(vocab, names).root().options(), args.repeat)

    from clover.model.decoder.generate import DecodeSettings, generate

    forward = {}  # CPU ms per forward while decoding after a 1,024-token prompt (no grammar)
    prompt = tok.encode(data[:20000].decode("utf-8", "replace"))[:1024]
    for b in (1, 32):
        runs = {}
        for n in (b, b + 64):  # the difference leaves out the prefill
            t0 = clock()
            res = generate(net, [prompt], DecodeSettings(block_size=b, max_new_tokens=n, stop_token_ids=[]))
            runs[n] = (clock() - t0, res.stats["forwards"])
        forward[b] = 1000 * (runs[b + 64][0] - runs[b][0]) / max(runs[b + 64][1] - runs[b][1], 1)

    print(
        f"file {len(data) / 1e6:.2f} MB, {index.lines} lines; vocabulary {len(vocab.bytes)} tokens "
        f"(byte trie built once per model: {vocab_ms:.0f} ms)"
    )
    print(f"index build {build_ms:.1f} ms + first-token set {first_ms:.1f} ms = {build_ms + first_ms:.1f} ms")
    print(
        f"mask step (old_str, fresh node): median {step_ms:.3f} ms, p90 {step_p90:.3f} ms over {len(steps)} steps"
    )
    print(f"path trie over {args.paths} files (build + first set): {paths_ms:.1f} ms")
    for b, ms in forward.items():
        print(f"forward B={b}: {ms:.2f} ms; mask step / forward = {step_ms / ms:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
