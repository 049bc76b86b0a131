"""The SynthFix oracle: gold-patch edits, rendering that matches the inference prompt, and a real
end-to-end solve through the real tools on a generated training instance."""

from __future__ import annotations

import json

import pytest

from evals.synthfix.oracle import edit_from_hunk, main, parse_patch, render_trajectory, solve
from model.chat import render_messages

PATCH = "\n".join(
    [
        "diff --git a/pkg/m.py b/pkg/m.py",
        "index 1..2 100644",
        "--- a/pkg/m.py",
        "+++ b/pkg/m.py",
        "@@ -1,5 +1,5 @@",
        " def f(x):",
        "-    return x + 1",
        "+    return x - 1",
        " ",
        " def g(x):",
        "     return x + 1",
        "",
    ]
)


def test_parse_patch_and_unique_edit() -> None:
    path, hunks = parse_patch(PATCH)
    assert path == "pkg/m.py" and len(hunks) == 1
    source = "def f(x):\n    return x + 1\n\ndef g(x):\n    return x + 1\n"
    old, new = edit_from_hunk(hunks[0], source)
    # the changed line alone is ambiguous (g has it too): widened by context until unique
    assert source.count(old) == 1
    assert old.startswith("def f(x):") and "x - 1" in new and "x + 1" not in new.split("\n")[1]


def _traj() -> dict:
    tools = [{"type": "function", "function": {"name": "bash", "description": "run",
              "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]  # fmt: skip
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    return {
        "messages": [
            {"role": "system", "content": "SYS"},
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
            {"role": "assistant", "content": "Done."},
        ],
        "thinking": ["Look around.", "All good."],
        "tools": tools,
    }


@pytest.mark.parametrize("cut", [0, 1])
def test_render_matches_inference_prompt(cut: int) -> None:
    traj = _traj()
    text, spans = render_trajectory(traj, cut)
    assert len(spans) == 2 - cut
    # What precedes each loss span is exactly the prompt the agent would send at that step
    # (history without thinking for turns before the cut).
    k = 2 + 2 * cut  # messages before the assistant turn the first span belongs to
    prompt = render_messages(traj["messages"][:k], traj["tools"], think=True)
    assert text[: spans[0][0]] == prompt
    for start, end in spans:
        assert text[start:end].endswith("<|im_end|>")
        assert "</think>\n\n" in text[start:end]
    assert text[spans[-1][0] : spans[-1][1]] == "All good.\n</think>\n\nDone.<|im_end|>"
    if cut:
        assert "Look around." not in text  # a history turn carries no thinking


@pytest.mark.slow
def test_oracle_solves_a_real_instance(tmp_path) -> None:
    from evals.synthfix import generate

    rows = generate(tmp_path / "sf", "train", 2, seed=7)
    traj = solve(rows[0], seed=0, work_root=str(tmp_path))
    msgs = traj["messages"]
    calls = [m["tool_calls"][0]["function"]["name"] for m in msgs if m.get("tool_calls")]
    assert calls[0] in ("grep", "outline") and calls[1] == "bash" and "str_replace" in calls
    tool_out = [m["content"] for m in msgs if m["role"] == "tool"]
    assert "failed" in tool_out[1]  # the reproduction really fails before the edit
    assert "passed" in tool_out[-1] and "failed" not in tool_out[-1]
    assert msgs[-1]["role"] == "assistant" and not msgs[-1].get("tool_calls")
    assert len(traj["thinking"]) == sum(m["role"] == "assistant" for m in msgs)
    text, spans = render_trajectory(traj)
    assert len(spans) == len(traj["thinking"]) and "<tool_response>" in text


def test_cli_refuses_heldout(tmp_path, capsys) -> None:
    path = tmp_path / "i.jsonl"
    path.write_text(json.dumps({"instance_id": "x", "split": "heldout"}) + "\n")
    with pytest.raises(SystemExit):
        main(["--instances", str(path), "--out", str(tmp_path / "o.jsonl")])
    assert "held-out" in capsys.readouterr().err
