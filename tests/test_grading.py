"""evals/grading.py, the grader core: the reference tests replace whatever the patch did to them."""

from __future__ import annotations

from clover.evals.grading import fresh_clone, git, grade, touched_files
from clover.evals.synthfix import generate


def test_a_patch_that_rewrites_the_graded_tests_is_graded_against_the_reference(tmp_path):
    row = generate(tmp_path / "inst", "heldout", 1, 3)[0]
    ws = fresh_clone(row["repo"], row["base_commit"], tmp_path / "ws")
    git(ws, "apply", "-", stdin=row["test_patch"])  # the graded test files, as the test patch leaves them
    for rel in touched_files(row["test_patch"]):  # a "fix" that only guts the tests
        (ws / rel).write_text("def test_nothing():\n    pass\n")
    git(ws, "add", "-A")
    cheat = git(ws, "diff", "--cached", row["base_commit"]).stdout
    report = grade(row, cheat)
    assert report["patch_applied"] and not report["resolved"]
    assert "FAILED" in report["FAIL_TO_PASS"].values()  # the reference tests ran, not the gutted ones
