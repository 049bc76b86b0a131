"""Chat-coherence training rows (evals/synthfix/chat_rows.py): `clover chat`'s prompt, one tool-free
answer as the only target."""

from __future__ import annotations

import json

from clover.evals.synthfix.chat_rows import PROMPTS, generate, main


def test_rows_answer_briefly_without_a_tool_call():
    rows = generate(len(PROMPTS), seed=0)
    users = set()
    for row in rows:
        text, spans = row["text"], row["spans"]
        assert text.startswith("<|im_start|>system\nYou are Clover, a coding agent working in the repository at")
        assert len(spans) == 1  # only the answer (with its thinking) is a target
        target = text[spans[0][0] : spans[0][1]]
        assert target.endswith("<|im_end|>") and "</think>\n\n" in target
        answer = target.split("</think>\n\n", 1)[1]
        assert "<function=" not in answer and "<tool_call>" not in answer and len(answer) < 500
        users.add(text.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0])
    assert users == {p for _, p in PROMPTS}  # one pass covers every prompt
    assert generate(5, seed=1) == generate(5, seed=1) != generate(5, seed=2)


def test_cli_writes_jsonl(tmp_path):
    out = tmp_path / "chat.jsonl"
    assert main(["--out", str(out), "--count", "3"]) == 0
    assert [sorted(json.loads(ln)) for ln in out.read_text().splitlines()] == [["spans", "text"]] * 3
