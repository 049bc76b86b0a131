"""`clover fix`'s report where the files are unusual, through the real program (a scripted model,
real git repositories). HEAD: a file in Latin-1 came out of `--patch-out` with U+FFFD where its
bytes were, so the patch did not apply; a file name with a newline split the "Change:" line in two,
and one with an invalid byte crashed the report ("internal error", exit 1, after the change was
made) where stdout is strict UTF-8; an agent that broke `.git/config` made the report say "no files
changed" and exit 1 though it had changed them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.clihelp import ROOT, git_repo, isolated_env


def _fix(
    tmp_path: Path, repo: Path, command: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """The agent runs `command` once and answers; stdout and stderr as bytes (they may not be UTF-8)."""
    (tmp_path / "issue.md").write_text("fix it")
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps([{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "Done."}])
    )
    full = {**isolated_env(tmp_path), "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "clover",
            "fix",
            str(tmp_path / "issue.md"),
            "--repo",
            str(repo),
            "--model",
            f"scripted:{script}",
            "--yes",
            *args,
        ],
        cwd=ROOT,
        env=full,
        capture_output=True,
        timeout=120,
    )


def test_a_latin1_file_gives_a_patch_that_applies(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"README.md": "x\n"})
    (repo / "latin.py").write_bytes(b"caf\xe9 = 1\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "l"], cwd=repo, check=True
    )
    proc = _fix(
        tmp_path, repo, r"printf 'caf\xe9 = 2\n' > latin.py", "--patch-out", str(tmp_path / "fix.diff")
    )
    assert proc.returncode == 0, proc.stderr
    assert b"-caf\xe9 = 1\n+caf\xe9 = 2\n" in proc.stdout  # the text report's diff: the file's own bytes
    assert b"-caf\xe9 = 1\n+caf\xe9 = 2\n" in (tmp_path / "fix.diff").read_bytes()
    subprocess.run(["git", "checkout", "-q", "."], cwd=repo, check=True)
    check = subprocess.run(
        ["git", "apply", "--check", str(tmp_path / "fix.diff")], cwd=repo, capture_output=True
    )
    assert check.returncode == 0, check.stderr
    report = json.loads(
        _fix(tmp_path, repo, r"printf 'caf\xe9 = 3\n' > latin.py", "--output-format", "json").stdout
    )
    assert report["changes"]["files"] == [{"path": "latin.py", "added": 1, "removed": 1}]


def test_odd_file_names_are_quoted_and_never_crash_the_report(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"README.md": "x\n"})
    proc = _fix(
        tmp_path,
        repo,
        r"""echo x > "$(printf 'a\nb.txt')"; echo y > "$(printf 'n\377x.txt')"; """
        r"""echo z > 'sp ace é.txt'""",
        env={"PYTHONIOENCODING": "utf-8:strict"},
    )
    assert proc.returncode == 0, proc.stderr
    change = proc.stdout.split(b"\n")[0].decode()
    assert (
        change
        == 'Change: 3 files changed, +3 -0: "a\\nb.txt" (+1 -0), "n\\377x.txt" (+1 -0), sp ace é.txt (+1 -0)'
    )
    assert b"internal error" not in proc.stderr


def test_a_git_config_broken_by_the_agent_does_not_hide_its_change(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"calc.py": "a - b\n"})
    proc = _fix(
        tmp_path, repo, "echo 'a + b' > calc.py; printf '[core\\n' >> .git/config", "--output-format", "json"
    )
    report = json.loads(proc.stdout)
    if report["containment"]["step_boundary"]:
        # a config git cannot read is not applied (held, and said); the change is reported
        assert [h["path"] for h in report["held_back"]] == [".git/config"]
        assert report["summary"].startswith("Change: 1 file changed") and report["outcome"] == "fixed"
        return
    assert report["summary"].startswith("Change: unknown (the work tree could not be diffed: ")
    assert report["changes"] is None and report["outcome"] == "fixed" and proc.returncode == 0
    assert b"no files changed" not in proc.stdout
    os.remove(repo / ".git" / "config")  # (only so that the temp dir's git can be cleaned up)
