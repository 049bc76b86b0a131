"""Oracle agent: solves TRAINING-split SynthFix instances through the real tools, for training data.

For one instance it clones the repo at `base_commit` (without `test_patch`: like a SWE-bench agent, it does
not see the hidden tests) and runs a scripted outline -> view -> edit -> test -> answer sequence with the real
`tools.registry` tools in a `LocalEnvironment`; the edit comes from the gold patch. (`reproduce=True` adds the
issue's example, run before and after the edit, where it has one: the embedded model trained on that copied
the example's module paths badly, and the garbled commands derailed the steps after them. Its thinking names
no path either: the call copies the path from the outline output once, instead of after a garbled copy in the
thinking.) The real tool outputs become the tool messages. The instance counts only when the repo's tests pass
at the end and, with `test_patch` applied afterwards, every FAIL_TO_PASS and PASS_TO_PASS test passes.

`render_trajectory` turns the messages into training text (model.chat's ChatML) plus the
character spans that are assistant output (the loss goes only there):

    python -m clover.evals.synthfix.oracle --instances DIR/instances.jsonl --out OUT.jsonl [--workers 2]
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clover.core.protocols import tool_spec
from clover.evals import grading
from clover.model.chat import (
    generation_prompt,
    render_assistant_content,
    render_turn,
    text_messages,
    thought_and_reply,
)
from clover.prompts import FIX
from clover.tools.commandenv import interpreter_environment
from clover.tools.environment import LocalEnvironment
from clover.tools.registry import default_tools, tools_by_name

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


def _short(text: str, limit: int = 80) -> str:
    lines = [t.strip() for t in text.splitlines() if t.strip()]
    one = " / ".join(lines)
    return one if len(one) <= limit else one[: limit - 3] + "..."


# --------------------------------------------------------------------------- running


def checkout(row: dict, work: Path) -> Path:
    """A clean checkout of the instance repo at base_commit (the hidden tests not applied)."""
    name = row["instance_id"].split("__", 1)[-1].rsplit("-", 2)[0] or "repo"
    try:
        return grading.fresh_clone(row["repo"], row["base_commit"], work / name)
    except RuntimeError as exc:  # a git failure
        raise OracleError(str(exc)) from None


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
    efmt = {**fmt, "old": _short(removed), "new": _short(added)}
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


def _check_hidden_tests(row: dict, repo: Path) -> None:
    """Grade the end state as the benchmark does: with test_patch, FAIL_TO_PASS and PASS_TO_PASS pass."""
    if grading.git(repo, "apply", "-", stdin=row["test_patch"], check=False).returncode != 0:
        raise OracleError("the test patch does not apply")
    report = grading.resolution(grading.run_pytest(repo), row)
    bad = [t for t, status in (report["FAIL_TO_PASS"] | report["PASS_TO_PASS"]).items() if status != "PASSED"]
    if not report["resolved"]:
        raise OracleError(f"{len(bad)} graded tests do not pass after the fix, e.g. {bad[0]}")


def solve(row: dict, seed: int = 0, work_root: str | None = None, reproduce: bool = False) -> dict[str, Any]:
    """Run the oracle on one instance. Returns {"instance_id", "messages", "thinking", "tools",
    "root", "seconds"}; raises OracleError when it does not end with passing tests."""
    rng = random.Random(f"oracle:{seed}:{row['instance_id']}")
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="clover-", dir=work_root))
    try:
        repo = checkout(row, work)
        steps = plan_steps(row, repo, rng, reproduce)
        env = LocalEnvironment(str(repo), timeout=60, output_limit=4000, env=interpreter_environment())
        tools = tools_by_name()
        root = env.root
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": FIX.format(root=root)},
            {"role": "user", "content": row["problem_statement"].strip()},
        ]
        thinking: list[str] = []
        last_output = ""
        for i, step in enumerate(steps):
            thinking.append(step.thinking)
            if step.tool is None:
                messages.append({"role": "assistant", "content": step.answer})
                break
            result = tools[step.tool].run(step.arguments, env)
            if result.is_error and step.tool != "bash":
                raise OracleError(f"{step.tool} failed: {result.output.splitlines()[0][:200]}")
            messages += tool_turn(i + 1, step.tool, step.arguments, result.output)
            last_output = result.output
        if not re.search(r"\d+ passed", last_output) or re.search(r"\d+ (failed|error)", last_output):
            raise OracleError(f"tests do not pass after the fix: {_short(last_output, 160)}")
        _check_hidden_tests(row, repo)
        return {
            "instance_id": row["instance_id"],
            "messages": messages,
            "thinking": thinking,
            "tools": [tool_spec(t) for t in default_tools()],
            "root": root,
            "seconds": round(time.perf_counter() - started, 2),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- rendering


def tool_turn(n: int, tool: str, arguments: dict[str, Any], output: str) -> list[dict[str, Any]]:
    """The n-th (1-based) tool call of a trajectory and its result, as OpenAI-format messages."""
    call = {
        "id": f"call_{n}_0",
        "type": "function",
        "function": {"name": tool, "arguments": json.dumps(arguments)},
    }
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "name": tool, "content": output},
    ]


def render_trajectory(
    traj: dict[str, Any], cut: int = 0, tool_prompt: str = "full"
) -> tuple[str, list[tuple[int, int]]]:
    """(ChatML text, assistant character spans). Assistant turns before `cut` are rendered as the
    agent's history shows them (no thinking, no loss); turns from `cut` on carry their thinking
    after `<think>\\n` exactly as the generation prompt opens it, and are the loss spans (thinking,
    answer, calls and the closing `<|im_end|>`). `tool_prompt` is the model config's tool_prompt."""
    msgs = text_messages(traj["messages"], traj["tools"], tool_prompt)
    thoughts = iter(traj["thinking"])
    text, spans, turn = "", [], 0
    for m in msgs:
        if m["role"] != "assistant":
            text += render_turn(m)
            continue
        thought = next(thoughts, "")
        if turn < cut:
            text += render_turn(m)
        else:  # the generation prompt, then what the model writes: the loss span
            text += generation_prompt(think=True)
            start = len(text)
            text += thought_and_reply(thought, m["content"])
            spans.append((start, len(text)))
            text += "\n"
        turn += 1
    return text, spans


