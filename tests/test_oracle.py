"""The SynthFix oracle: gold-patch edits, rendering that matches the inference prompt, and a real
end-to-end solve through the real tools on a generated training instance."""

from __future__ import annotations

import json

import pytest

from clover.evals.synthfix.oracle import main, render_trajectory, solve
from clover.evals.synthfix.oracle_plan import edit_from_hunk, parse_patch, repro_script
from clover.model.text.chat import render_messages

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
    tools = [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "description": "run",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
        }
    ]
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


@pytest.mark.parametrize("cut, tool_prompt", [(0, "full"), (1, "full"), (0, "compact"), (1, "compact")])
def test_render_matches_inference_prompt(cut: int, tool_prompt: str) -> None:
    traj = _traj()
    text, spans = render_trajectory(traj, cut, tool_prompt)
    assert len(spans) == 2 - cut
    # What precedes each loss span is exactly the prompt the agent would send at that step
    # (history without thinking for turns before the cut).
    k = 2 + 2 * cut  # messages before the assistant turn the first span belongs to
    prompt = render_messages(traj["messages"][:k], traj["tools"], think=True, tool_prompt=tool_prompt)
    assert ("- bash(command?)" in text) == (tool_prompt == "compact")
    assert text[: spans[0][0]] == prompt
    for start, end in spans:
        assert text[start:end].endswith("<|im_end|>")
        assert "</think>\n\n" in text[start:end]
    assert text[spans[-1][0] : spans[-1][1]] == "All good.\n</think>\n\nDone.<|im_end|>"
    if cut:
        assert "Look around." not in text  # a history turn carries no thinking


@pytest.mark.slow
def test_oracle_solves_a_real_instance_reproducing_it(tmp_path) -> None:
    from clover.evals.synthfix import generate

    rows = generate(tmp_path / "sf", "train", 2, seed=7)
    traj = solve(rows[0], seed=0, work_root=str(tmp_path), reproduce=True)
    msgs = traj["messages"]
    calls = [m["tool_calls"][0]["function"]["name"] for m in msgs if m.get("tool_calls")]
    assert calls == ["outline", "bash", "view", "str_replace", "bash", "bash"]
    tool_out = [m["content"] for m in msgs if m["role"] == "tool"]
    start, end = (int(x) for x in tool_out[0].split(":")[1].split("-"))
    view_args = json.loads(msgs[6]["tool_calls"][0]["function"]["arguments"])
    assert view_args["view_range"] == [start, end]  # the view reads the range the outline printed
    assert tool_out[1] != tool_out[4]  # the issue's example gives another result after the edit
    assert "passed" in tool_out[-1] and "failed" not in tool_out[-1]
    assert msgs[-1]["role"] == "assistant" and not msgs[-1].get("tool_calls")
    assert len(traj["thinking"]) == sum(m["role"] == "assistant" for m in msgs)
    text, spans = render_trajectory(traj)
    assert len(spans) == len(traj["thinking"]) and "<tool_response>" in text


@pytest.mark.slow
@pytest.mark.parametrize("prose", [0.0, 1.0])
def test_oracle_finds_views_edits_and_tests(tmp_path, prose) -> None:
    from clover.evals.synthfix import generate

    rows = generate(tmp_path / "sf", "train", 2, seed=7, prose_fraction=prose)
    traj = solve(rows[0], seed=0, work_root=str(tmp_path))
    msgs = traj["messages"]
    calls = [m["tool_calls"][0]["function"]["name"] for m in msgs if m.get("tool_calls")]
    assert calls == ["outline", "view", "str_replace", "bash"]  # the issue's own example is not run
    path = json.loads(msgs[4]["tool_calls"][0]["function"]["arguments"])["path"]
    assert path in msgs[3]["content"] and path not in traj["thinking"][1]  # copied from the outline only
    assert "passed" in msgs[-2]["content"] and "failed" not in msgs[-2]["content"]
    assert msgs[-1]["role"] == "assistant" and not msgs[-1].get("tool_calls")


def test_repro_command_puts_a_src_package_on_the_path() -> None:
    from clover.evals.synthfix.oracle_plan import repro_command

    issue = "```python\nfrom p.m import f\nprint(f(1))\n```"
    assert repro_command(issue, "p/m.py") == "python - <<'EOF'\nfrom p.m import f\nprint(f(1))\nEOF"
    assert repro_command(issue, "src/p/m.py").startswith("PYTHONPATH=src python - <<'EOF'\n")
    assert repro_command("no example", "src/p/m.py") is None


def test_repro_script_from_the_issue_example() -> None:
    plain = "Bug.\n\n```python\nfrom p.m import f\n\nresult = f(2)\nprint(result)  # 3\n```\n\nWant 4."
    assert repro_script(plain) == "from p.m import f\n\nresult = f(2)\nprint(result)  # 3"
    session = (
        "```python\n>>> from p.m import Box\n>>> Box().put('a')\nTraceback (most recent call "
        "last):\nNameError: x\n```"
    )
    assert repro_script(session) == "from p.m import Box\nprint(Box().put('a'))"
    printed = "```python\n>>> from p.m import f\n>>> print(f(1))\nNone\n```"
    assert repro_script(printed) == "from p.m import f\nprint(f(1))"
    assert repro_script("no example here") is None
    assert repro_script("```\nTraceback (most recent call last):\nKeyError: 'x'\n```") is None


def test_cli_refuses_heldout(tmp_path, capsys) -> None:
    path = tmp_path / "i.jsonl"
    path.write_text(json.dumps({"instance_id": "x", "split": "heldout"}) + "\n")
    with pytest.raises(SystemExit):
        main(["--instances", str(path), "--out", str(tmp_path / "o.jsonl")])
    assert "held-out" in capsys.readouterr().err


def test_dataset_entry_renders_trajectories_and_model_data_refuses_them(tmp_path, capsys) -> None:
    # model/ knows nothing of evals/: raw oracle trajectories need the SynthFix entry point's renderer.
    from pathlib import Path

    from clover.evals.synthfix import dataset
    from clover.model.training import data

    traj = tmp_path / "oracle.jsonl"
    traj.write_text(json.dumps({**_traj(), "instance_id": "x-1"}) + "\n")
    tok = Path(__file__).resolve().parents[1] / "model" / "weights" / "tokenizer.json"
    common = [
        "--tokenizer",
        str(tok),
        "--trajectories",
        str(traj),
        "--seq",
        "512",
        "--code-fraction",
        "0",
        "--align",
        "end",
    ]
    assert data.main([*common, "--out", str(tmp_path / "raw")]) == 1
    assert "need a renderer" in capsys.readouterr().err
    assert dataset.main([*common, "--out", str(tmp_path / "p"), "--renamed-copies", "2"]) == 0
    meta = json.loads((tmp_path / "p" / "meta.json").read_text())
    assert meta["trajectories"] == 2 and meta["trajectory_target_tokens"] > 0
