"""The frozen evaluation set (evals/frozen): real repositories whose FAIL_TO_PASS tests fail before
the gold fix and pass after it, PASS_TO_PASS passing throughout, pinned by its hash."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from clover.evals.frozen import fixed_files, materialize, set_hash, specs
from clover.evals.synthfix.verify import verify_instance

# The set as first committed, before any rule was changed against it. A change to an
# instance makes another set: its figures do not continue these (model/weights/MODEL_CARD.md).
FROZEN_SHA256 = "14b3740a7db1129c20dccceb5c2ba4cd3f7d79ecc0a592b870c9ef84d64d8697"


def test_the_set_is_the_frozen_one():
    assert set_hash() == FROZEN_SHA256


def test_the_set_is_not_only_one_site_mutations():
    all_specs = specs()
    assert len(all_specs) >= 30 and len({s["id"] for s in all_specs}) == len(all_specs)
    assert len(Counter(s["kind"] for s in all_specs)) >= 12
    assert {s["layout"] for s in all_specs} == {"flat", "package", "src"}
    multi_edit = [s for s in all_specs if len(s["gold"]) > 1 or len(fixed_files(s)) > 1]
    assert multi_edit  # fixes with several edits
    adds_lines = [s for s in all_specs if any(e["new"].count("\n") > e["old"].count("\n") for e in s["gold"])]
    assert len(adds_lines) >= 6  # missing lines, not one-token swaps
    issues = [s["issue"] for s in all_specs]
    assert any("Traceback (most recent call last)" in i and "```" not in i for i in issues)  # pasted unfenced
    assert any("**Expected behavior**" in i for i in issues)  # a bug-report template
    assert any("::test_" in i for i in issues)  # a failing CI test
    assert any(">>> " in i and "```" not in i for i in issues)  # a REPL session without fences


def test_rows_are_git_repositories_with_diffs(tmp_path):
    rows = materialize(tmp_path, count=3)
    assert [r["instance_id"] for r in rows] == [f"frozen__{s['id']}" for s in specs()[:3]]
    for row in rows:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=row["repo"], capture_output=True, text=True)
        assert head.stdout.strip() == row["base_commit"]
        assert row["patch"].startswith("diff --git") and row["test_patch"].startswith("diff --git")
        assert json.loads(row["FAIL_TO_PASS"]) and row["split"] == "frozen"
    assert materialize(tmp_path, count=3) == rows  # idempotent: the repos are reused


def test_a_multi_file_instance_fails_before_and_passes_after(tmp_path):
    row = next(r for r in materialize(tmp_path) if r["instance_id"] == "frozen__fz03-verbose-flag")
    assert row["patch"].count("diff --git") == 2
    verdict = verify_instance(row)
    assert verdict.ok, verdict.problems


@pytest.mark.slow
def test_every_instance_fails_before_and_passes_after(tmp_path):
    for row in materialize(tmp_path):
        verdict = verify_instance(row)
        assert verdict.ok, (row["instance_id"], verdict.problems)
        listed = set(json.loads(row["FAIL_TO_PASS"])) | set(json.loads(row["PASS_TO_PASS"]))
        assert set(verdict.after) == listed, row["instance_id"]  # every test of the repo is graded


def test_the_chat_prompts_are_not_paraphrases_of_training_prompts():
    from benchmarks.chat_frozen import nearest, training_prompts
    from clover.evals.frozen import chat_set

    chat = chat_set()
    taught = training_prompts(chat["repo"]["function"])
    assert len(chat["prompts"]) == 10
    for prompt in chat["prompts"]:
        similarity, _ = nearest(prompt.format(name=chat["repo"]["function"]), taught)
        assert similarity < 0.7, prompt


def test_the_model_card_states_the_sets_hash():
    card = Path(__file__).resolve().parents[1] / "model" / "weights" / "MODEL_CARD.md"
    assert FROZEN_SHA256 in card.read_text(encoding="utf-8")
