"""The overview question of chat_tasks.py ("What is this project?"), answered from real tool output:
a view of the repository's top, then the README's first lines or, without one, the first source
module's docstring (chat_tasks.py's docstring says why it lists before it reads)."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

from clover.evals.synthfix.chat_wording import ABOUT, OFFER, THINK
from clover.evals.synthfix.oracle import tool_turn
from clover.evals.synthfix.repo_copies import NOT_SOURCE
from clover.prompts import BASE
from clover.tools.environment import LocalEnvironment
from clover.tools.registry import tools_by_name
from clover.tools.safety.commandenv import interpreter_environment


def about_reply(readme: str) -> str | None:
    """'This is Title: "First line of prose."' from a README as `view` numbers it. Prose skips code
    fences (a real README often opens with install commands), badges, lists and the view's own note.

    Both copies are written as the tokens they are in the file (chat_tasks.answer says why for paths): the
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
        reply = about_reply(read.output)
    else:
        doc = re.match(r'\s*1\t"""(.+?)(""")?$', read.output.split("\n", 1)[0])
        reply = (
            f'There is no README; `{path}` says: "{doc[1].strip()}"' if doc else None
        )  # quoted: see about_reply
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
