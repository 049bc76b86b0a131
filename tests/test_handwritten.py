"""The hand-written evaluation set (evals/handwritten): every instance is a real repository whose
FAIL_TO_PASS tests fail before the gold fix and pass after it, PASS_TO_PASS passing throughout."""

from __future__ import annotations

import json
import subprocess
from collections import Counter

import pytest

from clover.evals.handwritten import materialize, specs
from clover.evals.synthfix.verify import verify_instance


def test_the_set_covers_the_families_layouts_and_issue_styles():
    all_specs = specs()
    assert len(all_specs) >= 20 and len({s["id"] for s in all_specs}) == len(all_specs)
    assert {s["layout"] for s in all_specs} == {"flat", "src"}
    assert len(Counter(s["family"] for s in all_specs)) >= 10
    issues = [s["issue"] for s in all_specs]
    assert any("Traceback (most recent call last)" in i for i in issues)
    assert any(">>> " in i for i in issues)
    assert any("Expected" in i and "Actual" in i for i in issues)
    assert any("::test_" in i for i in issues)  # a failing test name
    assert any(sum(p.endswith(".py") and "test" not in p for p in s["files"]) > 2 for s in all_specs)


def test_rows_are_git_repositories_with_diffs(tmp_path):
    rows = materialize(tmp_path, count=3)
    assert [r["instance_id"] for r in rows] == [f"handwritten__{s['id']}" for s in specs()[:3]]
    for row in rows:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=row["repo"], capture_output=True, text=True)
        assert head.stdout.strip() == row["base_commit"]
        assert row["patch"].startswith("diff --git") and row["patch"].count("\n-") >= 1
        assert "tests/test_issue.py" in row["test_patch"] and "tests/test_issue.py" not in row["patch"]
        assert json.loads(row["FAIL_TO_PASS"]) and row["split"] == "handwritten"
    assert materialize(tmp_path, count=3) == rows  # idempotent: the repos are reused


def test_one_instance_fails_before_and_passes_after(tmp_path):
    verdict = verify_instance(materialize(tmp_path, count=1)[0])
    assert verdict.ok, verdict.problems


@pytest.mark.slow
def test_every_instance_fails_before_and_passes_after(tmp_path):
    for row in materialize(tmp_path):
        verdict = verify_instance(row)
        assert verdict.ok, (row["instance_id"], verdict.problems)
        listed = set(json.loads(row["FAIL_TO_PASS"])) | set(json.loads(row["PASS_TO_PASS"]))
        assert set(verdict.after) == listed, row["instance_id"]  # every test of the repo is graded


@pytest.mark.parametrize("oracle, resolved", [("gold", 2), ("empty", 0)])
def test_the_bench_grades_the_set(tmp_path, oracle, resolved):
    # `python -m clover.evals.bench --split handwritten`: the gold patch resolves, an empty one does not.
    from clover.evals.bench.run import main

    out = tmp_path / "bench"
    argv = [
        "--split",
        "handwritten",
        "--oracle",
        oracle,
        "--count",
        "2",
        "--block-size",
        "1",
        "--out",
        str(out),
    ]
    assert (
        main([*argv, "--work-dir", str(tmp_path / "work")]) == 0
    )  # not the default: a bench elsewhere may hold it
    summary = json.loads((out / "summary.json").read_text())
    assert summary["instances"] == [f"handwritten__{s['id']}" for s in specs()[:2]]
    assert [d["resolved"] for d in summary["decoders"]] == [resolved]
