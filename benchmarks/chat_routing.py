"""Does the model read the request? Which kind of reply it finds likeliest for each chat prompt.

    python -m benchmarks.chat_routing [--model embedded]

A chat reply's kind (a greeting back, "I can't answer general questions", a definition looked up,
the tests run...) is decided by the first line of the model's thinking, which the training data
writes one way per kind (evals/synthfix/chat_rows.py THOUGHTS, chat_tasks.py THINK). For each of
benchmarks/chat_prompts.py's twenty prompts (never taught), labelled here with the kind a careful
assistant would pick, this scores every kind's thinking line after the prompt (`clover chat`'s
system prompt and tools) by the model's mean log-probability per token, and counts the prompts
whose best-scoring kind is the label. Seconds on a CPU, no agent run: a quick check of a
checkpoint's chat data before the full chat_prompts run. A model that ignores the request scores
every prompt alike (the shipped weights of session 7: the same kind for all twenty).
"""

from __future__ import annotations

import argparse
import sys

LABELS = {
    "hi": "greet", "What can you do?": "can", "What does this repository do?": "about",
    "Explain what a Python decorator is.": "general", "Write a function that reverses a string.": "general",
    "What is the capital of France?": "general", "Add a web dashboard with user accounts to this project.": "feature",
    "Which file defines the function add?": "find", "Run the tests.": "tests", "Thanks, that's all.": "thanks",
    "good day!": "greet", "Who built you?": "who", "How should I ask you for help?": "can",
    "What's the tallest building in the world?": "general",
    "Explain the difference between a list and a tuple in Python.": "general", "Port this code to Go.": "feature",
    "Where is mean defined?": "find", "Do all the tests pass?": "tests", "What files are in this repo?": "files",
    "Thank you so much!": "thanks",
}  # fmt: skip


def openers(prompt: str) -> dict[str, str]:
    """Each kind's first thinking line, as the training data writes it (a definition's with the
    function the prompt names)."""
    from clover.evals.synthfix.chat_rows import THOUGHTS
    from clover.evals.synthfix.chat_tasks import THINK

    name = next((n for n in ("add", "mean") if n in prompt.split() or f"{n}?" in prompt.split()), "add")
    return {**THOUGHTS, **{k: v.format(name=name) for k, v in THINK.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.chat_routing", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="embedded")
    a = p.parse_args(argv)

    from benchmarks.chat_prompts import MORE_PROMPTS, PROMPTS
    from clover.backends.local import LocalCloverModel
    from clover.core.protocols import tool_spec
    from clover.model.score import continuation_logprobs
    from clover.prompts import BASE
    from clover.settings import Settings
    from clover.tools.registry import default_tools

    model = LocalCloverModel(Settings(model=a.model))
    tools = [tool_spec(t) for t in default_tools()]
    right = 0
    for prompt in PROMPTS + MORE_PROMPTS:
        messages = [{"role": "system", "content": BASE.format(root="/home/user/calc")}, {"role": "user", "content": prompt}]
        ids, _ = model.prompt_ids(messages, tools)
        kinds = openers(prompt)
        conts = [model.tokenizer.encode(line) for line in kinds.values()]
        scores = [lp / len(c) for lp, c in zip(continuation_logprobs(model.net, ids, conts), conts, strict=True)]
        ranked = sorted(zip(scores, kinds, strict=True), reverse=True)
        best = ranked[0][1]
        right += best == LABELS[prompt]
        mark = "ok " if best == LABELS[prompt] else "-- "
        print(f"{mark}{prompt[:44]:46s} {LABELS[prompt]:8s} -> {best:8s} "
              + " ".join(f"{k}:{s:.2f}" for s, k in ranked[:4]), flush=True)  # fmt: skip
    print(f"{right}/{len(LABELS)} prompts: the labelled kind scores best")
    return 0


if __name__ == "__main__":
    sys.exit(main())
