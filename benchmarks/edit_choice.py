"""What edit repairs cost (steering/edit_choice.py): choosing a str_replace's edit among
(line, repair) pairs, against decoding the same turn, on held-out SynthFix instances.

    python -m benchmarks.edit_choice [--model embedded] [--count 5] [--seed 0]

For each instance: the issue as the user message, and a reply that calls str_replace on the bug's
line copied back unchanged (what the model often writes). Timed side by side in this process, CPU
time: (a) the model decoding one turn for that prompt (up to 256 tokens, the checkpoint's decoder),
(b) choose_edit on that reply (the pairs built and scored). Prints both and their ratio per
instance, the number of pairs, and whether the chosen edit is the instance's gold fix. Then
(c) choose_edit with the issue's reproduction (reproduce.py: candidates run against the issue's
example and the tests that use the function), timed in wall-clock seconds (its work happens in a
child process), and whether that edit is the gold fix.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from pathlib import Path

clock = time.process_time  # CPU time of this process: a busy machine does not inflate it


def _gold(patch: str) -> tuple[str, str, str] | None:
    """(path, old line, new line) of a one-line patch, else None."""
    path = patch.split("\n")[0].split(" b/")[-1]
    minus = [line[1:] for line in patch.splitlines() if line.startswith("-") and not line.startswith("---")]
    plus = [line[1:] for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return (path, minus[0], plus[0]) if len(minus) == 1 and len(plus) == 1 else None


def _run_directly(env, check):
    return env.run(check.argv, timeout=check.timeout)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.edit_choice", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="embedded")
    p.add_argument("--count", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)

    from clover.backends.local import LocalCloverModel
    from clover.core.model_protocol import ToolCall
    from clover.core.tool_protocol import tool_spec
    from clover.evals.synthfix.generator import build_instance
    from clover.model.text.chat import render_tool_call
    from clover.settings import Settings
    from clover.steering.edit_choice import choose_edit
    from clover.steering.grounding import Workspace
    from clover.steering.reproduce import Reproduction
    from clover.tools.environment import LocalEnvironment
    from clover.tools.registry import default_tools

    model = LocalCloverModel(Settings(model=a.model, max_tokens=256, temperature=0.0))
    tools = [tool_spec(t) for t in default_tools()]
    rows, index = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        while len(rows) < a.count and index < 5 * a.count:
            row = build_instance(Path(tmp), "heldout", a.seed, index)
            index += 1
            gold = _gold(row["patch"])
            if gold is None:
                continue
            path, old, new = gold
            model.bind_workspace(LocalEnvironment(row["repo"]))
            messages = [{"role": "user", "content": row["problem_statement"]}]
            t0 = clock()
            model.complete(messages, tools)
            decode = clock() - t0
            ids, _ = model.prompt_ids(messages, tools)
            call = ToolCall("str_replace", {"path": path, "old_str": old, "new_str": old})
            reply = f"The bug is on this line.\n</think>\n\n{render_tool_call(call.name, call.arguments)}"
            text = (Path(row["repo"]) / path).read_text(encoding="utf-8")
            t0 = clock()
            choice = choose_edit(
                model.net, model.tokenizer, ids, reply, call, text, issue=row["problem_statement"]
            )
            chosen = clock() - t0
            hit = choice is not None and (choice.old_str, choice.new_str) == (old, new)
            pairs = choice.candidates if choice is not None else 0
            workspace = Workspace(LocalEnvironment(row["repo"]))
            t0 = time.perf_counter()
            # the benchmark runs the example directly (no agent, no gate)
            run_check = functools.partial(_run_directly, workspace.env)
            rep = Reproduction.from_issue(row["problem_statement"], workspace, run_check)
            run = choose_edit(
                model.net,
                model.tokenizer,
                ids,
                reply,
                call,
                text,
                issue=row["problem_statement"],
                reproduction=rep,
                workspace=workspace,
            )
            repro = time.perf_counter() - t0
            verified = run is not None and (run.path, run.old_str, run.new_str) == (path, old, new)
            rows.append((row["instance_id"], decode, chosen, pairs, hit, repro, verified))
    print(
        f"{'instance':40s} {'turn s':>7s} {'choice s':>8s} {'ratio':>6s} {'pairs':>5s} gold {'run s':>6s} gold"
    )
    for iid, decode, chosen, pairs, hit, repro, verified in rows:
        print(
            f"{iid:40s} {decode:7.2f} {chosen:8.2f} {chosen / decode:6.2f} {pairs:5d} {'yes' if hit else 'no ':4s}"
            f" {repro:6.2f} {'yes' if verified else 'no'}"
        )
    ratios = [r[2] / r[1] for r in rows]
    print(
        f"median choice/turn: {statistics.median(ratios):.2f}; gold chosen {sum(r[4] for r in rows)}/{len(rows)}"
    )
    print(
        f"with the reproduction: median {statistics.median(r[5] for r in rows):.2f} s wall, "
        f"gold chosen {sum(r[6] for r in rows)}/{len(rows)}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
