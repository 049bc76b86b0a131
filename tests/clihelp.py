"""Run the real `clover` program in a subprocess (the installed entry point's code path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_fix(issue: str | Path, repo: str | Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """`clover fix ISSUE --repo REPO ARGS...` (keyword arguments as run_clover's)."""
    return run_clover("fix", str(issue), "--repo", str(repo), *args, **kwargs)


def run_clover(
    *args: str,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    input: str | None = None,
) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "clover", *args],
        cwd=cwd or ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        input=input,  # a diff carries the files' own bytes
    )


def isolated_env(tmp: Path) -> dict[str, str]:
    """No user config, no keys, state under tmp."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLOVER_", "OPENAI_"))}
    env.update(
        {"XDG_CONFIG_HOME": str(tmp / "cfg"), "CLOVER_HOME": str(tmp / "state"), "HOME": str(tmp / "home")}
    )
    return env


def git_repo(path: Path, files: dict[str, str]) -> Path:
    """A real git repository at `path` with `files` committed."""
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text)
    for args in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "i"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    return path
