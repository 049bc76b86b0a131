"""Chat rows for small repository questions, answered with a real tool call.

    python -m clover.evals.synthfix.chat_tasks --instances RUN/synth/instances.jsonl --out RUN/chat_tasks.jsonl

`clover chat` users ask "where is X defined?", "run the tests", "what is this project?" as often as they
report bugs. For each TRAINING-split SynthFix repository (read only, at its base commit) this picks one such
question, runs the tools a careful agent would (outline, bash pytest, glob) through the real tools, and writes
the answer from their real output: the definition's path and lines, the pytest summary line, the files found,
or an overview (`overview`): a view of the repository's top, then the README's first lines or, without one
(`--no-readme` asks copies without README.md), the first source module's. The overview lists before it reads:
the decoder grounds paths in the workspace, so a model taught to view README.md first could not, in a
repository without one, and viewed whatever file the grammar let it (conftest.py) instead. `--big` asks it of
copies padded to a real project's size (repo_copies.py). The system prompt is the `clover chat` one
(clover_cli/prompts.py BASE), at a path drawn like the other chat rows' (chat_rows.draw_root), not the
generator's on-disk one. Rows are rendered {"text", "spans"} records like chat_rows.py's; only the assistant's
turns are targets."""

from __future__ import annotations

import argparse
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from clover.core.tool_protocol import tool_spec
from clover.evals.synthfix.augment import OUTLINE_HIT, rename_trajectory
from clover.evals.synthfix.chat_overview import about_reply, overview
from clover.evals.synthfix.chat_rows import decision_row, draw_root
from clover.evals.synthfix.chat_wording import FILES, FIND, OFFER, TESTS, THINK
from clover.evals.synthfix.generator import read_jsonl, write_jsonl
from clover.evals.synthfix.oracle import render_trajectory, tool_turn
from clover.evals.synthfix.repo_copies import flat_copy, pad_copy
from clover.prompts import BASE
from clover.tools.environment import LocalEnvironment
from clover.tools.registry import default_tools, tools_by_name
from clover.tools.safety.commandenv import interpreter_environment

_SUMMARY = re.compile(r"^=*\s*(\d+ (passed|failed).*?)\s*=*$", re.M)


def _defined_names(repo: Path) -> list[str]:
    names = []
    for path in sorted(repo.rglob("*.py")):
        if "tests" in path.relative_to(repo).parts:
            continue
        names += re.findall(r"^def ([a-z_][a-z0-9_]*)\(", path.read_text(encoding="utf-8"), re.M)
    return names


def plan(kind: str, repo: Path, rng: random.Random) -> tuple[str, str, dict[str, Any], dict[str, str]] | None:
    """(prompt, tool, arguments, format fields) for a one-call question about `repo` (find, tests,
    files; an overview takes two: `overview`); None if it has no answer."""
    if kind == "find":
        names = _defined_names(repo)
        if not names:
            return None
        name = rng.choice(names)
        return rng.choice(FIND).format(name=name), "outline", {"symbol": name}, {"name": name}
    if kind == "tests":
        return rng.choice(TESTS), "bash", {"command": "python -m pytest -q --tb=short"}, {}
    return rng.choice(FILES), "glob", {"pattern": "**/*.py"}, {}


def answer(kind: str, output: str, fields: dict[str, str]) -> str | None:
    """The reply, read off the tool's real output; None when the output is not what it should be.
    Paths are quoted in backticks: after "` the path's tokens are those of the tool output, which
    starts its lines with the path ("calc.py" -> `cal` `c` `.py`); after a space they differ (` cal`),
    and a small model wrote the commoner " src" there ("srcc.py")."""
    if kind == "find":
        hit = OUTLINE_HIT.search(output)
        if hit is None:
            return None
        return f"`{fields['name']}` is defined in `{hit['path']}`, lines {hit['start']}-{hit['end']}: `{hit['sig']}`."
    if kind == "tests":
        found = _SUMMARY.findall(output)
        if not found:
            return None
        summary = found[-1][0]
        verdict = (
            "All tests pass" if "failed" not in summary and "error" not in summary else "Some tests fail"
        )
        return f"{verdict}: {summary}."
    if kind == "about":
        return about_reply(output)
    files = [ln for ln in output.splitlines() if ln.endswith(".py") and not ln.endswith("__init__.py")]
    if not files:
        return None
    src = [f for f in files if not f.startswith("tests/")]
    tests = [f for f in files if f.startswith("tests/")]
    text = "Source files: " + ", ".join(f"`{f}`" for f in src) + "."
    return text + (" Tests: " + ", ".join(f"`{f}`" for f in tests) + "." if tests else "")


