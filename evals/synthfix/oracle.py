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
import json
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from clover.core.tool_protocol import tool_spec
from clover.evals import grading
from clover.evals.synthfix.oracle_plan import OracleError, plan_steps, short
from clover.model.text.chat import (
    generation_prompt,
    render_assistant_content,
    render_turn,
    text_messages,
    thought_and_reply,
)
from clover.prompts import FIX
from clover.tools.environment import LocalEnvironment
from clover.tools.registry import default_tools, tools_by_name
from clover.tools.safety.commandenv import interpreter_environment

# --------------------------------------------------------------------------- running


def checkout(row: dict, work: Path) -> Path:
    """A clean checkout of the instance repo at base_commit (the hidden tests not applied)."""
    name = row["instance_id"].split("__", 1)[-1].rsplit("-", 2)[0] or "repo"
    try:
        return grading.fresh_clone(row["repo"], row["base_commit"], work / name)
    except RuntimeError as exc:  # a git failure
        raise OracleError(str(exc)) from None


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
            raise OracleError(f"tests do not pass after the fix: {short(last_output, 160)}")
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
