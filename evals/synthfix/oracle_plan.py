"""The oracle's scripted steps for one SynthFix instance, planned from the gold data before any tool
output is seen: the gold patch read into str_replace edits, the definition around the bug, the
issue's example as a reproduction command, and the varied thinking and answer phrasing (oracle.py
runs the steps through the real tools)."""

from __future__ import annotations

import ast
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


class OracleError(RuntimeError):
    """The oracle could not solve an instance; the message says why (one line)."""


@dataclass
class Step:
    thinking: str
    tool: str | None = None  # None: the final answer
    arguments: dict[str, Any] = field(default_factory=dict)
    answer: str = ""


# --------------------------------------------------------------------------- patch reading


def parse_patch(patch: str) -> tuple[str, list[list[tuple[str, str]]]]:
    """(path, hunks) of a one-file unified diff; a hunk is a list of (tag, line), tag in ' -+'."""
    path, hunks = "", []
    for line in patch.splitlines():
        if line.startswith("+++ "):
            path = line[4:].removeprefix("b/")
        elif line.startswith("--- ") or line.startswith("diff ") or line.startswith("index "):
            continue
        elif _HUNK.match(line):
            hunks.append([])
        elif hunks and line[:1] in (" ", "-", "+"):
            hunks[-1].append((line[0], line[1:]))
        elif hunks and line == "":
            hunks[-1].append((" ", ""))
    if not path or not hunks:
        raise OracleError("gold patch has no file or no hunk")
    return path, hunks


def edit_from_hunk(hunk: list[tuple[str, str]], source: str) -> tuple[str, str]:
    """(old_str, new_str) for str_replace: the changed lines, widened by context until unique."""
    changed = [i for i, (tag, _) in enumerate(hunk) if tag != " "]
    lo, hi = changed[0], changed[-1]
    while True:
        part = hunk[lo : hi + 1]
        old = "\n".join(t for tag, t in part if tag != "+")
        new = "\n".join(t for tag, t in part if tag != "-")
        if old.strip() and source.count(old) == 1:
            return old, new
        if lo == 0 and hi == len(hunk) - 1:
            raise OracleError("cannot make the edit unique")
        lo, hi = max(lo - 1, 0), min(hi + 1, len(hunk) - 1)


def enclosing_def(source: str, line: int) -> tuple[str, int, int]:
    """(name, first line, last line) of the innermost function/class containing `line` (1-based)."""
    best: tuple[str, int, int] | None = None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            end = node.end_lineno or node.lineno
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if start <= line <= end and (best is None or start >= best[1]):
                best = (node.name, start, end)
    if best is None:
        raise OracleError(f"no function around line {line}")
    return best


# --------------------------------------------------------------------------- phrasing

_LOOK = [
    "The issue is about `{name}`. Let me find where it is defined.",
    "I need to find `{name}` first.",
    "Let me locate the definition of `{name}`.",
    "The report mentions `{name}`. I'll search for it.",
    "First, find the code for `{name}`.",
]
_REPRO = [
    "`{name}` is in {path}. Let me run the example from the issue to see the bug.",
    "Found it in {path}. I'll reproduce the bug with the issue's example first.",
    "It lives in {path}. Run the reproduction from the issue.",
    "Before editing, let me reproduce the problem.",
]
_VIEW = [
    "Same wrong result as the issue says. Let me read `{name}`.",
    "Reproduced. Now look at the code of `{name}` in {path}.",
    "The bug is confirmed. I'll view lines {start}-{end} of {path}.",
    "Let me look at the implementation.",
]
_VIEW_PROSE = [
    "`{name}` is in {path}. Let me read it.",
    "Found it in {path}. I'll view lines {start}-{end}.",
    "It lives in {path}. Look at the implementation.",
]
_VIEW_FOUND = [
    "Let me read `{name}`.",
    "Now look at the code of `{name}`.",
    "I'll view lines {start}-{end}.",
    "Let me look at the implementation.",
    "Read `{name}` to find the bug.",
]
_EDIT = [
    "The bug is on this line: `{old}` should be `{new}`.",
    "Found it: `{old}` is wrong; it should read `{new}`.",
    "`{old}` causes the wrong result. Change it to `{new}`.",
    "The fix is to replace `{old}` with `{new}`.",
]
_EDIT_ADD = [
    "The function is missing `{new}`. Add it.",
    "`{new}` is missing here. I'll add it back.",
]
_RECHECK = [
    "Run the example from the issue again.",
    "Check the reproduction again.",
    "Does the example give the expected result now?",
]
_TEST = [
    "Now run the tests again.",
    "Edit done. Let me run the test suite.",
    "Verify the fix with the tests.",
    "Run all the tests to check the fix.",
]
_DONE_THINK = [
    "All tests pass. The fix is done.",
    "The tests pass now.",
    "Everything passes; I can summarise.",
]
_ANSWER = [
    "Fixed `{name}` in {path}: changed `{old}` to `{new}`. The tests pass.",
    "The bug was in `{name}` ({path}): `{old}` is now `{new}`, and all tests pass.",
    "`{name}` in {path} used `{old}`; I changed it to `{new}`. Tests pass.",
]
_ANSWER_ADD = [
    "Fixed `{name}` in {path}: added the missing `{new}`. The tests pass.",
    "`{name}` in {path} lacked `{new}`; I added it and all tests pass.",
]