def trajectory(
    repo: Path, kind: str, rng: random.Random, tools: list[dict[str, Any]], root: str
) -> dict[str, Any] | None:
    """One question about `repo` answered with one real tool call (an overview: two, see `overview`);
    the system prompt shows `root` (chat_rows.draw_root: the path must say nothing about the kind of
    request)."""
    if kind == "about":
        return overview(repo, rng, tools, root)
    planned = plan(kind, repo, rng)
    if planned is None:
        return None
    prompt, tool, arguments, fields = planned
    env = LocalEnvironment(str(repo), timeout=60, output_limit=4000, env=interpreter_environment())
    result = tools_by_name()[tool].run(arguments, env)
    reply = None if result.is_error else answer(kind, result.output, fields)
    if reply is None:
        return None
    offer = rng.choice(OFFER)
    return {
        "instance_id": f"chat-task-{kind}",
        "messages": [
            {"role": "system", "content": BASE.format(root=root)},
            {"role": "user", "content": prompt},
            *tool_turn(1, tool, arguments, result.output),
            {"role": "assistant", "content": f"{reply} {offer}".strip()},
        ],
        "thinking": [THINK[kind].format(**fields), "I have the answer."],
        "tools": tools,
    }


KINDS = ["find", "tests", "about", "files"]


def generate(
    rows: list[dict],
    count: int,
    seed: int,
    tool_prompt: str = "compact",
    all_kinds: bool = False,
    history_cut: bool = False,
    kinds: list[str] | None = None,
    no_readme: bool = False,
    renamed_copies: int = 0,
    flat: bool = False,
    big: bool = False,
    cut_at: int | None = None,
) -> list[dict[str, str]]:
    """Up to `count` rendered records: one per repository with the kinds taken in turn or, with
    `all_kinds`, every kind on each repository (contrast: the same repository and system prompt,
    different requests, different replies; a small model taught one question per repository learns
    to answer the commonest one, whatever was asked). With `history_cut`, only the answer turn is a
    target and the tool call before it shows no thinking, as the agent's history does: the reply
    must then be chosen from the user's request, the thinking that named the kind being gone. `kinds`:
    only these kinds (default all of KINDS). `no_readme`: overview questions only, each asked of a copy
    of the repository without its README (`overview` then reads its first module). `renamed_copies`: each "where is
    X defined" row also this many times with X renamed everywhere (augment.rename_trajectory): about a
    hundred train-split names are too few to learn to copy the one asked about, not recall one.
    `flat`: each question asked of a flat_copy of the repository (no test runs there). `big`: overview
    questions only, each asked of a pad_copy of the repository (a real project's size). `cut_at`: only
    turns from this (0-based) one on are targets, those before it history without thinking, as the
    agent shows them (an overview's second step is chosen after a listing whose thinking is gone);
    rows with fewer turns are skipped."""
    kinds = kinds or KINDS
    if unknown := set(kinds) - set(KINDS):
        raise ValueError(f"unknown kind(s) {sorted(unknown)}; choose from {KINDS}")
    if flat:
        kinds = [k for k in kinds if k != "tests"]
        if not kinds:
            raise ValueError("flat copies take find, about and files questions (their tests cannot run)")
    if big and (flat or no_readme):
        raise ValueError("big copies are asked overviews only, of the whole repository")
    rng = random.Random(seed)
    tools = [tool_spec(t) for t in default_tools()]
    out: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        if len(out) >= count:
            break
        if row.get("split") != "train":
            raise ValueError(f"{row.get('instance_id')}: chat task rows come from the train split only")
        repo = Path(row["repo"])
        root = draw_root(rng)  # one per repository: its questions share a prompt
        asked = kinds if all_kinds else [kinds[i % len(kinds)]]
        trajs = _ask(repo, asked, rng, tools, root, no_readme=no_readme, flat=flat, big=big)
        trajs += [
            rename_trajectory(t, (seed, i, k))
            for t in trajs
            if t is not None and t["instance_id"] == "chat-task-find"
            for k in range(renamed_copies)
        ]
        for traj in trajs:
            if traj is not None and len(out) < count:
                record = _render(traj, tool_prompt, history_cut, cut_at)
                if record is not None:
                    out.append(record)
    return out


