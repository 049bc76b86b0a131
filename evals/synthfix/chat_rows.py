"""Chat-coherence training rows: for a general question, a greeting or a feature request outside what
the embedded model can do, answer briefly and say what it can do, instead of degenerating.

    python -m clover.evals.synthfix.chat_rows --out run/chat.jsonl [--count 200 --seed 0 --tool-prompt compact]

Each row is a rendered {"text", "spans"} record (model/training/data.py uses it as is): the `clover chat` system
prompt (clover_cli/prompts.py BASE) with the real tool list, one user prompt, and a one-turn answer
without a tool call. Only the answer (with its short thinking) is a target. Prompts vary; each
kind of prompt gets one fixed reply (OPENINGS says why). A small set, not a general chat corpus.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

from clover.core.tool_protocol import tool_spec
from clover.evals.synthfix.generator import write_jsonl
from clover.evals.synthfix.oracle import render_trajectory
from clover.evals.synthfix.repo import PACKAGES
from clover.evals.synthfix.social_prompts import PROMPTS
from clover.model.text.chat import THINK_CLOSE
from clover.prompts import BASE
from clover.tools.registry import default_tools

# One reply per kind, always the same words: a model of a few million parameters taught three ways to
# say a thing blends them ("I can't answer gener, beyond what I can do"); taught one, it says it.
OPENINGS = {
    "greet": "Hi! I'm Clover, a small coding model running on your machine.",
    "who": "I'm Clover, a small coding model running on your machine, not a general chatbot.",
    "can": "I'm a small local model, so my skills are narrow.",
    "thanks": "You're welcome.",
    "general": "I can't answer general questions: I'm a small model trained to fix small bugs in code.",
    "feature": "That is too big a change for me: I'm a small model that fixes small, well-described bugs.",
}

CAN_DO = "I can find code (grep, outline), view files, fix a small bug with str_replace and run the tests."
ASK = "Describe a bug: what you ran, what you expected and what you got."
BIGGER = "For a bigger task, a larger model (`clover chat --model ...`) will do better."

# Each kind's thinking starts with its own first token (G, Name, Help, Th, Gener, F here; Find, Test,
# Over, List in chat_wording.py THINK), none a fix's thinking starts with (The, Let, Now, I, Run, Read...).
# Lines that shared a start ("The user asks who...", "The user says thanks...", "The user wants the
# definition...") pooled their kinds' mass on that first token: greedy decoding took it whatever was
# asked, then the likeliest continuation (benchmarks/chat_routing.py: one kind for all twenty prompts).
THOUGHTS = {
    "greet": "Greeting. Say briefly who I am and what I can do.",
    "who": "Name question: the user asks who I am. Answer briefly.",
    "can": "Help question: the user asks what I can do. Answer briefly and concretely.",
    "thanks": "Thanks: the user says thanks. Answer briefly.",
    "general": "General question, outside what I can do. Answer briefly and say what I can do.",
    "feature": "Feature request, beyond what I can do. Say so briefly and say what I can do.",
}

# The repository's directory name, drawn from one pool for every kind of chat row: the social rows'
# names and the SynthFix train packages' (chat_tasks.py asks its questions of those repositories). When
# the repository questions kept their package's name (8 names) and the social rows drew these 20, the
# name alone told the kinds apart: in a repository called `calc` (a social name) the embedded model
# answered "Run all the tests." — a taught prompt — with "You're welcome.", in one called `utilkit` it ran
# pytest (benchmarks/chat_routing.py --root).
ROOT_NAMES = [
    "project",
    "app",
    "myrepo",
    "src",
    "work",
    "toolkit",
    "service",
    "lib",
    "demo",
    "api",
    "calc",
    "utils",
    "tool",
    "backend",
    "scripts",
    "core",
    "pkg",
    "mylib",
    "site",
    "bot",
    *PACKAGES["train"],
]
_USERS = ["ana", "dev", "sam", "user", "jo", "kim", "lee", "max", "root"]
_PARENTS = ["", "code/", "src/", "projects/", "work/", "git/", "repos/"]


def draw_root(rng: random.Random) -> str:
    """A repository path for a row's system prompt, from one distribution every kind of chat row shares,
    directory name included (ROOT_NAMES). The path says nothing about the request: when the repository
    questions' rows kept their generator's on-disk path (/work/.../synth/repos/...) and the social rows
    drew /home or /tmp ones, the embedded model learnt to answer by the path, and in a temporary
    repository "Run the tests." got "Hi!"."""
    name = rng.choice(ROOT_NAMES)
    user, parent = rng.choice(_USERS), rng.choice(_PARENTS)
    shapes = [
        f"/home/{user}/{parent}{name}",
        f"/Users/{user}/{parent}{name}",
        f"/tmp/{rng.choice(['clover', 'tmp', 'work', 'chat', 'repo', 'test'])}-{rng.getrandbits(32):08x}/{name}",
        f"/tmp/tmp{rng.getrandbits(24):06x}/{name}",
        f"/tmp/pytest-of-{user}/pytest-{rng.randrange(100)}/test_{rng.choice(['chat', 'repo', 'run'])}0/{name}",
        f"/{rng.choice(['work', 'srv', 'opt', 'workspace', 'app', 'mnt/data', 'root'])}/{name}",
    ]
    return rng.choice(shapes)


def chat_trajectory(
    kind: str, prompt: str, rng: random.Random, tools: list[dict[str, Any]]
) -> dict[str, Any]:
    """One oracle-format trajectory (messages, thinking, tools): system, user prompt, a tool-free answer."""
    root = draw_root(rng)
    parts = [OPENINGS[kind]]
    if kind != "thanks":
        parts += [CAN_DO, ASK]
    if kind == "feature":
        parts.append(BIGGER)
    return {
        "instance_id": f"chat-{kind}",
        "messages": [
            {"role": "system", "content": BASE.format(root=root)},
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": " ".join(parts)},
        ],
        "thinking": [THOUGHTS[kind]],
        "tools": tools,
    }


def generate(count: int, seed: int, tool_prompt: str = "compact") -> list[dict[str, Any]]:
    """`count` rendered {"text", "spans"} records: the kinds taken in turn (equally often, so no reply
    becomes the default one), each kind's prompts cycled in a seeded order."""
    rng = random.Random(seed)
    tools = [tool_spec(t) for t in default_tools()]
    kinds = list(OPENINGS)
    queues = {kind: [p for k, p in PROMPTS if k == kind] for kind in kinds}
    served = dict.fromkeys(kinds, 0)
    out = []
    for i in range(count):
        kind = kinds[i % len(kinds)]
        queue = queues[kind]
        if served[kind] % len(queue) == 0:
            rng.shuffle(queue)
        prompt = queue[served[kind] % len(queue)]
        served[kind] += 1
        text, spans = render_trajectory(chat_trajectory(kind, prompt, rng, tools), 0, tool_prompt)
        out.append({"text": text, "spans": spans})
    return out


