"""Nothing the agent causes outlives its step or escapes undo: each class of harm through the real
CLI (`clover fix` with a scripted model, a real git repository, the real sandbox where bubblewrap
is installed). Each test first shows the harm the same commands do in plain bash (the control),
then that through Clover none of it is left."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from clover.tools.safety.boundary import available
from clover.tools.safety.sandbox import bwrap_available
from clover.trajectory import Trajectory
from tests.clihelp import git_repo, isolated_env, run_clover, run_fix

GIT = ["git", "-c", "user.email=u@u", "-c", "user.name=user"]
needs_boundary = pytest.mark.skipif(
    not available("/tmp/clover-test-steps")[0], reason="user namespaces or overlayfs are missing here"
)


def sh(command: str, cwd: Path, check: bool = True) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "user", "GIT_AUTHOR_EMAIL": "u@u"}
    env |= {"GIT_COMMITTER_NAME": "user", "GIT_COMMITTER_EMAIL": "u@u"}
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"{command}: {proc.stderr}")
    return proc.stdout


def user_repo(path: Path) -> Path:
    """A user's repository with history: two commits, a tag, a branch, a stash, uncommitted work."""
    repo = git_repo(path, {"calc.py": "def add(a, b):\n    return a - b\n", "README.md": "calc\n"})
    sh("git config user.name user && git config user.email u@u", repo)
    sh("echo 'two' >> README.md && git commit -qam two && git tag v1 && git branch feature", repo)
    sh("echo stash-me >> README.md && git stash -q && echo 'my notes' > notes.txt", repo)
    return repo


def history(repo: Path) -> dict[str, str]:
    """Every ref with what it names, and the stash list: what the user's history is."""
    refs = sh("git for-each-ref --format='%(refname) %(objectname)'", repo)
    return {
        "refs": refs,
        "stash": sh("git stash list --format=%H", repo),
        "head": sh("git rev-parse HEAD", repo),
    }


def fsck_clean(repo: Path) -> bool:
    return (
        subprocess.run(["git", "fsck", "--strict", "--no-progress"], cwd=repo, capture_output=True).returncode
        == 0
    )


def fix(tmp_path: Path, repo: Path, commands: list[str], config: str = "", *extra: str):
    (tmp_path / "issue.md").write_text("Tidy up the repository.")
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": c}}]} for c in commands] + [
        {"text": "Change: none"}
    ]
    (tmp_path / "script.json").write_text(json.dumps(turns))
    env = isolated_env(tmp_path)
    cfg = tmp_path / "cfg" / "clover" / "config.toml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(config)
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{tmp_path / 'script.json'}",
        "--trajectory",
        str(tmp_path / "traj.jsonl"),
        "--output-format",
        "json",
        *extra,
        env=env,
    )
    report = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return proc, report, env


