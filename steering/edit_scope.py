"""What the embedded model may edit: not test files or docstrings, unless the request names them,
and nothing at all when the request is a question that asks for no change.

The tests and the documented examples are what says the code is wrong, and a small model "fixes"
them as readily as the code (on a public set of one-line bugs the embedded model edited the test
file twice and docstring examples twice). So, for the local decoder:
- a test file (`test_*.py`, `*_test.py`, `conftest.py`, anything under a `tests/` or `test/`
  directory) is not a path str_replace or insert may take (grounding.py), unless the request names
  it (its path or file name; a failing test's node id, `tests/test_x.py::test_y`, reports the test,
  it does not ask to change it);
- a docstring's lines are not lines old_str may copy (value_nodes.FileIndex), unless the request
  speaks of docstrings or doctests;
- a request that is a question and names no change ("What does this repository do?", "Where is
  add defined?") is answered, not met with an edit (in a three-file repository the embedded model
  edited README.md for the first): `asks_a_question` is a short request that ends in `?`, opens with
  a question word and has no verb of change (fix, add, make, ...);
- and, whatever the grammar let through (grounding off, a new file), `out_of_scope` holds such a
  call back with the reason, as the tools refuse a bad edit (the turn stage's decision,
  turn_stage.py: the agent answers the call with it).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable
from typing import Any

from clover.tools.testrun import TEST_FILE

TEST_DIRS = frozenset({"tests", "test", "testing"})
DOCSTRINGS = re.compile(r"\b(?:doc\s?strings?|doctests?)\b", re.I)
EDITS = ("str_replace", "insert", "create")
QUESTION_WORDS = re.compile(
    r"^\s*(?:what|which|where|who|whom|whose|why|how|when|does|do|did|is|are|was|were|can you (?:explain|"
    r"tell|describe|show)|could you (?:explain|tell|describe|show)|explain|describe|tell me|show me)\b",
    re.I,
)
CHANGE_WORDS = re.compile(
    r"\b(?:fix|chang|edit|add|remov|delet|renam|refactor|implement|make|updat|writ|creat|replac|correct|"
    r"modif|improv|convert|mov|bump|set|rewrit|patch|repair|clean|format|insert|append|drop|introduc)\w*",
    re.I,
)


def asks_a_question(request: str) -> bool:
    """A question that asks for no change: short, ending in `?`, opening with a question word, with
    no verb of change in it (`How do I make add return floats?` asks for one)."""
    text = request.strip()
    return (
        len(text) <= 300
        and text.endswith("?")
        and bool(QUESTION_WORDS.match(text))
        and not CHANGE_WORDS.search(text)
    )


def is_test_file(path: str) -> bool:
    parts = path.strip("/").split("/")
    return bool(TEST_FILE.search(path)) or parts[-1] == "conftest.py" or bool(TEST_DIRS & set(parts[:-1]))


def names_file(request: str, path: str) -> bool:
    """Does the request name this file (its path or its file name), other than in a test's node id?"""
    path = path.strip("/").removeprefix("./")
    for name in dict.fromkeys([path, path.rsplit("/", 1)[-1]]):
        if re.search(rf"(?<![\w./-]){re.escape(name)}(?!::|[\w/-]|\.\w)", request):
            return True
    return False


def may_edit(request: str, path: str) -> bool:
    return not is_test_file(path) or names_file(request, path)


def asks_for_docstrings(request: str) -> bool:
    return bool(DOCSTRINGS.search(request))


def _docstring_nodes(text: str) -> list[ast.Expr] | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return None
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.append(first)
    return found


def docstring_lines(text: str) -> frozenset[int]:
    """The 0-based numbers of the lines a module's, class's or function's docstring covers
    (nothing for text that does not parse as Python)."""
    nodes = _docstring_nodes(text) or []
    return frozenset(i for n in nodes for i in range(n.lineno - 1, n.end_lineno or n.lineno))


def docstrings(text: str) -> list[str] | None:
    """The module's docstrings, in order (None: it does not parse)."""
    nodes = _docstring_nodes(text)
    return None if nodes is None else [n.value.value for n in nodes]  # type: ignore[attr-defined]


def edited_text(call: Any, text: str) -> str | None:
    """The file's text after this edit call (None: not an edit this can apply)."""
    args = call.arguments
    if call.name == "create" and isinstance(args.get("file_text"), str):
        return args["file_text"]
    if call.name == "str_replace":
        old, new = args.get("old_str"), args.get("new_str")
        if isinstance(old, str) and old and isinstance(new, str) and text.count(old) == 1:
            return text.replace(old, new, 1)
    if (
        call.name == "insert"
        and isinstance(args.get("insert_line"), int)
        and isinstance(args.get("text"), str)
    ):
        lines = text.split("\n")
        at = args["insert_line"]
        if 0 <= at <= len(lines):
            return "\n".join([*lines[:at], args["text"].rstrip("\n"), *lines[at:]])
    return None


def out_of_scope(call: Any, request: str, read: Callable[[str], str | None], current: str = "") -> str | None:
    """Why this edit call is not to be applied (the current request is a question; it edits a test
    file, or changes a docstring, that the request does not name), or None."""
    path = call.arguments.get("path")
    if call.name not in EDITS or not isinstance(path, str) or not path.strip():
        return None
    if asks_a_question(current):
        return (
            f"Not applied: the request is a question and asks for no change, so {path} stays as it is. "
            "Answer the question from what you have read."
        )
    if not may_edit(request, path):
        return (
            f"Not applied: {path} is a test file, and the request does not ask to change it. The tests "
            "say what the code should do: fix the code they test."
        )
    if asks_for_docstrings(request) or not path.endswith(".py"):
        return None
    text = read(path)
    after = edited_text(call, text) if text is not None else None
    before_docs = docstrings(text) if text is not None else None
    if after is None or before_docs is None:
        return None
    after_docs = docstrings(after)
    if after_docs is not None and [d for d in before_docs if d not in after_docs]:
        return (
            "Not applied: this edit changes a docstring, and the request does not ask for that. The "
            "docstring's examples say what the code should do: fix the code."
        )
    return None


def scope_holds(
    calls: list[Any], held: list[str | None], request: str, workspace: Any, current: str = ""
) -> tuple[list[str | None], dict[str, float]]:
    """`held` (one reason or None per call) with each call not yet held that `out_of_scope` refuses
    held back too, and their count as a turn stat. `current`: the request being answered (the last
    one the user wrote)."""

    def read(path: str) -> str | None:
        data = workspace.read(path)
        return data.decode("utf-8", "replace").replace("\r\n", "\n") if data is not None else None

    out = list(held)
    for i, call in enumerate(calls):
        if out[i] is None:
            out[i] = out_of_scope(call, request, read, current)
    count = float(sum(o is not None and h is None for o, h in zip(out, held, strict=True)))
    return out, ({"held_out_of_scope": count} if count else {})


__all__ = [
    "asks_a_question",
    "asks_for_docstrings",
    "docstring_lines",
    "docstrings",
    "edited_text",
    "is_test_file",
    "may_edit",
    "names_file",
    "out_of_scope",
    "scope_holds",
]
