"""Does the model read the request? The kind of reply it starts for each chat prompt.

    python -m benchmarks.chat_routing [--model embedded] [--root /home/user/calc [/home/user/utilkit ...]]

A chat reply's kind (a greeting back, "I can't answer general questions", a definition looked up, the tests
run...) is decided by the first line of the model's thinking, which the training data writes one way per kind
(evals/synthfix/chat_rows.py THOUGHTS, chat_wording.py THINK). For each of benchmarks/chat_prompts.py's twenty
prompts (never taught), labelled here with the kind a careful assistant would pick, this decodes that line
greedily (B = 1, as the verified decoder writes it) after `clover chat`'s system prompt and tools, reads which
kind's line it begins, and counts the prompts where that is the label and the thinking ends after that line,
as the training data's does (a model that goes on thinking, "Greeting. ...\nI need to find ...", is marked
KIND+more). Also printed: each kind's line scored by mean log-probability per token (the best two). Seconds on
a CPU, no agent run: a quick check of a checkpoint's chat data before the full chat_prompts run. A model that
ignores the request starts every prompt alike (an early checkpoint gave the general question's line
for all twenty). `--root`: the repository path in the system prompt; the choice should not depend on it
(evals/synthfix/chat_rows.draw_root). Given several, each is scored and the prompts whose choice moves with
the path are counted (one checkpoint: 9/20 at .../calc, 8/20 at .../utilkit, a SynthFix package's name,
with most choices moved)."""

from __future__ import annotations

import argparse
import sys

from benchmarks.chat_prompts import LABELS  # the kind a careful assistant picks for each prompt

# The lines older checkpoints were taught (each kind's line now starts with its own token)
LEGACY = {
    "greet": "A greeting. Say briefly who I am and what I can do.",
    "who": "The user asks who I am. Answer briefly.",
    "can": "The user asks what I can do. Answer briefly and concretely.",
    "thanks": "The user says thanks. Answer briefly.",
    "general": "This is a general question, outside what I can do. Answer briefly and say what I can do.",
    "feature": "This is a large feature request, beyond what I can do. Say so briefly and say what I can do.",
    "find": "The user wants the definition of `{name}`. outline finds it.",
    "tests": "Run the tests with pytest and report the result.",
    "about": "Read the README to see what the project is.",
    "files": "List the Python files with glob.",
}


def openers(prompt: str) -> dict[str, str]:
    """Each kind's first thinking line, as the training data writes it (a definition's with the
    function the prompt names)."""
    from clover.evals.synthfix.chat_rows import THOUGHTS
    from clover.evals.synthfix.chat_tasks import THINK

    name = next((n for n in ("add", "mean") if n in prompt.split() or f"{n}?" in prompt.split()), "add")
    return {**THOUGHTS, **{k: v.format(name=name) for k, v in THINK.items()}}


def kind_of(line: str, kinds: dict[str, str]) -> str:
    """The kind whose thinking line (current or LEGACY) shares the longest start with `line` ("?" if
    none shares more than its first word)."""
    name = kinds["find"].split("`")[1]
    kinds = {**{f"{k} ": v.format(name=name) for k, v in LEGACY.items()}, **kinds}

    def shared(a: str, b: str) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    best = max(kinds, key=lambda k: shared(line, kinds[k]))
    return best.strip() if shared(line, kinds[best]) > len(line.split(" ", 1)[0]) else "?"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.chat_routing", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--model", default="embedded")
    p.add_argument(
        "--root",
        nargs="+",
        default=["/home/user/calc"],
        help="the repository path(s) the system prompt shows",
    )
    a = p.parse_args(argv)

    from benchmarks.chat_prompts import MORE_PROMPTS, PROMPTS
    from clover.backends.local import LocalCloverModel
    from clover.core.tool_protocol import tool_spec
    from clover.model.decoder.generate import DecodeSettings, generate
    from clover.model.decoder.score import continuation_logprobs
    from clover.model.text.chat import THINK_CLOSE
    from clover.prompts import BASE
    from clover.settings import Settings
    from clover.tools.registry import default_tools

    model = LocalCloverModel(Settings(model=a.model))
    tools = [tool_spec(t) for t in default_tools()]
    stops = [t for t in (model.tokenizer.token_id(THINK_CLOSE), *model.stop_ids) if t is not None]
    decode = DecodeSettings(block_size=1, max_new_tokens=40, temperature=0.0, stop_token_ids=stops)
    prompts = PROMPTS + MORE_PROMPTS
    chosen: dict[str, list[str]] = {}
    for root in a.root:
        if len(a.root) > 1:
            print(f"# {root}")
        right = 0
        for prompt in prompts:
            messages = [
                {"role": "system", "content": BASE.format(root=root)},
                {"role": "user", "content": prompt},
            ]
            ids, _ = model.prompt_ids(messages, tools)
            kinds = openers(prompt)
            conts = [model.tokenizer.encode(line) for line in kinds.values()]
            scores = [
                lp / len(c) for lp, c in zip(continuation_logprobs(model.net, ids, conts), conts, strict=True)
            ]
            ranked = sorted(zip(scores, kinds, strict=True), reverse=True)
            thought = model.tokenizer.decode(generate(model.net, [ids], decode).tokens[0])
            line, _, rest = thought.partition("\n")
            best = kind_of(line, kinds)
            if not rest.startswith(THINK_CLOSE):  # the line must end the thinking, as in training
                best = f"{best}+more"
            chosen.setdefault(prompt, []).append(best)
            right += best == LABELS[prompt]
            mark = "ok " if best == LABELS[prompt] else "-- "
            print(
                f"{mark}{prompt[:40]:42s} {LABELS[prompt]:8s} -> {best:8s} {line[:48]!r:52s} "
                + " ".join(f"{k}:{s:.2f}" for s, k in ranked[:2]),
                flush=True,
            )
        print(
            f"{right}/{len(LABELS)} prompts: the labelled kind scores best"
            + (f" at {root}" if len(a.root) > 1 else "")
        )
    if len(a.root) > 1:
        moved = sum(len(set(kinds)) > 1 for kinds in chosen.values())
        print(f"{moved}/{len(prompts)} prompts: the choice moves with the repository path")
    return 0


if __name__ == "__main__":
    sys.exit(main())
