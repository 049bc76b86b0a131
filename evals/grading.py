"""The grader core for SWE-format instances (repo, base_commit, patch, test_patch, FAIL_TO_PASS,
PASS_TO_PASS): a fresh clone, applying a patch, the reference tests, pytest, the resolution rule.

Used by `clover bench` (evals/bench/task.py), SynthFix's verify (evals/synthfix/verify.py) and the
SWE-bench local grader (evals/swebench/grade_local.py: the patch chain and the reference tests; its
test run and resolution stay swebench's own, as the official harness has them)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clover.evals.git import eval_env, git

# What the official SWE-bench harness tries, in order, to apply a model patch.
APPLY_CHAIN = [
    ["git", "apply", "--verbose"],
    ["git", "apply", "--verbose", "--3way"],
    ["git", "apply", "--verbose", "--reject"],
    ["patch", "--batch", "--fuzz=5", "-p1", "-i"],
]
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.MULTILINE)
_RESULT = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", re.MULTILINE)
Run = Callable[[list[str]], int]  # argv -> exit status, in the work tree


def fresh_clone(repo: str, base_commit: str, dest: Path) -> Path:
    """A clean work tree of `repo` at base_commit, with its own .git (the agent may use git)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    git(dest.parent, "clone", "-q", "--no-checkout", repo, str(dest), remote=True)
    git(dest, "checkout", "-q", base_commit)
    return dest


def reset_tree(ws: Path) -> None:
    git(ws, "reset", "--hard", "--quiet", "HEAD")
    git(ws, "clean", "-fdq")  # not -x: keep what an install built (egg-info, extensions)


def _run_here(ws: Path) -> Run:
    def run(argv: list[str]) -> int:
        try:
            if argv[0] == "git":
                return git(ws, *argv[1:], check=False).returncode
            return subprocess.run(argv, cwd=ws, capture_output=True, env=eval_env(), check=False).returncode
        except OSError:  # e.g. no `patch` program
            return 127

    return run


def apply_patch(ws: Path, patch: str, run: Run | None = None) -> bool:
    """Apply `patch` with the first of APPLY_CHAIN that takes it; the tree is reset after each
    failed try (one may have applied part of it). An empty patch applies trivially."""
    if not patch.strip():
        return True
    run = run or _run_here(ws)
    patch_file = ws.parent / f".{ws.name}.patch.diff"
    patch_file.write_text(patch if patch.endswith("\n") else patch + "\n", encoding="utf-8")
    try:
        for cmd in APPLY_CHAIN:
            if run([*cmd, str(patch_file)]) == 0:
                return True
            reset_tree(ws)
        return False
    finally:
        patch_file.unlink(missing_ok=True)


def touched_files(test_patch: str) -> list[str]:
    """The paths a test patch touches (its b/ side), in order."""
    return list(dict.fromkeys(m.group(2) for m in _DIFF_FILE.finditer(test_patch)))


def reference_tests(ws: Path, base_commit: str, test_patch: str, run: Run | None = None) -> bool:
    """Put the reference tests in place: the files the test patch touches go back to base_commit
    (the agent may have edited them; ones new in the test patch are removed), then the test patch
    is applied. False when it does not apply."""
    run = run or _run_here(ws)
    files = touched_files(test_patch)
    at_base = [
        f for f in files if git(ws, "cat-file", "-e", f"{base_commit}:{f}", check=False).returncode == 0
    ]
    if at_base and run(["git", "checkout", base_commit, "--", *at_base]) != 0:
        return False
    for f in set(files) - set(at_base):
        (ws / f).unlink(missing_ok=True)
    patch_file = ws.parent / f".{ws.name}.test.diff"
    patch_file.write_text(test_patch, encoding="utf-8")
    try:
        return run(["git", "apply", "-v", str(patch_file)]) == 0
    finally:
        patch_file.unlink(missing_ok=True)


def run_pytest(repo: Path, timeout: float = 120) -> dict[str, str]:
    """Run the repo's whole test suite; {test id: PASSED/FAILED/ERROR/...}. Raises TimeoutExpired."""
    env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONHASHSEED": "0",
    }
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--color=no"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    results: dict[str, str] = {}
    for status, test_id in _RESULT.findall(proc.stdout):
        results.setdefault(test_id, status)
    return results


def resolution(results: dict[str, str], row: dict[str, Any]) -> dict[str, Any]:
    """The resolution rule: every FAIL_TO_PASS and every PASS_TO_PASS test passes (and there is at
    least one FAIL_TO_PASS test). Returns the per-test statuses and "resolved"."""
    f2p, p2p = (
        json.loads(row[k]) if isinstance(row[k], str) else row[k] for k in ("FAIL_TO_PASS", "PASS_TO_PASS")
    )
    report = {
        "FAIL_TO_PASS": {t: results.get(t, "MISSING") for t in f2p},
        "PASS_TO_PASS": {t: results.get(t, "MISSING") for t in p2p},
    }
    statuses = [*report["FAIL_TO_PASS"].values(), *report["PASS_TO_PASS"].values()]
    report["resolved"] = bool(f2p) and all(s == "PASSED" for s in statuses)
    return report


def grade(
    row: dict[str, Any], patch: str, timeout: float = 120.0, work: Path | None = None
) -> dict[str, Any]:
    """Apply `patch` in a fresh clone at base_commit, put the reference tests in place, run pytest
    and apply the resolution rule."""
    import tempfile

    report: dict[str, Any] = {
        "resolved": False,
        "patch_applied": False,
        "FAIL_TO_PASS": {},
        "PASS_TO_PASS": {},
    }
    with tempfile.TemporaryDirectory(prefix="clover-grade-", dir=work) as tmp:
        ws = fresh_clone(row["repo"], row["base_commit"], Path(tmp) / "repo")
        if not apply_patch(ws, patch):
            report["error"] = "the patch does not apply"
            return report
        report["patch_applied"] = True
        if not reference_tests(ws, row["base_commit"], row["test_patch"]):
            report["error"] = "the test patch does not apply"
            return report
        try:
            results = run_pytest(ws, timeout)
        except subprocess.TimeoutExpired:
            report["error"] = f"the tests timed out after {timeout:.0f} s"
            return report
    report.update(resolution(results, row))
    return report
