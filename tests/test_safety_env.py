"""Secrets: commands get an allowlisted environment (never
Clover's own venv), the sandbox's home is empty (the user's git identity and what the config lists
excepted), and its /tmp is one per session, with writes there reported."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clover.runner import build_environment
from clover.settings import Settings
from clover.tools.environment import LocalEnvironment
from clover.tools.safety import commandenv
from clover.tools.safety.sandbox import Sandbox, bwrap_available
from tests.clihelp import isolated_env, run_fix

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="no usable bwrap")

# The names the red team's secrets had: none matches a "secret-looking" name pattern.
SECRETS = {
    "SMTP_PASS": "smtp-9x8y7z",
    "GPG_PASSPHRASE": "gpg-horse-battery",
    "SLACK_WEBHOOK_URL": "https://hooks.example/T0/B0/xyzzy",
    "API_KEY": "ak-1234abcd",
    "SECRET_KEY": "sk-django-5678",
    "PGPASSWORD": "pg-hunter2",
    "MYSQL_PWD": "my-hunter3",
    "APP_SECRET_VALUE": "app-s3cr3t",
    "CLIENT_SECRETS": "cs-0a0b0c",
    "JWT_SECRET_B64": "and0LXNlY3JldA==",
    "GITHUB_PAT": "pat-11AAbb22",
}


def test_commands_get_none_of_the_users_secrets(monkeypatch, tmp_path: Path):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    env = LocalEnvironment(str(tmp_path))
    out = env.execute('env; printenv SECRET_KEY | base64; echo "[$SMTP_PASS]"').output
    for name, value in SECRETS.items():
        assert name not in out and value not in out, name
    assert base64.b64encode(SECRETS["SECRET_KEY"].encode()).decode() not in out
    assert "[]" in out and "PATH=" in out and "HOME=" in out


def test_the_config_lists_what_else_commands_get(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("NPM_CONFIG_REGISTRY", "https://registry.example")
    monkeypatch.setenv("AWS_PROFILE", "dev")
    env = LocalEnvironment(str(tmp_path), pass_env=["NPM_CONFIG_*", "AWS_PROFILE"])
    out = env.execute("env").output
    assert "NPM_CONFIG_REGISTRY=https://registry.example" in out and "AWS_PROFILE=dev" in out


def test_a_repository_config_cannot_pass_environment_or_show_home(tmp_path: Path):
    from clover.settings import load_settings

    repo = tmp_path / "repo"
    (repo / ".clover").mkdir(parents=True)
    (repo / ".clover" / "config.toml").write_text(
        'pass_env = ["*"]\nsandbox_home = [".ssh"]\nexec_check = true\n'
    )
    old = dict(os.environ)
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path / "cfg")
    try:
        settings = load_settings(repo)
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert settings.pass_env == [] and settings.sandbox_home == [] and settings.exec_check is True


def test_through_clover_fix_the_secrets_stay_out(tmp_path: Path):
    repo = tmp_path / "ws"
    repo.mkdir()
    script = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "env; printenv GITHUB_PAT | base64"}}]},
        {"text": "done"},
    ]
    (tmp_path / "script.json").write_text(json.dumps(script))
    (tmp_path / "issue.md").write_text("look around")
    env = {**isolated_env(tmp_path), **SECRETS}
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--yes",
        "--model",
        f"scripted:{tmp_path / 'script.json'}",
        "--trajectory",
        str(tmp_path / "t.jsonl"),
        env=env,
    )
    assert proc.returncode == 1, proc.stderr  # the run ended normally and changed nothing
    trajectory = (tmp_path / "t.jsonl").read_text()
    for name, value in SECRETS.items():
        assert value not in trajectory, name
    assert base64.b64encode(SECRETS["GITHUB_PAT"].encode()).decode() not in trajectory
    assert "PATH=" in trajectory  # the command ran


# --------------------------------------------------------------------------- the sandbox's home and /tmp


@pytest.fixture
def fake_home(monkeypatch, tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("[default]\naws_secret_access_key = AWSSECRET123\n")
    (home / ".netrc").write_text("machine example.com login me password NETRCSECRET\n")
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("SSHKEYSECRET\n")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Ada Lovelace\n\temail = ada@example.com\n"
        "[credential]\n\thelper = store\n[alias]\n\tst = !touch pwned\n"
    )
    monkeypatch.setenv("HOME", str(home))
    return home


@needs_bwrap
def test_the_sandbox_home_hides_the_users_secrets(fake_home: Path, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    env = build_environment(Settings(mode="yolo", sandbox=True, checkpoints=False), ws)
    out = env.execute(
        "cat ~/.netrc; base64 -w0 ~/.aws/credentials; cat ~/.ssh/id_ed25519; "
        "git config user.name; git config user.email; git config credential.helper; echo $HOME"
    ).output
    for secret in (
        "NETRCSECRET",
        "AWSSECRET123",
        base64.b64encode(b"[default]").decode()[:8],
        "SSHKEYSECRET",
        "store",
    ):
        assert secret not in out, secret
    assert "Ada Lovelace" in out and "ada@example.com" in out  # the git identity, nothing else
    assert str(fake_home) in out  # HOME is the same path, an empty directory behind it
    assert "No such file" in out


@needs_bwrap
def test_the_config_shows_listed_home_paths_read_only(fake_home: Path, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    env = build_environment(Settings(mode="yolo", sandbox=True, checkpoints=False, sandbox_home=[".aws"]), ws)
    out = env.execute("cat ~/.aws/credentials; echo x >> ~/.aws/credentials; cat ~/.netrc").output
    assert "AWSSECRET123" in out and "Read-only file system" in out and "NETRCSECRET" not in out


@needs_bwrap
def test_one_private_tmp_per_session_and_its_writes_are_reported(tmp_path: Path):
    """A file written to /tmp stays for the next command, and the write is said."""
    ws = tmp_path / "ws"
    ws.mkdir()
    sandbox = Sandbox(str(ws))
    env = LocalEnvironment(str(ws), wrap_command=sandbox)
    first = env.execute("echo kept > /tmp/clover-note; echo hi > ~/.scratch")
    assert "wrote /tmp/clover-note, ~/.scratch in the sandbox's private /tmp or home" in first.output
    assert "deleted when Clover exits" in first.output
    second = env.execute("cat /tmp/clover-note")
    assert second.output.startswith("kept") and "wrote" not in second.output  # nothing new written
    assert not Path("/tmp/clover-note").exists()  # never the host's /tmp
    session = Path(sandbox.session_dir)
    assert (session / "tmp" / "clover-note").exists()
    sandbox.close()
    assert not session.exists()


@needs_bwrap
def test_a_second_session_does_not_see_the_first_ones_tmp(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    one = LocalEnvironment(str(ws), wrap_command=Sandbox(str(ws)))
    two = LocalEnvironment(str(ws), wrap_command=Sandbox(str(ws)))
    one.execute("echo mine > /tmp/clover-session-note")
    assert "No such file" in two.execute("cat /tmp/clover-session-note").output


# --------------------------------------------------------------------------- Clover's own venv


def _fake_venv(monkeypatch, prefix: Path) -> None:
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(sys, "prefix", str(prefix))
    monkeypatch.setattr(sys, "base_prefix", "/usr")


def test_clovers_own_venv_never_reaches_commands(monkeypatch, tmp_path: Path):
    """With Clover's venv active (the README's install), `python3 -m pytest` must not run Clover's
    interpreter. Its bin/ leaves PATH and VIRTUAL_ENV goes, even when it is the active venv."""
    clover = tmp_path / "clover-venv"
    _fake_venv(monkeypatch, clover)
    environ = {
        "PATH": f"{clover}/bin:/usr/bin:/bin",
        "VIRTUAL_ENV": str(clover),
        "PYTHONHOME": str(clover),
        "HOME": "/h",
    }
    env = commandenv.command_environment(environ, ["PYTHONHOME"], workspace=str(tmp_path / "ws"))
    assert env["PATH"] == "/usr/bin:/bin" and "VIRTUAL_ENV" not in env and "PYTHONHOME" not in env


def test_the_users_project_venv_stays(monkeypatch, tmp_path: Path):
    """Clover in venv A, the project's venv B activated: commands get B."""
    clover, project = tmp_path / "a", tmp_path / "b"
    _fake_venv(monkeypatch, clover)
    environ = {"PATH": f"{project}/bin:{clover}/bin:/usr/bin", "VIRTUAL_ENV": str(project)}
    env = commandenv.command_environment(environ, workspace=str(tmp_path / "ws"))
    assert env["PATH"] == f"{project}/bin:/usr/bin" and env["VIRTUAL_ENV"] == str(project)