def short(text: str, limit: int = 80) -> str:
    lines = [t.strip() for t in text.splitlines() if t.strip()]
    one = " / ".join(lines)
    return one if len(one) <= limit else one[: limit - 3] + "..."


_CODE_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def repro_script(statement: str) -> str | None:
    """The issue's example as a script: a plain block as is; a `>>>` session as its statements, the
    last expression printed (its shown output dropped). None: the issue has no python example."""
    found = _CODE_BLOCK.search(statement)
    if found is None:
        return None
    block = found.group(1).strip("\n")
    if not block.startswith(">>> "):
        return block
    lines = [ln[4:] for ln in block.splitlines() if ln.startswith(">>> ")]
    last = lines[-1]
    if not last.startswith(("print(", "import ", "from ")) and "=" not in last.split("(")[0]:
        lines[-1] = f"print({last})"
    return "\n".join(lines)


def repro_command(statement: str, module_path: str = "") -> str | None:
    """The issue's example run through python; a src/ package is put on PYTHONPATH (it is not
    installed, so a plain `python` would not find it)."""
    script = repro_script(statement)
    if script is None:
        return None
    python = "PYTHONPATH=src python" if module_path.startswith("src/") else "python"
    return f"{python} - <<'EOF'\n{script}\nEOF"


def plan_steps(row: dict, repo: Path, rng: random.Random, reproduce: bool = False) -> list[Step]:
    """The scripted steps before any tool output is seen (what the oracle knows from the gold data)."""
    path, hunks = parse_patch(row["patch"])
    source = (repo / path).read_text(encoding="utf-8")
    first = hunks[0]
    start_line = int(
        _HUNK.match(next(line for line in row["patch"].splitlines() if line.startswith("@@"))).group(1)
    )
    offset = next(i for i, (tag, _) in enumerate(first) if tag != " ")
    old_side = [t for t in first[:offset] if t[0] != "+"]
    bug_line = start_line + len(old_side)
    name, def_start, def_end = enclosing_def(source, min(bug_line, len(source.splitlines())))
    statement = row["problem_statement"]
    # The issue names a function or Class.method: the one the look step searches for.
    if f"{name}" not in statement:
        raise OracleError(f"issue does not mention {name}")
    edits = [edit_from_hunk(h, source) for h in hunks]
    fmt = {"name": name, "path": path, "start": def_start, "end": def_end}
    # outline, not grep: its hit shows the definition's line range, which the view step then reads
    look_step = Step(rng.choice(_LOOK).format(**fmt), "outline", {"symbol": name})
    repro = repro_command(statement, path) if reproduce else None  # None: nothing to run
    removed = "\n".join(t for tag, t in first if tag == "-")
    added = "\n".join(t for tag, t in first if tag == "+")
    efmt = {**fmt, "old": short(removed), "new": short(added)}
    view = {"path": path, "view_range": [def_start, def_end]}
    steps = [look_step]
    if repro is not None:  # the random draws keep their order of before (the seeded data stays the same)
        edit_think = rng.choice(_EDIT if removed.strip() else _EDIT_ADD).format(**efmt)
        steps.append(Step(rng.choice(_REPRO).format(**fmt), "bash", {"command": repro}))
        steps.append(Step(rng.choice(_VIEW).format(**fmt), "view", view))
    else:
        steps.append(Step(rng.choice(_VIEW_PROSE if reproduce else _VIEW_FOUND).format(**fmt), "view", view))
        edit_think = rng.choice(_EDIT if removed.strip() else _EDIT_ADD).format(**efmt)
    for k, (old, new) in enumerate(edits):
        think = edit_think if k == 0 else "Also fix the next spot."
        steps.append(Step(think, "str_replace", {"path": path, "old_str": old, "new_str": new}))
    if repro is not None:
        steps.append(Step(rng.choice(_RECHECK), "bash", {"command": repro}))
    steps.append(Step(rng.choice(_TEST), "bash", {"command": "python -m pytest -q --tb=short"}))
    answer = rng.choice(_ANSWER if removed.strip() else _ANSWER_ADD).format(**efmt)
    steps.append(Step(rng.choice(_DONE_THINK), None, answer=answer))
    return steps
