"""Ten everyday `clover chat` prompts on a model, replies recorded (the model card's chat check).

    python -m benchmarks.chat_prompts --model embedded [--out runs/chat_prompts] [--max-tokens 256] \\
        [--set main|more|all]

`--set more`: ten further prompts of the same kinds, worded otherwise (MORE_PROMPTS), to show a
model fitted to the first ten.

Each prompt is one headless request (`clover -p PROMPT --output-format json`) in a fresh git repository
holding one small Python file, so questions about "this repo" have something to look at. The repository is
made at one fixed path (`--workdir`/calc, made afresh): its path is in the system prompt, and a small model's
reply can change with it, so a random temporary name made two runs of one model differ. Ask mode, with the
user's approval of the test command given up front (an allow rule for `python -m pytest*` in a throwaway user
config): read-only tools and the tests run, every other command and every edit is refused, as headless
requests refuse what needs approval. (Not plan mode: there "Run the tests." could never be answered,
pytest being refused.) Writes OUT/replies.json (status, reply, steps, tokens, seconds per
prompt) and OUT/replies.md. It flags the mechanical failures (a truncated or runaway reply, an error, no
reply) and gives each reply a verdict (verdict(): the reply of the prompt's kind, an honest "I can't" of
another kind, or other); whether an "other" is still coherent is left to the reader."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROMPTS = [
    "hi",
    "What can you do?",
    "What does this repository do?",
    "Explain what a Python decorator is.",
    "Write a function that reverses a string.",
    "What is the capital of France?",
    "Add a web dashboard with user accounts to this project.",
    "Which file defines the function add?",
    "Run the tests.",
    "Thanks, that's all.",
]

# A second set, never taught either (tests/test_chat_rows.py checks both): everyday prompts of the
# same kinds worded otherwise, so a model fitted to the ten above shows here.
MORE_PROMPTS = [
    "good day!",
    "Who built you?",
    "How should I ask you for help?",
    "What's the tallest building in the world?",
    "Explain the difference between a list and a tuple in Python.",
    "Port this code to Go.",
    "Where is mean defined?",
    "Do all the tests pass?",
    "What files are in this repo?",
    "Thank you so much!",
]

# The kind of reply a careful assistant picks for each prompt (benchmarks/chat_routing.py reads the
# model's choice; verdict() below checks the reply).
LABELS = {
    "hi": "greet",
    "What can you do?": "can",
    "What does this repository do?": "about",
    "Explain what a Python decorator is.": "general",
    "Write a function that reverses a string.": "general",
    "What is the capital of France?": "general",
    "Add a web dashboard with user accounts to this project.": "feature",
    "Which file defines the function add?": "find",
    "Run the tests.": "tests",
    "Thanks, that's all.": "thanks",
    "good day!": "greet",
    "Who built you?": "who",
    "How should I ask you for help?": "can",
    "What's the tallest building in the world?": "general",
    "Explain the difference between a list and a tuple in Python.": "general",
    "Port this code to Go.": "feature",
    "Where is mean defined?": "find",
    "Do all the tests pass?": "tests",
    "What files are in this repo?": "files",
    "Thank you so much!": "thanks",
}


SAMPLE = '''"""Small arithmetic helpers."""


def add(a, b):
    return a + b


def mean(values):
    return sum(values) / len(values)
'''


def verdict(prompt: str, reply: str) -> str:
    """ "fit": the reply a careful assistant gives for the prompt's kind (the taught opening for the
    social kinds and for what it cannot do; for the repository questions, what the tool shows about
    make_repo's repository); "cannot": another kind's taught reply that says what it can and cannot
    do (general question, feature request, who it is, what it can do); "other" otherwise."""
    from clover.evals.synthfix.chat_rows import OPENINGS

    kind, text = LABELS[prompt], reply.strip()
    name = "mean" if "mean" in prompt.split() else "add"
    fits = {
        "find": f"`{name}`" in text and "calc.py" in text,
        "tests": re.search(r"\b1 passed\b", text) is not None,
        "about": "arithmetic" in text.lower(),
        "files": "calc.py" in text,
    }
    if fits.get(kind, kind in OPENINGS and text.startswith(OPENINGS[kind])):
        return "fit"
    limits = tuple(OPENINGS[k] for k in ("general", "feature", "who", "can"))
    return "cannot" if text.startswith(limits) else "other"


def make_repo(root: Path) -> Path:
    repo = root / "calc"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(SAMPLE, encoding="utf-8")
    (repo / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n", encoding="utf-8"
    )
    (repo / "conftest.py").write_text("", encoding="utf-8")
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@x",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@x",
    }
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    return repo


def user_config(root: Path) -> Path:
    """An XDG config home whose clover config approves the test command and nothing else."""
    (root / "clover").mkdir(parents=True)
    (root / "clover" / "config.toml").write_text('allow = ["bash(python -m pytest*)"]\n', encoding="utf-8")
    return root


def ask(
    model: str, prompt: str, repo: Path, max_tokens: int, max_steps: int, timeout: float, config: Path
) -> dict:
    env = {
        **os.environ,
        "CLOVER_MAX_TOKENS": str(max_tokens),
        "CLOVER_MAX_STEPS": str(max_steps),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "XDG_CONFIG_HOME": str(config),
    }
    cmd = [
        sys.executable,
        "-m",
        "clover",
        "-p",
        prompt,
        "--model",
        model,
        "--repo",
        str(repo),
        "--output-format",
        "json",
        "--mode",
        "ask",
    ]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"prompt": prompt, "status": "timeout", "result": "", "seconds": timeout}
    try:
        rec = json.loads(proc.stdout)
    except json.JSONDecodeError:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        return {"prompt": prompt, "status": "no-json", "result": "", "error": tail[0][:300]}
    return {
        "prompt": prompt,
        **{
            k: rec.get(k)
            for k in ("status", "result", "truncated", "error", "steps", "completion_tokens", "seconds")
        },
    }


def write_markdown(rows: list[dict], model: str, path: Path) -> None:
    lines = [f"# Chat prompts on `{model}`", ""]
    for i, r in enumerate(rows, 1):
        reply = (r.get("result") or "").strip().replace("\n", "\n> ")
        lines += [
            f"{i}. **{r['prompt']}** ({r.get('status')}, {r.get('verdict')}, {r.get('steps')} steps, "
            f"{r.get('completion_tokens')} tokens, {r.get('seconds')} s)",
            "",
            f"> {reply or '(no reply)'}",
            "",
        ]
    path.write_text("\n".join(lines), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.chat_prompts", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--model", default="embedded")
    p.add_argument("--out", type=Path, default=Path("runs/chat_prompts"))
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--max-steps", type=int, default=4)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per prompt")
    p.add_argument(
        "--set",
        choices=["main", "more", "all"],
        default="main",
        help="the model card's ten prompts, the ten more, or both",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "clover-chat-prompts",
        help="where the repository (WORKDIR/calc, made afresh) and a user config go; the path is in the prompt",
    )
    args = p.parse_args(argv)
    prompts = {"main": PROMPTS, "more": MORE_PROMPTS, "all": PROMPTS + MORE_PROMPTS}[args.set]
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    made = [args.workdir / "calc", args.workdir / "config"]  # only what this run makes is removed
    for path in made:
        shutil.rmtree(path, ignore_errors=True)
    args.workdir.mkdir(parents=True, exist_ok=True)
    try:
        repo, config = make_repo(args.workdir), user_config(args.workdir / "config")
        for prompt in prompts:
            rows.append(ask(args.model, prompt, repo, args.max_tokens, args.max_steps, args.timeout, config))
            r = rows[-1]
            r["verdict"] = verdict(prompt, r.get("result") or "")
            print(
                f"[{len(rows)}/{len(prompts)}] {prompt!r}: {r.get('status')} {r['verdict']} "
                f"{str(r.get('result'))[:100]!r}",
                flush=True,
            )
    finally:
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
    (args.out / "replies.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    write_markdown(rows, args.model, args.out / "replies.md")
    bad = sum(1 for r in rows if r.get("status") != "submitted")
    print(
        f"{len(rows) - bad}/{len(rows)} replied without truncation, runaway or error -> {args.out / 'replies.md'}"
    )
    count = {v: sum(r["verdict"] == v for r in rows) for v in ("fit", "cannot", "other")}
    print(
        f"fit {count['fit']}/{len(rows)}, an honest I-can't of another kind {count['cannot']}, other {count['other']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
