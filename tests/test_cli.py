"""The `clover` command: help without torch, version, and one-line errors for bad input."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.clihelp import ROOT, isolated_env, run_clover, run_fix


def test_help_lists_the_commands():
    proc = run_clover("--help")
    assert proc.returncode == 0, proc.stderr
    for command in ("chat", "fix", "eval", "serve", "undo"):
        assert command in proc.stdout


def test_version():
    proc = run_clover("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("clover ")


def test_help_never_imports_torch():
    code = (
        "import sys\n"
        "from clover.main import app\n"
        "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'openai', 'clover.model.modeling', 'prompt_toolkit') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY=\n" in proc.stdout or proc.stdout.rstrip().endswith("HEAVY=")


def _one_line_error(proc, *needles: str, code: int = 2) -> None:
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0]


def test_missing_issue_file(tmp_path):
    proc = run_clover("fix", str(tmp_path / "nope.md"), "--repo", str(tmp_path), env=isolated_env(tmp_path))
    _one_line_error(proc, "issue file not found", "nope.md")


def test_invalid_config_value(tmp_path):
    (tmp_path / ".clover").mkdir()
    (tmp_path / ".clover" / "config.toml").write_text('mode = "wild"\n')
    (tmp_path / "issue.md").write_text("fix it")
    proc = run_clover("fix", "issue.md", "--repo", str(tmp_path), cwd=tmp_path, env=isolated_env(tmp_path))
    _one_line_error(proc, "mode must be one of")


def test_invalid_output_format(tmp_path):
    (tmp_path / "issue.md").write_text("fix it")
    proc = run_clover("fix", "issue.md", "--output-format", "xml", cwd=tmp_path, env=isolated_env(tmp_path))
    _one_line_error(proc, "--output-format")


def test_json_output_reports_status(tmp_path):
    """A scripted model that answers at once: json output holds status, patch, steps, tokens; a fix that
    changed nothing (and did not say no change was needed) is not a success."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Nothing to do."}]))
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (tmp_path / "issue.md").write_text("fix it")
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{script}",
        "--output-format",
        "json",
        "--yes",
        env=isolated_env(tmp_path),
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "submitted" and report["patch"] == "" and report["steps"] == 1
    assert report["outcome"] == "no_change" and report["exit_code"] == 1


def test_bad_api_key_is_one_line_and_a_backend_failure(tmp_path):
    from tests.fakeserver import FakeChatServer, FakeReply

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (tmp_path / "issue.md").write_text("fix it")
    with FakeChatServer([FakeReply(text="never")], api_key="right-key") as server:
        proc = run_fix(
            tmp_path / "issue.md",
            repo,
            "--base-url",
            server.url,
            "--model",
            "m",
            "--api-key",
            "wrong-key",
            "--yes",
            env=isolated_env(tmp_path),
        )
    _one_line_error(proc, "key", code=5)  # the server refused: exit_codes.BACKEND
    assert "wrong-key" not in proc.stderr
    assert sorted(p.name for p in repo.iterdir()) == [".git"]


def test_real_server_fix_with_text_tool_calls(tmp_path):
    """The whole loop against a real HTTP server whose model writes tool calls as text."""
    from tests.fakeserver import FakeChatServer, FakeReply

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "greet.py").write_text("NAME = 'wrold'\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (tmp_path / "issue.md").write_text("greet.py misspells world")
    call = (
        "<tool_call>\n<function=str_replace>\n<parameter=path>\ngreet.py\n</parameter>\n"
        "<parameter=old_str>\n'wrold'\n</parameter>\n<parameter=new_str>\n'world'\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    replies = [FakeReply(text="<think>typo</think>" + call), FakeReply(text="Fixed the typo.")]
    with FakeChatServer(replies) as server:
        proc = run_fix(
            tmp_path / "issue.md",
            repo,
            "--base-url",
            server.url,
            "--model",
            "m",
            "--api-key",
            "k",
            "--yes",
            "--output-format",
            "json",
            env=isolated_env(tmp_path),
        )
        sent = json.dumps(server.requests)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "submitted" and "+NAME = 'world'" in report["patch"]
    assert (repo / "greet.py").read_text() == "NAME = 'world'\n"
    assert "typo</think>" not in sent  # thinking never goes back to the server
