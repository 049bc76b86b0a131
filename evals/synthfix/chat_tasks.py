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

from clover.core.protocols import tool_spec
from clover.evals.synthfix.augment import OUTLINE_HIT, rename_trajectory
from clover.evals.synthfix.chat_rows import decision_row, draw_root
from clover.evals.synthfix.generator import read_jsonl, write_jsonl
from clover.evals.synthfix.oracle import render_trajectory, tool_turn
from clover.evals.synthfix.repo_copies import NOT_SOURCE, flat_copy, pad_copy
from clover.prompts import BASE
from clover.tools.commandenv import interpreter_environment
from clover.tools.environment import LocalEnvironment
from clover.tools.registry import default_tools, tools_by_name

FIND = [
    "Where is `{name}` defined?",
    "where's {name}?",
    "Find the definition of {name}.",
    "Which module has the {name} function?",
    "In which file is {name}?",
    "show me where {name} lives",
    "Where can I find {name}?",
    "what file is `{name}` in?",
    "Locate the {name} function.",
    "where does {name} come from?",
    "Show me the code of {name}.",
    "Where is the function {name}?",
    "which file has {name}",
    "What file is {name} defined in?",
    "find {name}",
    "Where's `{name}`?",
    "Show me {name}.",
    "In which module is the function {name} defined?",
    "look up {name} for me",
    "Which file contains the definition of {name}?",
    "where is {name} implemented?",
]
TESTS = [
    "run the test suite",
    "Do the tests pass?",
    "please run pytest",
    "Check that the tests pass.",
    "can you run the tests for me?",
    "are the tests green?",
    "Test it.",
    "run pytest please",
    "Could you check the test suite?",
    "Are there failing tests?",
    "tests?",
    "Run all the tests.",
    "run the tests please",
    "Please run the test suite.",
    "pytest",
    "Does everything pass?",
    "Run the unit tests.",
    "Can you test this project?",
    "check the tests",
    "Run tests.",
    "Are the tests passing?",
]
ABOUT = [
    "What is this project?",
    "Give me an overview of this repo.",
    "what's in this repository?",
    "What is this code for?",
    "Describe this project briefly.",
    "What does this project do?",
    "what is this repo about?",
    "Give me a tour of this codebase.",
    "Tell me about this project.",
    "What's this package for?",
    "summarize the repository",
]
FILES = [
    "List the Python files.",
    "which files are in this project?",
    "Show me the source files.",
    "What modules are there?",
    "list the files",
    "What files does this repo have?",
    "Show the project structure.",
    "Which Python files are there?",
    "ls",
]

# Templated wordings on top of the lists above: a small model taught a few dozen fixed strings per kind
# answered "Run the tests." with "You're welcome." (benchmarks/chat_routing.py); many wordings make the
# kind a property of the request's words, not of a memorised string. The templates avoid the measured
# prompts' exact wordings (tests/test_chat_rows.py checks).
_TEMPLATES: dict[str, tuple[list[str], list[str]]] = {
    "tests": (
        [
            "please run {}",
            "Can you run {}?",
            "Could you run {}?",
            "Go ahead and run {}.",
            "Execute {}.",
            "run {} now",
            "Kick off {}.",
            "I'd like you to run {}.",
            "Let's run {}.",
            "Run {} and tell me the result.",
        ],
        [
            "the tests",
            "the test suite",
            "pytest",
            "all the tests",
            "the unit tests",
            "every test",
            "the project's tests",
            "the tests in this repo",
        ],
    ),
    "tests2": (
        [
            "Does {} pass?",
            "Is {} passing?",
            "Is {} green?",
            "Does {} still pass?",
            "Is {} failing?",
            "Did I break {}?",
            "Is {} OK?",
            "what's the state of {}?",
        ],
        ["the test suite", "the build", "everything", "pytest", "the testsuite", "the suite"],
    ),
    "tests3": (
        [
            "Are {} passing?",
            "Do {} pass now?",
            "Are {} green?",
            "Are {} OK?",
            "are {} failing?",
            "Do {} still pass?",
            "How are {} doing?",
            "Did {} break?",
        ],
        ["the tests", "all tests", "my tests", "the unit tests", "the tests here", "these tests"],
    ),
    "find": (
        [
            "Where is {} defined?",
            "Where does {} live?",
            "find where {} is defined",
            "Show me the definition of {}.",
            "Which module defines {}?",
            "Where is {} implemented?",
            "What file has the definition of {}?",
            "Can you find {}?",
            "where do I find {}?",
        ],
        ["`{name}`", "the function {name}", "the {name} function", "{name}()"],
    ),
    "files": (
        ["{}", "{}?", "Can you {}?", "please {}"],
        [
            "list the python files",
            "show me the files",
            "what files are there",
            "list the source files",
            "show the python modules",
            "which modules does this project have",
            "list the modules",
        ],
    ),
}


