"""The frozen chat prompts (evals/frozen/chat.toml) on a model, in one repository; replies recorded.

    python -m benchmarks.chat_frozen [--model embedded] [--repo DIR --name FUNCTION] [--out DIR]

Without --repo the prompts are asked in the frozen set's own small repository (made afresh in a new
temporary directory: a real path, as a user's); with --repo, in that work tree as it is (this
repository's checkout, a public project's), `{name}` being a function it defines. Each prompt is
one headless request (`clover -p PROMPT --output-format json --mode ask`, the test command allowed,
as benchmarks/chat_prompts.py asks). Also printed: each prompt's nearest chat training prompt and
their similarity (difflib ratio, 1.0 = the same words), the check that the set is not a paraphrase
of what the model was taught.

Each reply is flagged: `honest` (the reply that the request needs a larger model), `mechanical`
(an error, a timeout, a runaway or truncated reply, or a loop: a word sequence repeated) or
`answer`; whether an answer is coherent is for the reader (OUT/replies.md), as the model card says.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.chat_prompts import ask, user_config

HONEST_MARK = "needs a larger model"  # steering/competence.py's reply says it


def training_prompts(name: str) -> list[str]:
    """The user prompts of the chat training rows (evals/synthfix chat_rows, chat_wording)."""
    from clover.evals.synthfix import chat_rows, chat_wording

    taught = [p for _, p in chat_rows.PROMPTS]
    for wordings in (chat_wording.FIND, chat_wording.TESTS, chat_wording.ABOUT, chat_wording.FILES):
        taught += [w.format(name=name) for w in wordings]
    return taught


def nearest(prompt: str, taught: list[str]) -> tuple[float, str]:
    """(similarity, the training prompt most like `prompt`)."""

    def ratio(t: str) -> float:
        return difflib.SequenceMatcher(None, prompt.lower(), t.lower()).ratio()

    best = max(taught, key=ratio)
    return round(ratio(best), 3), best


def looped(text: str, span: int = 3, times: int = 3) -> bool:
    """Does a sequence of `span` words come back `times` times (a reply stuck in a loop)?"""
    words = re.findall(r"\S+", text.lower())
    grams = [" ".join(words[i : i + span]) for i in range(len(words) - span + 1)]
    return any(grams.count(g) >= times for g in set(grams))


def flag(row: dict) -> str:
    text = (row.get("result") or "").strip()
    if HONEST_MARK in text:
        return "honest"
    if row.get("status") != "submitted" or row.get("truncated") or not text or looped(text):
        return "mechanical"
    return "answer"


def make_frozen_repo(parent: Path) -> tuple[Path, str]:
    from clover.evals.frozen import chat_set
    from clover.evals.handwritten import _git, _write

    spec = chat_set()["repo"]
    repo = parent / spec["name"]
    repo.mkdir(parents=True)
    _write(repo, spec["files"])
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        _git(repo, *args)
    return repo, spec["function"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.chat_frozen", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="embedded")
    p.add_argument(
        "--repo", type=Path, help="ask in this work tree (default: the frozen set's own repository)"
    )
    p.add_argument(
        "--name", help="with --repo: a function the repository defines (the prompt that looks one up)"
    )
    p.add_argument("--out", type=Path, default=Path("runs/chat_frozen"))
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--max-steps", type=int, default=4)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per prompt")
    args = p.parse_args(argv)
    if args.repo is not None and (not args.repo.is_dir() or not args.name):
        p.error("--repo needs an existing directory and --name FUNCTION")
    from clover.evals.frozen import chat_set, set_hash

    work = Path(tempfile.mkdtemp(prefix="clover-chat-frozen-"))
    try:
        repo, name = (args.repo.resolve(), args.name) if args.repo else make_frozen_repo(work)
        config = user_config(work / "config")
        taught = training_prompts(name)
        rows = []
        for template in chat_set()["prompts"]:
            prompt = template.format(name=name)
            row = ask(args.model, prompt, repo, args.max_tokens, args.max_steps, args.timeout, config)
            row["nearest_similarity"], row["nearest_training_prompt"] = nearest(prompt, taught)
            row["flag"] = flag(row)
            rows.append(row)
            print(
                f"[{len(rows)}/10] {prompt!r} (nearest taught {row['nearest_similarity']:.2f}): {row['flag']} "
                f"{str(row.get('result'))[:120]!r}",
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {
        "model": args.model,
        "repo": str(repo),
        "frozen_set_sha256": set_hash(),
        "rows": rows,
        "flags": {f: sum(r["flag"] == f for r in rows) for f in ("answer", "honest", "mechanical")},
        "max_similarity": max(r["nearest_similarity"] for r in rows),
    }
    (args.out / "replies.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    lines = [f"# Frozen chat prompts on `{args.model}` in `{repo}`", ""]
    for i, r in enumerate(rows, 1):
        reply = (r.get("result") or "").strip().replace("\n", "\n> ")
        lines += [
            f"{i}. **{r['prompt']}** ({r['flag']}, {r.get('status')}, {r.get('steps')} steps, "
            f"{r.get('seconds')} s; nearest taught {r['nearest_similarity']}: {r['nearest_training_prompt']!r})",
            "",
            f"> {reply or '(no reply)'}",
            "",
        ]
    (args.out / "replies.md").write_text("\n".join(lines), encoding="utf-8")
    print(
        f"answer {summary['flags']['answer']}, honest {summary['flags']['honest']}, mechanical "
        f"{summary['flags']['mechanical']}; max similarity to a training prompt {summary['max_similarity']:.2f} "
        f"-> {args.out / 'replies.md'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