__all__ = ["OracleError", "checkout", "render_assistant_content", "render_trajectory", "solve"]


# --------------------------------------------------------------------------- CLI


def _solve_line(args: tuple[str, int, bool]) -> tuple[str | None, str]:
    line, seed, reproduce = args
    row = json.loads(line)
    try:
        return json.dumps(solve(row, seed, reproduce=reproduce), ensure_ascii=False), ""
    except OracleError as exc:
        return None, f"{row['instance_id']}: {exc}"
    except Exception as exc:  # one bad instance must not end a long data run
        return None, f"{row['instance_id']}: {type(exc).__name__}: {exc}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m clover.evals.synthfix.oracle", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--instances", type=Path, required=True, help="instances.jsonl (train split)")
    parser.add_argument("--out", type=Path, required=True, help="trajectories JSONL to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--reproduce", action="store_true", help="also run the issue's example before and after the edit"
    )
    args = parser.parse_args(argv)
    if not args.instances.is_file():
        parser.error(f"not a file: {args.instances}")
    lines = [ln for ln in args.instances.read_text(encoding="utf-8").splitlines() if ln.strip()]
    if any(json.loads(ln).get("split") == "heldout" for ln in lines):
        parser.error("the oracle is for training instances only, not the held-out split")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    ok = bad = 0
    start = time.perf_counter()
    jobs = [(ln, args.seed, args.reproduce) for ln in lines]
    with args.out.open("w", encoding="utf-8") as fh:
        if args.workers > 1:
            from multiprocessing import Pool

            with Pool(args.workers) as pool:
                results = pool.imap(_solve_line, jobs, chunksize=4)
                for out, err in results:
                    ok, bad = _write(fh, out, err, ok, bad)
        else:
            for job in jobs:
                ok, bad = _write(fh, *_solve_line(job), ok, bad)
    print(f"solved {ok}/{ok + bad} in {time.perf_counter() - start:.0f}s -> {args.out}")
    return 0 if ok else 1


def _write(fh, out: str | None, err: str, ok: int, bad: int) -> tuple[int, int]:
    if out is None:
        print(f"skip {err}", file=sys.stderr)
        return ok, bad + 1
    fh.write(out + "\n")
    fh.flush()
    return ok + 1, bad


if __name__ == "__main__":
    sys.exit(main())
