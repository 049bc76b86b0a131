"""`clover fix` end to end: a real git repo with a failing pytest test, a scripted model doing
view -> str_replace -> pytest -> answer through the real tools; the test passes afterwards."""

from __future__ import annotations

import json
import subprocess
import sys

from clover.trajectory import Trajectory
from tests.clihelp import isolated_env, run_clover, run_fix

BUGGY = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def make_repo(path):
    path.mkdir()
    (path / "calc.py").write_text(BUGGY)
    (path / "test_calc.py").write_text(TEST)
    # commands get only an allowlisted environment (no PYTHONDONTWRITEBYTECODE from the test's own)
    (path / ".gitignore").write_text("__pycache__/\n")
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True)
    return path


def script_file(tmp_path):
    turns = [
        {
            "thinking": "Look at the code first.",
            "tool_calls": [{"name": "view", "arguments": {"path": "calc.py"}}],
        },
        {
            "thinking": "add subtracts.",
            "tool_calls": [
                {
                    "name": "str_replace",
                    "arguments": {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"},
                }
            ],
        },
        {
            "tool_calls": [
                {"name": "bash", "arguments": {"command": f"{sys.executable} -m pytest -q test_calc.py"}}
            ]
        },
        {"text": "Fixed: add() subtracted instead of adding."},
    ]
    path = tmp_path / "script.json"
    path.write_text(json.dumps(turns))
    return path


def test_fix_leaves_the_test_passing(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "issue.md").write_text("add(2, 3) returns -1 instead of 5.")
    traj = tmp_path / "traj.jsonl"
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{script_file(tmp_path)}",
        "--yes",
        "--trajectory",
        str(traj),
        "--patch-out",
        str(tmp_path / "fix.diff"),
        env=isolated_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    assert "-    return a - b" in proc.stdout and "+    return a + b" in proc.stdout
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert "+    return a + b" in (tmp_path / "fix.diff").read_text()
    check = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "test_calc.py"], cwd=repo, capture_output=True
    )
    assert check.returncode == 0
    records = Trajectory.read(traj)
    tools_run = [r["name"] for r in records if r["type"] == "tool"]
    assert tools_run == ["view", "str_replace", "bash"]
    bash_output = [r["output"] for r in records if r["type"] == "tool"][2]
    assert "1 passed" in bash_output
    summary = [r for r in records if r["type"] == "summary"]
    assert len(summary) == 1 and summary[0]["exit_status"] == "submitted"
    # the bash step went through the step boundary, and its change was kept
    steps = [r for r in records if r["type"] == "step"]
    assert steps and all(isinstance(r["kept_changes"], bool) for r in steps)
    # The user's index is untouched: the fix is an unstaged change.
    staged = subprocess.run(
        ["git", "diff", "--cached", "--name-only"], cwd=repo, capture_output=True, text=True
    )
    assert staged.stdout == ""


def test_fix_commit(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "issue.md").write_text("add is wrong")
    env = {
        **isolated_env(tmp_path),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{script_file(tmp_path)}",
        "--yes",
        "--commit",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    log = subprocess.run(["git", "log", "--format=%s"], cwd=repo, capture_output=True, text=True).stdout
    assert log.splitlines()[0].startswith("Fixed: add() subtracted")
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert status == ""


def test_fix_commit_keeps_the_users_own_changes_out(tmp_path):
    # --commit used to `git add -A` and commit everything, the user's unrelated work included.
    repo = make_repo(tmp_path / "repo")
    (repo / "test_calc.py").write_text(TEST + "# my note\n")  # unstaged edit
    (repo / "staged.txt").write_text("wip\n")
    subprocess.run(["git", "add", "staged.txt"], cwd=repo, check=True)
    (repo / "scratch.txt").write_text("untracked\n")
    (tmp_path / "issue.md").write_text("add is wrong")
    env = {
        **isolated_env(tmp_path),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{script_file(tmp_path)}",
        "--yes",
        "--commit",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    files = subprocess.run(
        ["git", "show", "--name-only", "--format=", "HEAD"], cwd=repo, capture_output=True, text=True
    ).stdout.split()
    assert files == ["calc.py"]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert sorted(status.splitlines()) == [" M test_calc.py", "?? scratch.txt", "A  staged.txt"]


def test_patch_out_problems_are_one_line_and_lose_nothing(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "issue.md").write_text("add is wrong")
    env, model = isolated_env(tmp_path), f"scripted:{script_file(tmp_path)}"
    # A missing directory is caught before the agent runs (it used to crash after the run).
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        model,
        "--yes",
        "--patch-out",
        str(tmp_path / "no" / "fix.diff"),
        env=env,
    )
    assert proc.returncode == 2 and proc.stderr.strip().startswith("clover: --patch-out: directory not found")
    assert (repo / "calc.py").read_text() == BUGGY
    # So is a directory (the fix would be made and its patch lost).
    (tmp_path / "adir").mkdir()
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        model,
        "--yes",
        "--patch-out",
        str(tmp_path / "adir"),
        env=env,
    )
    assert (
        proc.returncode == 2 and "is a directory" in proc.stderr and (repo / "calc.py").read_text() == BUGGY
    )
    # A write that fails only at the end (a full disk) is a warning; the diff and report still come out.
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        model,
        "--yes",
        "--patch-out",
        "/dev/full",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "clover: warning: cannot write" in proc.stderr and "+    return a + b" in proc.stdout
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr


def test_fix_without_yes_edits_but_runs_no_command(tmp_path):
    # The headless default is auto-edit: the edit (the fix's purpose) runs, the test command needs
    # an allow rule or --yes, and its refusal is said (it used to refuse the edit too and exit 0).
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "issue.md").write_text("add is wrong")
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{script_file(tmp_path)}",
        env=isolated_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert "clover: refused: bash" in proc.stderr and "Tests: the agent ran no test command" in proc.stdout


def test_undo_after_fix_restores_the_tree(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "issue.md").write_text("add is wrong")
    env = isolated_env(tmp_path)
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{script_file(tmp_path)}",
        "--yes",
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "a + b" in (repo / "calc.py").read_text()
    undo = run_clover("undo", "--repo", str(repo), env=env)
    assert undo.returncode == 0, undo.stderr
    assert (repo / "calc.py").read_text() == BUGGY
    redo = run_clover("undo", "--redo", "--repo", str(repo), env=env)
    assert redo.returncode == 0, redo.stderr
    assert "a + b" in (repo / "calc.py").read_text()


def test_fix_outside_git_has_a_real_diff_too(tmp_path):
    repo = make_repo(tmp_path / "repo")
    subprocess.run(["rm", "-rf", str(repo / ".git")], check=True)
    (tmp_path / "issue.md").write_text("add is wrong")
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{script_file(tmp_path)}",
        "--yes",
        env=isolated_env(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    # a throwaway shadow repository diffs the directory: the report and the diff are real here too
    assert (
        "Change: 1 file changed, +1 -1: calc.py (+1 -1)" in proc.stdout and "+    return a + b" in proc.stdout
    )
    assert not (repo / ".git").exists() and "a + b" in (repo / "calc.py").read_text()
    commit = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{script_file(tmp_path)}",
        "--yes",
        "--commit",
        env=isolated_env(tmp_path),
    )
    assert commit.returncode == 2 and "--commit needs a git repository" in commit.stderr
    # Checkpoints live in a shadow repository, so undo works here too (it used to be switched off).
    undo = run_clover("undo", "--repo", str(repo), env=isolated_env(tmp_path))
    assert undo.returncode == 0, undo.stderr
    assert (repo / "calc.py").read_text() == BUGGY
