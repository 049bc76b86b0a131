"""One-turn rows (evals/synthfix/turn_rows.py) and answer-turn chat rows (chat_tasks --history-cut):
after the same first step (an outline of a name), the prompt holds exactly what the agent would send
and the only target is the turn that chooses between fixing and answering."""

from __future__ import annotations

import json
import re

import pytest

from clover.evals.synthfix.oracle import solve
from clover.evals.synthfix.turn_rows import main, turn_row
from clover.model.text.chat import render_messages


@pytest.fixture(scope="module")
def fix_and_rows(tmp_path_factory):
    from clover.evals.synthfix import generate as synthfix

    tmp = tmp_path_factory.mktemp("turns")
    rows = synthfix(tmp / "sf", "train", 2, seed=7, prose_fraction=1.0)
    return solve(rows[0], seed=0, work_root=str(tmp)), rows


def test_a_turn_row_is_the_agents_prompt_then_that_turn(fix_and_rows) -> None:
    traj, _ = fix_and_rows
    row = turn_row(traj, 1, "compact")
    ((start, end),) = row["spans"]
    assert end == len(row["text"])  # nothing after the turn
    k = 4  # system, user, the outline call, its output
    prompt = render_messages(traj["messages"][:k], traj["tools"], think=True, tool_prompt="compact")
    assert row["text"][:start] == prompt  # the history as the agent shows it: no thinking
    assert traj["thinking"][0] not in row["text"]
    target = row["text"][start:end]
    assert target.startswith(traj["thinking"][1] + "\n</think>\n\n") and target.endswith("<|im_end|>")
    assert "<function=view>" in target  # a fix views the code after the outline
    with pytest.raises(ValueError, match="no assistant turn 9"):
        turn_row(traj, 9)


def test_cli_writes_renamed_turn_rows_and_refuses_bad_input(fix_and_rows, tmp_path, capsys) -> None:
    traj, _ = fix_and_rows
    src = tmp_path / "oracle.jsonl"
    src.write_text(json.dumps(traj) + "\n")
    out = tmp_path / "turns.jsonl"
    assert (
        main(["--trajectories", str(src), "--out", str(out), "--turns", "1", "2", "--renamed-copies", "2"])
        == 0
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 4 and all(len(r["spans"]) == 1 for r in rows)
    name = json.loads(traj["messages"][2]["tool_calls"][0]["function"]["arguments"])["symbol"]
    assert all(name not in r["text"] for r in rows)  # renamed: copied from the issue, not recalled
    assert "<function=str_replace>" in rows[1]["text"][rows[1]["spans"][0][0] :]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert main(["--trajectories", str(bad), "--out", str(out)]) == 1
    assert main(["--trajectories", str(tmp_path / "missing.jsonl"), "--out", str(out)]) == 1
    assert capsys.readouterr().err.count("clover: ") == 2


def test_history_cut_chat_rows_answer_after_a_call_without_thinking(fix_and_rows) -> None:
    from clover.evals.synthfix.chat_tasks import THINK
    from clover.evals.synthfix.chat_tasks import generate as task_rows

    _, rows = fix_and_rows
    whole = task_rows(rows[:1], 4, seed=0, all_kinds=True)
    cut = task_rows(rows[:1], 4, seed=0, all_kinds=True, history_cut=True)
    timing = re.compile(r"in \d+\.\d+s")  # pytest's real durations differ between the two runs
    for w, c in zip(whole, cut, strict=True):
        assert len(w["spans"]) in (2, 3) and len(c["spans"]) == 1  # an overview makes two calls
        ((start, end),) = c["spans"]
        answer = w["text"][w["spans"][-1][0] : w["spans"][-1][1]]
        assert timing.sub("", c["text"][start:end]) == timing.sub("", answer)  # the same answer turn
        assert not any(t.split(":")[0].split("`")[0] in c["text"][:start] for t in THINK.values())
