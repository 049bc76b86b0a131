"""evals/synthfix/augment.py: renamed copies of an oracle trajectory stay consistent with themselves."""

from __future__ import annotations

import json

from clover.evals.synthfix.augment import fresh_word, rename_trajectory, renames


def _call(name: str, args: dict, i: int) -> dict:
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _traj() -> dict:
    path = "toolbox/helpers/grades.py"
    return {
        "instance_id": "synthfix-train__toolbox-1-0000",
        "root": "/tmp/clover-x/toolbox",
        "messages": [
            {"role": "system", "content": "Repo at /tmp/clover-x/toolbox."},
            {
                "role": "user",
                "content": "`top_n({'a': 1})` is wrong.\n```python\nfrom toolbox.helpers.grades import top_n\n"
                "print(top_n({'a': 1}))\n```",
            },
            {"role": "assistant", "content": "", "tool_calls": [_call("outline", {"symbol": "top_n"}, 1)]},
            {"role": "tool", "tool_call_id": "c1", "content": f"{path}:3-5: def top_n(scores, n=3)"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [_call("view", {"path": path, "view_range": [3, 5]}, 2)],
            },
            {
                "role": "tool",
                "tool_call_id": "c2",
                "content": "     3\tdef top_n(scores, n=3):\n     4\t    return sorted(scores)[:n]",
            },
            {"role": "assistant", "content": "Fixed `top_n`; test_top_n passes and top_number is untouched."},
        ],
        "thinking": ["Find `top_n`.", "Read toolbox/helpers/grades.py.", "Done."],
        "tools": [],
    }


def test_renames_cover_the_function_and_module_path() -> None:
    import random

    mapping = renames(_traj(), random.Random(0))
    assert set(mapping) == {"top_n", "toolbox", "helpers", "grades"}
    assert len(set(mapping.values())) == 4 and all(v.isidentifier() for v in mapping.values())
    assert mapping["top_n"].count("_") == 1  # as many parts as the original


def test_renamed_copy_is_consistent_and_deterministic() -> None:
    traj = _traj()
    a, b, other = rename_trajectory(traj, 0), rename_trajectory(traj, 0), rename_trajectory(traj, 1)
    assert a == b and a != other
    text = json.dumps([a["messages"], a["thinking"], a["root"]])  # what gets rendered
    for old in ("top_n(", "toolbox", "grades.py", "`top_n`"):
        assert old not in text
    new_fn = json.loads(a["messages"][2]["tool_calls"][0]["function"]["arguments"])["symbol"]
    new_path = json.loads(a["messages"][4]["tool_calls"][0]["function"]["arguments"])["path"]
    assert f"def {new_fn}(scores, n=3)" in a["messages"][3]["content"]
    assert a["messages"][3]["content"].startswith(new_path + ":3-5:")
    assert f"import {new_fn}" in a["messages"][1]["content"] and new_path.split("/")[0] in a["root"]
    # whole identifiers only: joined by underscores it is renamed, inside another word it is not
    answer = a["messages"][-1]["content"]
    assert f"test_{new_fn}" in answer and "top_number" in answer
    assert (
        a["thinking"][0] == f"Find `{new_fn}`." and traj["thinking"][0] == "Find `top_n`."
    )  # input untouched


def test_fresh_words_are_identifiers() -> None:
    import random

    rng = random.Random(3)
    assert all(fresh_word(rng).isidentifier() for _ in range(200))