def _with_templates(kind: str, listed: list[str]) -> list[str]:
    """`listed` followed by every templated wording of `kind` (its _TEMPLATES entries) not listed."""
    filled = [
        f.format(x)
        for k, (forms, fills) in _TEMPLATES.items()
        if k.rstrip("23") == kind
        for f in forms
        for x in fills
    ]
    return list(dict.fromkeys(listed + filled))


TESTS, FIND, FILES = (
    _with_templates("tests", TESTS),
    _with_templates("find", FIND),
    _with_templates("files", FILES),
)

THINK = {  # first tokens distinct from every other kind's (chat_rows.py THOUGHTS says why)
    "find": "Find the definition of `{name}`: outline finds it.",
    "tests": "Test run: run the tests with pytest and report the result.",
    "about": "Overview: view the top of the repository to find the README or the main module.",
    "files": "List the Python files with glob.",
}
OFFER = [
    "I can view a file, find a definition or run the tests.",
    "If something is broken, describe the bug and I'll try to fix it.",
    "",
]

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
        return _about(output)
    files = [ln for ln in output.splitlines() if ln.endswith(".py") and not ln.endswith("__init__.py")]
    if not files:
        return None
    src = [f for f in files if not f.startswith("tests/")]
    tests = [f for f in files if f.startswith("tests/")]
    text = "Source files: " + ", ".join(f"`{f}`" for f in src) + "."
    return text + (" Tests: " + ", ".join(f"`{f}`" for f in tests) + "." if tests else "")