def _ask(
    repo: Path,
    asked: list[str],
    rng: random.Random,
    tools: list[dict[str, Any]],
    root: str,
    *,
    no_readme: bool,
    flat: bool,
    big: bool,
) -> list[dict[str, Any] | None]:
    """The trajectories of the `asked` kinds on `repo`, or (no_readme, flat, big: see generate) of an
    overview on a temporary copy of it."""
    if no_readme and flat:  # one module and its tests, no README: the chat benchmark's repository
        with tempfile.TemporaryDirectory(prefix="clover-flat-") as tmp:
            copy = Path(tmp) / repo.name
            ok = flat_copy(repo, copy, conftest=rng.random() < 0.5)
            (copy / "README.md").unlink(missing_ok=True)
            return [overview(copy, rng, tools, root)] if ok else []
    if no_readme:
        with tempfile.TemporaryDirectory(prefix="clover-noreadme-") as tmp:
            copy = Path(tmp) / repo.name
            shutil.copytree(repo, copy, ignore=shutil.ignore_patterns("README.md", ".git", ".pytest_cache"))
            return [overview(copy, rng, tools, root)]
    if big:
        with tempfile.TemporaryDirectory(prefix="clover-big-") as tmp:
            pad_copy(repo, Path(tmp) / repo.name, rng)
            return [overview(Path(tmp) / repo.name, rng, tools, root)]
    if flat:
        with tempfile.TemporaryDirectory(prefix="clover-flat-") as tmp:
            copy = Path(tmp) / repo.name
            if not flat_copy(repo, copy, conftest=rng.random() < 0.5):
                return []
            return [trajectory(copy, kind, rng, tools, root) for kind in asked]
    return [trajectory(repo, kind, rng, tools, root) for kind in asked]


def _render(
    traj: dict[str, Any], tool_prompt: str, history_cut: bool, cut_at: int | None
) -> dict[str, str] | None:
    """The rendered {"text", "spans"} record of `traj` (generate says which turns are targets); None
    when it has fewer turns than `cut_at` asks."""
    last = len(traj["thinking"]) - 1
    if cut_at is not None and cut_at > last:
        return None
    cut = last if history_cut else cut_at or 0
    text, spans = render_trajectory(traj, cut, tool_prompt)
    return {"text": text, "spans": spans}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m clover.evals.synthfix.chat_tasks", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--instances", type=Path, required=True, help="train-split instances.jsonl")
    parser.add_argument("--out", type=Path, required=True, help="JSONL of rendered rows to write")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tool-prompt", choices=["full", "compact"], default="compact")
    parser.add_argument("--all-kinds", action="store_true", help="every kind of question on each repository")
    parser.add_argument(
        "--kinds", nargs="+", choices=KINDS, help="only these kinds of question (default: all)"
    )
    parser.add_argument(
        "--no-readme",
        action="store_true",
        help="overview questions asked of copies without README.md (answered from a module)",
    )
    parser.add_argument(
        "--flat",
        action="store_true",
        help="questions asked of copies with every module at the top level (no test runs)",
    )
    parser.add_argument(
        "--big",
        action="store_true",
        help="overview questions asked of copies padded to a real project's size",
    )
    parser.add_argument(
        "--decisions", action="store_true", help="rows cut to the thinking (chat_rows.decision_row)"
    )
    parser.add_argument(
        "--history-cut",
        action="store_true",
        help="the answer turn the only target, after a history without thinking",
    )
    parser.add_argument("--cut-at", type=int, help="only turns from this (0-based) one on are targets")
    parser.add_argument(
        "--renamed-copies",
        type=int,
        default=0,
        help="each find row also this many times with the symbol renamed (augment.py)",
    )
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("--count must be >= 1")
    if args.cut_at is not None and (args.cut_at < 1 or args.history_cut):
        parser.error("--cut-at takes a turn >= 1, without --history-cut")
    if args.renamed_copies < 0:
        parser.error("--renamed-copies must be >= 0")
    try:
        rows = read_jsonl(args.instances)
        records = generate(
            rows,
            args.count,
            args.seed,
            args.tool_prompt,
            args.all_kinds,
            args.history_cut,
            args.kinds,
            args.no_readme,
            args.renamed_copies,
            args.flat,
            args.big,
            args.cut_at,
        )
        if args.decisions:
            records = [decision_row(r) for r in records]
        write_jsonl(records, args.out)
    except (OSError, ValueError, KeyError) as exc:
        print(f"clover: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(records)} chat task rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