def undo(repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return run_clover("undo", "--repo", str(repo), "--yes", env=env)


SANDBOX = ["sandbox", "no-sandbox"]


def _config(mode: str) -> str:
    if mode == "sandbox" and not bwrap_available():
        pytest.skip("bubblewrap is not installed")
    return "sandbox = true\n" if mode == "sandbox" else "sandbox = false\n"


# --------------------------------------------------------------------------- undo and git history


@needs_boundary
@pytest.mark.parametrize("mode", SANDBOX)
def test_a_step_that_breaks_git_directory_state_cannot_make_undo_destroy_history(tmp_path, mode):
    control = user_repo(tmp_path / "control")
    sh("mv .git/HEAD .git/HEAD.bak", control)
    assert subprocess.run(["git", "status"], cwd=control, capture_output=True).returncode != 0  # the harm
    repo = user_repo(tmp_path / "repo")
    before = history(repo)
    proc, report, env = fix(
        tmp_path, repo, ["mv .git/HEAD .git/HEAD.bak; mv .git/refs .git/refs.bak"], _config(mode), "--yes"
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert (repo / ".git" / "HEAD").is_file() and (
        repo / ".git" / "refs"
    ).is_dir()  # kept: still a repository
    assert any(k["path"] == ".git/HEAD" for k in report["left_as_they_were"]), report["left_as_they_were"]
    undone = undo(repo, env)
    assert undone.returncode in (0, 1), undone.stdout + undone.stderr
    assert history(repo) == before and fsck_clean(repo)
    assert (repo / ".git" / "objects").is_dir() and (repo / "notes.txt").read_text() == "my notes\n"


@needs_boundary
@pytest.mark.parametrize("mode", SANDBOX)
def test_history_a_step_destroys_comes_back_with_undo(tmp_path, mode):
    destroy = (
        "git reset -q --hard HEAD~1 && git stash drop -q && git branch -D -q feature && git tag -d v1 && "
        "git reflog expire --expire=now --all && git gc -q --prune=now"
    )
    control = user_repo(tmp_path / "control")
    lost = sh("git rev-parse HEAD", control).strip()
    sh(destroy, control)
    assert subprocess.run(["git", "cat-file", "-e", lost], cwd=control).returncode != 0  # the harm: gone
    repo = user_repo(tmp_path / "repo")
    (repo / "big.bin").write_bytes(os.urandom(18 * 1024 * 1024))  # history over the old size cap
    sh("git add big.bin && git commit -qm big && git gc -q", repo)
    before = history(repo)
    proc, report, env = fix(tmp_path, repo, [destroy], _config(mode), "--yes")
    assert proc.returncode in (0, 1), proc.stderr
    assert fsck_clean(repo)
    # every object stayed (a step never removes history), so every ref can go back
    undone = undo(repo, env)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert history(repo) == before and fsck_clean(repo)
    assert sh("git stash list", repo).strip() and sh("git cat-file -t v1", repo).strip() == "commit"
    assert (repo / ".git" / "packed-refs").exists() or sh("git show-ref", repo)


# --------------------------------------------------------------------------- code outside every step


CONFTEST = (
    "import os, shutil, glob\n"
    "os.remove('notes.txt') if os.path.exists('notes.txt') else None\n"
    "[shutil.rmtree(d, ignore_errors=True) for d in glob.glob('.git/objects/??')]\n"
)


@needs_boundary
@pytest.mark.parametrize("mode", SANDBOX)
def test_a_planted_conftest_run_by_an_allowed_pytest_is_undone_whole(tmp_path, mode):
    control = user_repo(tmp_path / "control")
    (control / "conftest.py").write_text(CONFTEST)
    sh("python3 -m pytest -q -p no:cacheprovider || true", control)
    assert not (control / "notes.txt").exists() and not fsck_clean(control)  # the harm
    repo = user_repo(tmp_path / "repo")
    before = history(repo)
    config = _config(mode) + '[permissions]\nallow = ["bash(python3 -m pytest:*)"]\n'
    script = [f"cat > conftest.py <<'EOF'\n{CONFTEST}EOF", "python3 -m pytest -q -p no:cacheprovider"]
    proc, report, env = fix(tmp_path, repo, script, config, "--yes")
    assert fsck_clean(repo), "a step removed git objects"
    undone = undo(repo, env)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert (repo / "notes.txt").read_text() == "my notes\n" and not (repo / "conftest.py").exists()
    assert history(repo) == before and fsck_clean(repo)


@needs_boundary
def test_the_test_guard_runs_a_planted_conftest_as_a_check_whose_changes_are_thrown_away(tmp_path):
    repo = git_repo(
        tmp_path / "repo",
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "test_calc.py": "from calc import add\n\ndef test_one():\n    assert add(1, 0) == 1\n",
        },
    )
    (repo / "notes.txt").write_text("my notes\n")
    script = [
        "sed -i 's/a - b/a + b/' calc.py && cat > conftest.py <<'EOF'\n"
        "import os\nif os.path.exists('notes.txt'):\n    os.remove('notes.txt')\nEOF"
    ]
    proc, report, env = fix(tmp_path, repo, script, "", "--yes")
    # the agent's own step ran conftest-free; the guard's runs (before and after) are checks
    assert (repo / "notes.txt").read_text() == "my notes\n", report.get("test_guard")
    guard = report["test_guard"]
    assert guard["checked"] and "notes.txt" in guard["discarded"] and "thrown away" in guard["note"]
    checks = [
        r for r in Trajectory.read(tmp_path / "traj.jsonl") if r["type"] == "step" and not r["kept_changes"]
    ]
    assert any("notes.txt" in r["discarded"] for r in checks)  # the check is a recorded step


# --------------------------------------------------------------------------- persistence past the step


@needs_boundary
@pytest.mark.parametrize("mode", SANDBOX)
def test_hooks_and_program_naming_config_written_by_a_step_never_reach_the_host(tmp_path, mode):
    plant = (
        "printf '#!/bin/sh\\ntouch \"$HOME_MARK\"\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && "
        "git config core.fsmonitor 'touch {mark}' && git config core.hooksPath .git/hooks && "
        "git config user.name agent && echo fixed > calc.py"
    )
    mark = tmp_path / "host-ran-it"
    control = user_repo(tmp_path / "control")
    sh(plant.format(mark=mark) + " && git status -s >/dev/null", control)
    assert mark.exists()  # the harm: the user's own git status ran the planted program
    mark.unlink()
    repo = user_repo(tmp_path / "repo")
    proc, report, env = fix(tmp_path, repo, [plant.format(mark=mark)], _config(mode), "--yes")
    assert proc.returncode == 0, proc.stderr
    sh("git status -s >/dev/null && git commit -qam user-commit", repo)  # the user's git, on the host
    assert not mark.exists()
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert sh("git config --get core.fsmonitor || true", repo).strip() == ""
    assert (repo / "calc.py").read_text() == "fixed\n"  # the rest of the step was applied
    held = {h["path"] for h in report["held_back"]}
    assert {".git/hooks/pre-commit", ".git/config"} <= held, report["held_back"]
    assert "Not applied" in report["summary"] and ".git/hooks/pre-commit" in report["summary"]


@needs_boundary
def test_a_hook_in_the_directory_core_hooks_path_names_is_held_like_one_in_git_hooks(tmp_path):
    """Husky-style repositories keep their hooks in the work tree (`core.hooksPath`, set by the
    user): a step that writes there plants a hook as surely as one writing .git/hooks."""
    plant = (
        "mkdir -p .githooks && printf '#!/bin/sh\\ntouch {mark}\\n' > .githooks/pre-commit && "
        "chmod +x .githooks/pre-commit && echo fixed > calc.py"
    )
    mark = tmp_path / "host-ran-it"
    control = user_repo(tmp_path / "control")
    sh("git config core.hooksPath .githooks", control)
    sh(plant.format(mark=mark) + " && git commit -qam user-commit", control)
    assert mark.exists()  # the harm: the user's own commit ran the planted hook
    mark.unlink()
    repo = user_repo(tmp_path / "repo")
    sh("git config core.hooksPath .githooks", repo)
    proc, report, env = fix(tmp_path, repo, [plant.format(mark=mark)], _config("no-sandbox"), "--yes")
    assert proc.returncode == 0, proc.stderr
    sh("git commit -qam user-commit", repo)
    assert not mark.exists() and not (repo / ".githooks" / "pre-commit").exists()
    assert (repo / "calc.py").read_text() == "fixed\n"  # the rest of the step was applied
    assert ".githooks/pre-commit" in {h["path"] for h in report["held_back"]}, report["held_back"]


def test_a_hooks_path_at_the_work_trees_top_holds_only_git_hook_names(tmp_path):
    from clover.tools.safety.overlay import LayerChange
    from clover.tools.safety.steppolicy import review

    repo = user_repo(tmp_path / "repo")
    sh("git config core.hooksPath .", repo)
    upper = tmp_path / "upper"
    upper.mkdir()
    changes = []
    for name in ("pre-commit", "README.md", "src/pre-commit"):
        (upper / name).parent.mkdir(parents=True, exist_ok=True)
        (upper / name).write_text("#!/bin/sh\n")
        changes.append(LayerChange(name, "file", str(upper / name)))
    decided = review(str(repo), changes)
    assert [h.path for h in decided.held] == ["pre-commit"]
    assert sorted(c.path for c in decided.apply) == ["README.md", "src/pre-commit"]


# --------------------------------------------------------------------------- without the sandbox


def test_without_the_sandbox_the_start_says_so_and_allow_rules_run_nothing_unasked(tmp_path):
    repo = user_repo(tmp_path / "repo")
    config = 'sandbox = false\n[permissions]\nallow = ["bash(touch *)"]\n'
    proc, report, _env = fix(tmp_path, repo, ["touch ../outside"], config)
    assert "no sandbox" in proc.stderr and "every command is asked" in proc.stderr
    assert report["containment"]["sandbox"] is False and report["containment"]["sandbox_off_because"]
    assert not (tmp_path / "outside").exists()
    assert report["outcome"] == "refused"


@pytest.mark.parametrize("boundary", [True, False], ids=["boundary", "no-boundary"])
def test_without_the_sandbox_a_daemon_dies_with_its_step_and_the_keys_stay_unread(tmp_path, boundary):
    if boundary and not available("/tmp/clover-test-steps")[0]:
        pytest.skip("user namespaces or overlayfs are missing here")
    repo = user_repo(tmp_path / "repo")
    key = "sk-clover-test-0123456789abcdef"
    steal = (
        "for f in /proc/$PPID/environ /proc/$PPID/cmdline /proc/[0-9]*/environ; do "
        "cat $f 2>/dev/null | tr '\\0' '\\n' | rev; done > stolen.txt; true"
    )
    # the daemon needs no program start after it is up (bash builtins only: the exec check alone
    # would stop a `sleep`/`rm`, and this is what must die with its step); the step waits until the
    # daemon has left its session, so the group kill alone cannot have stopped it
    daemon = (
        "(setsid bash -c ': > ../daemon-up; exec 3<> <(:); read -t 4 -u 3; : > notes.txt; : > README.md' "
        ">/dev/null 2>&1 &); until [ -e ../daemon-up ]; do :; done; echo started"
    )
    control = user_repo(tmp_path / "control" / "repo")
    sh(daemon.replace("-t 4", "-t 1"), control)
    time.sleep(2)
    assert (control / "notes.txt").read_text() == ""  # the harm: plain bash's daemon outlived it
    config = f"sandbox = false\nboundary = {str(boundary).lower()}\n"
    proc, report, env = fix(tmp_path, repo, [steal, daemon], config, "--yes", "--api-key", key)
    assert proc.returncode == 0, proc.stderr
    time.sleep(5)
    assert (repo / "notes.txt").read_text() == "my notes\n" and (repo / "README.md").read_text()  # it died
    stolen = (repo / "stolen.txt").read_text()
    assert key[::-1] not in stolen and key not in stolen[::-1]
    if not boundary:
        outputs = [r["output"] for r in Trajectory.read(tmp_path / "traj.jsonl") if r["type"] == "tool"]
        assert any("left running" in o for o in outputs), outputs  # and the user is told


# --------------------------------------------------------------------------- the workspace as a home


def test_a_workspace_that_is_or_holds_the_home_directory_is_refused_without_the_flag(tmp_path):
    env = isolated_env(tmp_path)
    home = Path(env["HOME"])
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    for workspace in (home, tmp_path):
        proc = run_clover("-p", "rev ~/.ssh/id_ed25519", "--repo", str(workspace), "--mode", "plan", env=env)
        assert proc.returncode == 2 and "--allow-home" in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    proc = run_clover("-p", "hi", "--repo", "/", "--model", "scripted:/nonexistent", env=env)
    assert proc.returncode == 2 and "whole file system" in proc.stderr


# --------------------------------------------------------------------------- git writes, the store


def test_the_git_tools_commit_is_asked_in_auto_edit_and_never_sweeps_in_the_users_files(tmp_path):
    repo = user_repo(tmp_path / "repo")
    (repo / "secrets.local").write_text("TOKEN=hunter2\n")
    turns = [
        {
            "tool_calls": [
                {
                    "name": "str_replace",
                    "arguments": {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"},
                }
            ]
        },
        {"tool_calls": [{"name": "git", "arguments": {"subcommand": "commit", "message": "fix add"}}]},
        {"text": "Committed."},
    ]
    (tmp_path / "script.json").write_text(json.dumps(turns))
    (tmp_path / "issue.md").write_text("fix add")
    env = isolated_env(tmp_path)
    args = ["--model", f"scripted:{tmp_path / 'script.json'}", "--output-format", "json"]
    proc = run_fix(tmp_path / "issue.md", repo, *args, env=env)  # auto-edit: the commit is asked, so refused
    report = json.loads(proc.stdout)
    assert [d["tool_name"] for d in report["permission_denials"]] == ["git"]
    assert sh("git log --format=%s -1", repo).strip() == "two"
    sh("git checkout -q -- calc.py", repo)  # the edit again, now in yolo
    proc = run_fix(tmp_path / "issue.md", repo, *args, "--yes", env=env)
    assert sh("git log --format=%s -1", repo).strip() == "fix add", proc.stdout
    committed = sh("git show --name-only --format= HEAD", repo).split()
    assert committed == ["calc.py"], committed  # not secrets.local, not the user's notes.txt
    outputs = [
        r["output"] for r in Trajectory.read(json.loads(proc.stdout)["trajectory"]) if r["type"] == "tool"
    ]
    assert "left out" in outputs[-1] and "secrets.local" in outputs[-1], outputs


def test_the_undo_store_is_private_and_outside_any_cache(tmp_path):
    repo = user_repo(tmp_path / "repo")
    (repo / ".env").write_text("TOKEN=hunter2\n")
    (repo / ".env").chmod(0o600)
    proc, _report, env = fix(tmp_path, repo, ["echo changed > .env"], "", "--yes")
    state = Path(env["CLOVER_HOME"])
    store = next((state / "undo").iterdir())
    for path in [state, state / "undo", store]:
        assert path.stat().st_mode & 0o077 == 0, path
    assert not (tmp_path / "home" / ".cache" / "clover" / "checkpoints").exists()