def test_a_venv_inside_the_workspace_is_the_projects(monkeypatch, tmp_path: Path):
    """Clover installed into the project's own venv (inside the workspace): that venv stays."""
    ws = tmp_path / "ws"
    _fake_venv(monkeypatch, ws / ".venv")
    environ = {"PATH": f"{ws}/.venv/bin:/usr/bin", "VIRTUAL_ENV": str(ws / ".venv")}
    env = commandenv.command_environment(environ, workspace=str(ws))
    assert env["PATH"] == environ["PATH"] and env["VIRTUAL_ENV"] == str(ws / ".venv")


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the tests do not run from a venv")
def test_the_real_command_does_not_run_clovers_interpreter(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("PATH", f"{sys.prefix}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}")
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)
    out = LocalEnvironment(str(tmp_path)).execute('command -v python3; echo "venv=[$VIRTUAL_ENV]"').output
    assert "venv=[]" in out and not out.startswith(sys.prefix), out


# --------------------------------------------------------------------------- where the check cannot work


def test_without_the_exec_check_one_line_says_so(monkeypatch, tmp_path: Path, capsys):
    from clover import runner
    from clover.tools.safety import execguard

    monkeypatch.setattr(execguard, "unavailable_reason", lambda: "no seccomp here (test)")
    monkeypatch.setattr(runner, "_SAID", set())
    env = build_environment(Settings(sandbox=False, checkpoints=False), tmp_path)
    build_environment(Settings(sandbox=False, checkpoints=False), tmp_path)
    err = capsys.readouterr().err
    assert err.count("the exec check is off (no seccomp here (test))") == 1
    assert env.exec_guard is not None and not env.exec_guard.check
    assert env.execute("echo still runs").output.startswith("still runs")
    with pytest.raises(execguard.ExecCheckUnavailable, match="no seccomp here"):
        build_environment(Settings(sandbox=False, checkpoints=False, exec_check=True), tmp_path)


def test_layering_the_launcher_imports_nothing_of_clover():
    """The launcher runs as a file under `python -I -S` inside the sandbox: stdlib only."""
    from clover.tools.safety import execlaunch

    text = Path(execlaunch.__file__).read_text()
    assert "clover" not in "".join(line for line in text.splitlines() if line.startswith(("import", "from")))
    from clover.tools.safety.execguard import unavailable_reason

    probe = subprocess.run([sys.executable, "-I", "-S", execlaunch.__file__, "--probe"], capture_output=True)
    assert (probe.returncode == 0) == (unavailable_reason() is None), probe.stderr