def _about(readme: str) -> str | None:
    """'This is Title: "First line of prose."' from a README as `view` numbers it. Prose skips code
    fences (a real README often opens with install commands), badges, lists and the view's own note.

    Both copies are written as the tokens they are in the file (answer() says why for paths): the
    title follows a space, as after "# " (` Clover`), and the prose follows a quote, as at a line's
    start (`A` ` tiny`, where after a bare space it would be ` A`)."""
    title, fenced = "", False
    for line in (re.sub(r"^\s*\d+\t", "", ln) for ln in readme.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        elif fenced or not line.strip():
            continue
        elif line.startswith("# ") and not title:
            title = line[2:].strip()
        elif title and not line.startswith(("#", "-", "*", "`", "[", "!", "<", "|", ">")):
            return f'This is {title}: "{line.strip()}"'
    return None


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


# "What is this project?": view the repository's top (a listing unlike the files question's glob, so
# the step after it cannot be mistaken for that question's answer; big directories folded, so a real
# project's fits), then the README's first lines or, without one, the first source module's; a
# module deeper than the view's two levels needs a glob to find it.
LISTING = ("view", {"path": "."})
HEAD = [1, 20]  # the lines read: a title and a description are at the top, a long README is not read whole
READ_README = "Read the top of the README."
READ_MODULE = "There is no README: read the first source module."
FIND_MODULE = "There is no README and no module at the top: list the Python files."


def first_module(listing: str) -> str | None:
    """The first source module a glob lists (not a test, an __init__.py, conftest.py or setup.py)."""
    for path in listing.splitlines():
        name = path.rsplit("/", 1)[-1]
        if path.endswith(".py") and not path.startswith("tests/") and name not in NOT_SOURCE:
            return path
    return None


def listed_files(tree: str) -> list[str]:
    """The files a directory view (`view .`) lists, top level first: its entries that are not
    directories (`tests/ (3 files)`) or notes (`[...]`)."""
    files = [ln for ln in tree.splitlines()[1:] if ln and not ln.startswith("[") and "/ (" not in ln]
    return sorted(files, key=lambda f: "/" in f)


def overview(repo: Path, rng: random.Random, tools: list[dict[str, Any]], root: str) -> dict[str, Any] | None:
    """ "What is this project?" answered from real tool output: a view of the repository's top, then the
    README's title and first line of prose or (no README.md) the first source module's docstring."""
    env = LocalEnvironment(str(repo), timeout=60, output_limit=4000, env=interpreter_environment())
    run = tools_by_name()
    tree = run[LISTING[0]].run(LISTING[1], env)
    if tree.is_error:
        return None
    turns, thinking = [*tool_turn(1, LISTING[0], LISTING[1], tree.output)], [THINK["about"]]
    listed = listed_files(tree.output)
    if "README.md" in listed:
        path, thinking = "README.md", [*thinking, READ_README]
    else:
        path = first_module("\n".join(listed))  # at the top, else in a package the view shows
        if path is None:  # deeper (src/pkg/mod.py): find the first module
            found = run["glob"].run({"pattern": "**/*.py"}, env)
            path = None if found.is_error else first_module(found.output)
            turns += tool_turn(2, "glob", {"pattern": "**/*.py"}, found.output)
            thinking.append(FIND_MODULE)
        thinking.append(READ_MODULE)
    if path is None:
        return None
    read = run["view"].run({"path": path, "view_range": HEAD}, env)
    if read.is_error:
        return None
    if path == "README.md":
        reply = answer("about", read.output, {})
    else:
        doc = re.match(r'\s*1\t"""(.+?)(""")?$', read.output.split("\n", 1)[0])
        reply = (
            f'There is no README; `{path}` says: "{doc[1].strip()}"' if doc else None
        )  # quoted: see _about
    if reply is None:
        return None
    turns += tool_turn(len(thinking), "view", {"path": path, "view_range": HEAD}, read.output)
    messages = [
        {"role": "system", "content": BASE.format(root=root)},
        {"role": "user", "content": rng.choice(ABOUT)},
        *turns,
        {"role": "assistant", "content": f"{reply} {rng.choice(OFFER)}".strip()},
    ]
    return {
        "instance_id": "chat-task-about",
        "messages": messages,
        "thinking": [*thinking, "I have the answer."],
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
        if no_readme and flat:  # one module and its tests, no README: the chat benchmark's repository
            with tempfile.TemporaryDirectory(prefix="clover-flat-") as tmp:
                copy = Path(tmp) / repo.name
                ok = flat_copy(repo, copy, conftest=rng.random() < 0.5)
                (copy / "README.md").unlink(missing_ok=True)
                trajs = [overview(copy, rng, tools, root)] if ok else []
        elif no_readme:
            with tempfile.TemporaryDirectory(prefix="clover-noreadme-") as tmp:
                copy = Path(tmp) / repo.name
                shutil.copytree(
                    repo, copy, ignore=shutil.ignore_patterns("README.md", ".git", ".pytest_cache")
                )
                trajs = [overview(copy, rng, tools, root)]
        elif big:
            with tempfile.TemporaryDirectory(prefix="clover-big-") as tmp:
                pad_copy(repo, Path(tmp) / repo.name, rng)
                trajs = [overview(Path(tmp) / repo.name, rng, tools, root)]
        elif flat:
            with tempfile.TemporaryDirectory(prefix="clover-flat-") as tmp:
                copy = Path(tmp) / repo.name
                trajs = (
                    [trajectory(copy, kind, rng, tools, root) for kind in asked]
                    if flat_copy(repo, copy, conftest=rng.random() < 0.5)
                    else []
                )
        else:
            trajs = [trajectory(repo, kind, rng, tools, root) for kind in asked]
        trajs += [
            rename_trajectory(t, (seed, i, k))
            for t in trajs
            if t is not None and t["instance_id"] == "chat-task-find"
            for k in range(renamed_copies)
        ]
        for traj in trajs:
            if traj is not None and len(out) < count:
                last = len(traj["thinking"]) - 1
                if cut_at is not None and cut_at > last:
                    continue
                cut = last if history_cut else cut_at or 0
                text, spans = render_trajectory(traj, cut, tool_prompt)
                out.append({"text": text, "spans": spans})
    return out


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