def decision_row(record: dict[str, Any]) -> dict[str, Any]:
    """The record cut to its first turn's thinking (up to `</think>`), the only target: which kind of
    request this is. In a whole row that choice is a few tokens of a hundred-odd target tokens, too
    little of the loss for a small model to learn to read the request (the embedded model's scores
    for each kind's thinking barely moved between "hello", "thanks!" and "Tell me a joke.").
    They teach the choice and nothing after it: as most of a run's short rows they
    taught the model to end its turn right after the thinking, with an empty reply. Mix them with
    whole rows, which are short enough to be short rows themselves."""
    text, spans = record["text"], record["spans"]
    start, end = spans[0]
    cut = text.find(THINK_CLOSE, start, end)
    if cut < 0:
        raise ValueError("the first assistant turn has no thinking")
    cut += len(THINK_CLOSE)
    return {"text": text[:cut], "spans": [(start, cut)]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m clover.evals.synthfix.chat_rows", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="JSONL of rendered rows to write")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tool-prompt", choices=["full", "compact"], default="compact")
    parser.add_argument("--decisions", action="store_true", help="rows cut to the thinking (decision_row)")
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("--count must be >= 1")
    rows = generate(args.count, args.seed, args.tool_prompt)
    if args.decisions:
        rows = [decision_row(r) for r in rows]
    write_jsonl(rows, args.out)
    print(f"wrote {len(rows)} chat rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
