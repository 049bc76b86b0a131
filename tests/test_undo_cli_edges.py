"""`clover undo` through the real program, red-teamed: cases the issue-46 tests did not try.

HEAD: a file name with a newline printed as two lines of the plan (a name can fake a plan line),
and one with a byte that is not UTF-8 crashed `clover undo` where stdout is strict UTF-8 ("internal
error", exit 1) before it did anything.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.clihelp import ROOT, git_repo, isolated_env


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = isolated_env(tmp_path)
    (tmp_path / "cfg" / "clover").mkdir(parents=True, exist_ok=True)
    (tmp_path / "cfg" / "clover" / "config.toml").write_text("sandbox = false\n")
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def _clover(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "clover", *args],
        cwd=ROOT,
        env=_env(tmp_path, **extra),
        capture_output=True,
        timeout=120,
    )


def _fix(tmp_path: Path, repo: Path, *commands: str) -> None:
    (tmp_path / "issue.md").write_text("do it")
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": c}}]} for c in commands]
    (tmp_path / "script.json").write_text(json.dumps([*turns, {"text": "Done."}]))
    proc = _clover(
        tmp_path,
        "fix",
        str(tmp_path / "issue.md"),
        "--repo",
        str(repo),
        "--model",
        f"scripted:{tmp_path / 'script.json'}",
        "--yes",
    )
    assert proc.returncode == 0, proc.stderr


def test_odd_names_in_the_plan_are_quoted_and_never_crash_undo(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"README.md": "x\n"})
    fake = "x\n  CONFLICT README.md: changed since the agent's step; left alone"
    _fix(
        tmp_path,
        repo,
        r"""printf 1 > "$(printf 'x\n  CONFLICT README.md: changed since the agent'"'"'s step; left alone')";"""
        r""" printf 2 > "$(printf 'n\377x.txt')"; printf 3 > 'sp ace é.txt'""",
    )
    assert (repo / fake).exists()
    proc = _clover(tmp_path, "undo", "--repo", str(repo), PYTHONIOENCODING="utf-8:strict")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    assert '  delete   "n\\377x.txt"  (created by the agent, +1 -0)' in lines
    assert "  delete   sp ace é.txt  (created by the agent, +1 -0)" in lines
    assert not any(line.startswith("  CONFLICT") for line in lines)  # the name is one quoted line
    assert sorted(p.name for p in repo.iterdir()) == [".git", "README.md"]
