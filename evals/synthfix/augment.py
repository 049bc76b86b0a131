"""Identifier renaming for oracle trajectories: the same solved task under fresh names.

SynthFix draws its functions from a pool of about a hundred, so a small model trained on the raw
trajectories learns to *recall* a familiar name ("the issue looks like the pretty_bytes one") instead
of *copying* the name the issue actually gives, and fails on held-out repos whose names it never
saw. Renaming the function, its package, sub-package and module consistently in every message,
call and thought (made-up words, seeded) keeps each trajectory true to itself while leaving copying
as the only way to predict the names.
"""

from __future__ import annotations

import builtins
import functools
import importlib
import json
import keyword
import random
import re
import sys
from typing import Any

_ONSETS = [
    "b",
    "d",
    "f",
    "g",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "cr",
    "dr",
    "gl",
    "pl",
    "st",
    "tr",
    "sh",
    "ch",
    "th",
]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou", "ea"]
_CODAS = ["", "", "", "n", "r", "s", "l", "x", "m", "t"]
_RESERVED = (
    set(keyword.kwlist) | set(dir(builtins)) | set(sys.stdlib_module_names) | {"self", "cls", "tests", "test"}
)


_WORD_SOURCES = (
    "os",
    "string",
    "collections",
    "itertools",
    "functools",
    "math",
    "re",
    "json",
    "pathlib",
    "textwrap",
    "statistics",
    "datetime",
    "random",
    "shutil",
    "typing",
    "difflib",
    "calendar",
    "decimal",
    "fractions",
    "logging",
    "argparse",
    "inspect",
    "tokenize",
    "unittest",
)


def made_up_word(rng: random.Random) -> str:
    """A pronounceable word of 2-3 syllables, e.g. 'trelom'."""
    return "".join(
        rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(rng.randint(2, 3))
    )


@functools.cache
def real_words() -> tuple[str, ...]:
    """Words programmers use: the parts of the public names of some stdlib modules."""
    words: set[str] = set()
    for name in _WORD_SOURCES:
        for attr in dir(importlib.import_module(name)):
            words.update(p for p in attr.lower().split("_") if p.isalpha() and 3 <= len(p) <= 10)
    return tuple(sorted(words))


def fresh_word(rng: random.Random) -> str:
    """Half the time a real word (tokenises like held-out names do), else a made-up one."""
    return rng.choice(real_words()) if rng.random() < 0.5 else made_up_word(rng)


def _like(name: str, rng: random.Random, taken: set[str]) -> str:
    """A fresh snake_case name with as many parts as `name` (keeps `_private` prefixes)."""
    lead = name[: len(name) - len(name.lstrip("_"))]
    parts = [p for p in name.strip("_").split("_") if p] or ["x"]
    while True:
        new = lead + "_".join(fresh_word(rng) for _ in parts)
        if new not in taken and new not in _RESERVED:
            taken.add(new)
            return new


def _first_call(traj: dict[str, Any], tool: str) -> dict[str, Any] | None:
    for msg in traj["messages"]:
        for call in msg.get("tool_calls") or []:
            if call["function"]["name"] == tool:
                return json.loads(call["function"]["arguments"])
    return None


# one definition as the outline tool lists it: `pkg/mod.py:4-5: def f(a, b)`
OUTLINE_HIT = re.compile(r"^(?P<path>[^:\n]+):(?P<start>\d+)-(?P<end>\d+): (?P<sig>.+)$", re.M)


def _outline_hit(traj: dict[str, Any]) -> str | None:
    """The path of the first definition the first tool output lists: a trajectory that only looks a
    name up (chat_tasks' find rows) has no view call to take it from."""
    output = next((m.get("content") for m in traj["messages"] if m.get("role") == "tool"), None)
    hit = OUTLINE_HIT.search(output) if isinstance(output, str) else None
    return hit["path"] if hit else None


def renames(traj: dict[str, Any], rng: random.Random) -> dict[str, str]:
    """old -> new for the trajectory's function (the outline symbol) and the parts of the edited
    module's path (the viewed one, else the outline's hit); names Python or the tools rely on
    (keywords, builtins, stdlib modules) stay."""
    names: list[str] = []
    outline = _first_call(traj, "outline")
    if outline and isinstance(outline.get("symbol"), str):
        names.append(outline["symbol"].split(".")[-1])
    view = _first_call(traj, "view")
    path = view.get("path") if view else _outline_hit(traj) if outline else None
    if isinstance(path, str) and path.endswith(".py"):
        names += [p for p in path[:-3].split("/") if p.isidentifier()]
    taken: set[str] = set()
    out: dict[str, str] = {}
    for name in names:
        if name not in out and name not in _RESERVED and len(name) > 2:
            out[name] = _like(name, rng, taken)
    return out


def _replacer(mapping: dict[str, str]):
    if not mapping:
        return lambda text: text
    # whole identifiers, where underscores may join them (test_pretty_bytes -> test_<new>)
    pattern = re.compile(
        r"(?<![A-Za-z0-9])("
        + "|".join(map(re.escape, sorted(mapping, key=len, reverse=True)))
        + r")(?![A-Za-z0-9])"
    )
    return lambda text: pattern.sub(lambda m: mapping[m.group(1)], text)


def rename_trajectory(traj: dict[str, Any], seed: int | str) -> dict[str, Any]:
    """A copy of `traj` with its identifiers renamed (deterministic in `seed`)."""
    rng = random.Random(f"rename:{seed}:{traj.get('instance_id', '')}")
    sub = _replacer(renames(traj, rng))
    messages = []
    for msg in traj["messages"]:
        msg = dict(msg)
        if isinstance(msg.get("content"), str):
            msg["content"] = sub(msg["content"])
        if msg.get("tool_calls"):
            msg["tool_calls"] = [
                {**c, "function": {**c["function"], "arguments": sub(c["function"]["arguments"])}}
                for c in msg["tool_calls"]
            ]
        messages.append(msg)
    return {
        **traj,
        "messages": messages,
        "thinking": [sub(t) for t in traj["thinking"]],
        "root": sub(traj.get("root", "")),
    }
