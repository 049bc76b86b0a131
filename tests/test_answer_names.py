"""benchmarks/answer_names.py on bench trajectories written the way `clover bench --out` writes them."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.answer_names import main, named


def _task(run: Path, name: str, symbol: str | None, answer: str) -> None:
    calls = (
        [{"name": "outline", "arguments": {"symbol": symbol}}]
        if symbol
        else [{"name": "view", "arguments": {}}]
    )
    events = [
        {"type": "user", "content": "fix it"},
        {"type": "assistant", "step": 1, "text": "", "tool_calls": calls},
        {"type": "tool", "step": 1, "output": "calc.py:1-2: def add(a, b)"},
        {"type": "assistant", "step": 2, "text": answer, "tool_calls": []},
    ]
    path = run / "tasks" / "diffusion-b16-verify" / f"{name}.traj.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


def test_counts_answers_whose_first_span_is_the_looked_up_symbol(tmp_path, capsys):
    _task(tmp_path, "a", "add", "`add` in calc.py used `a - b`; I changed it to `a + b`.")
    _task(tmp_path, "b", "add", "`ir` is defined in `calc.py`.")
    _task(tmp_path, "c", "add", "Fixed it.")
    _task(tmp_path, "d", None, "`add` fixed.")  # no outline: not counted
    assert named(tmp_path) == (1, 3)
    assert main([str(tmp_path)]) == 0 and "1/3 answers" in capsys.readouterr().out
    assert main([str(tmp_path / "missing")]) == 2
