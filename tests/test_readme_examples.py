"""Every command in README.md's "Use" block runs as written. The block is read from the README itself,
so a changed example is tested as it now reads, and a new one fails here until it has a check. Only
placeholders are filled in (`path/to/repo`, `--base-url ...`, `--model ...`); the model is a real
HTTP server on 127.0.0.1 (CLOVER_BASE_URL / CLOVER_MODEL where the example names none). Each line
runs through bash, with `clover` and `pytest` on PATH running this checkout."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.clihelp import ROOT, git_repo, isolated_env
from tests.fakeserver import FakeChatServer, FakeReply

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
EDIT = {
    "name": "str_replace",
    "arguments": {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"},
}
# Interactive: they open the chat on a terminal (tests/test_chat_tmux.py drives it under tmux).
INTERACTIVE = ("clover chat", "clover chat --base-url ")
INTERACTIVE_EXACT = ("clover", "clover -c")  # bare `clover` opens the chat (tests/test_chat_conventions.py)
FIX_JSON = "clover fix ISSUE.md --output-format json --patch-out fix.diff"
UNDO = "clover undo"


def use_examples() -> list[str]:
    """The commands of the first bash block under "## Use", comments stripped."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Use", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README.md's Use section has no bash block"
    lines = [re.sub(r"\s+#\s.*$", "", line).strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line]


class World:
    """A temporary machine: a shim bin directory, a fresh home, repositories with the bug."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        bin_dir = tmp / "bin"
        bin_dir.mkdir()
        for name, module in (("clover", "clover"), ("pytest", "pytest")):
            shim = bin_dir / name
            shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m {module} "$@"\n')
            shim.chmod(0o755)
        self.env = isolated_env(tmp)
        self.env.update(PATH=f"{bin_dir}:{self.env.get('PATH', '/usr/bin:/bin')}", PYTHONPATH=str(ROOT))
        self.repos = 0

    def repo(self) -> Path:
        self.repos += 1
        path = git_repo(self.tmp / f"repo{self.repos}", {"calc.py": BUGGY, "test_calc.py": TEST})
        (path / "ISSUE.md").write_text("add(2, 3) returns -1 instead of 5.\n")
        return path

    def run(self, line: str, cwd: Path, server: FakeChatServer, **env: str) -> subprocess.CompletedProcess:
        line = line.replace("--base-url ...", f"--base-url {server.url}").replace("--model ...", "--model m")
        return subprocess.run(
            ["bash", "-c", line],
            cwd=cwd,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )


def _server_env(server: FakeChatServer) -> dict[str, str]:
    return {"CLOVER_BASE_URL": server.url, "CLOVER_MODEL": "m"}


def fix_elsewhere(world: World, line: str) -> None:
    repo = world.repo()
    (world.tmp / "ISSUE.md").write_text((repo / "ISSUE.md").read_text())
    line = line.replace("path/to/repo", str(repo))
    with FakeChatServer([FakeReply(tool_calls=[EDIT]), FakeReply(text="Fixed add.")]) as server:
        proc = world.run(line, world.tmp, server)
    assert proc.returncode == 0, proc.stderr
    assert (
        "Change: 1 file changed, +1 -1: calc.py (+1 -1)" in proc.stdout and "+    return a + b" in proc.stdout
    )
    assert (repo / "calc.py").read_text() == FIXED


def fix_json_patch_out(world: World, line: str) -> Path:
    repo = world.repo()
    with FakeChatServer([FakeReply(tool_calls=[EDIT]), FakeReply(text="Fixed add.")]) as server:
        proc = world.run(line, repo, server, **_server_env(server))
    assert proc.returncode == 0, proc.stderr  # no --yes: the headless default (auto-edit) lets the edit run
    report = json.loads(proc.stdout)
    assert report["outcome"] == "fixed" and report["exit_code"] == 0 and report["permission_denials"] == []
    assert "+    return a + b" in (repo / "fix.diff").read_text() and (repo / "calc.py").read_text() == FIXED
    return repo


def undo_after_fix(world: World, fix_line: str, undo_line: str) -> None:
    repo = fix_json_patch_out(world, fix_line)
    with FakeChatServer([]) as server:
        proc = world.run(undo_line, repo, server)
    assert proc.returncode == 0, proc.stderr
    assert (repo / "calc.py").read_text() == BUGGY, proc.stdout


def ask(world: World, line: str, repo: Path) -> None:
    view = {"name": "view", "arguments": {"path": "calc.py"}}
    replies = [FakeReply(tool_calls=[view]), FakeReply(text="add subtracts b instead of adding it.")]
    with FakeChatServer(replies) as server:
        proc = world.run(line, repo, server, **_server_env(server))
        question = server.requests[0]["messages"][-1]["content"]
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "add subtracts b instead of adding it.\n" and question == "why does test_calc fail?"


def piped(world: World, line: str, repo: Path) -> None:
    with FakeChatServer([FakeReply(text="The assertion in test_add fails: add(2, 3) is -1.")]) as server:
        proc = world.run(line, repo, server, **_server_env(server))
        prompt = server.requests[0]["messages"][-1]["content"]
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["result"].startswith("The assertion in test_add fails") and report["outcome"] == "answered"
    assert (
        prompt.startswith("explain\n\n") and "assert -1 == 5" in prompt
    )  # pytest's output joined the prompt


def test_every_use_example_runs_as_written(tmp_path: Path) -> None:
    examples = use_examples()
    world = World(tmp_path)
    checks: dict[str, Callable[[str], object]] = {}

    checks["clover fix ISSUE.md --repo path/to/repo --base-url ... --model ... --yes"] = lambda line: (
        fix_elsewhere(world, line)
    )
    checks[FIX_JSON] = lambda line: fix_json_patch_out(world, line)
    checks[UNDO] = lambda line: None  # test_the_undo_example_reverts_the_fix_example
    checks['clover -p "why does test_calc fail?"'] = lambda line: ask(world, line, world.repo())
    checks['pytest -x 2>&1 | clover -p "explain" --output-format json'] = lambda line: piped(
        world, line, world.repo()
    )
    unknown = [
        e
        for e in examples
        if e not in checks and e not in INTERACTIVE_EXACT and not e.startswith(INTERACTIVE)
    ]
    assert not unknown, f"README examples without a check in {__file__}: {unknown}"
    ran = [e for e in examples if e in checks]
    assert ran, "no README example was run"
    for example in ran:
        checks[example](example)


def test_the_undo_example_reverts_the_fix_example(tmp_path: Path) -> None:
    examples = use_examples()
    assert FIX_JSON in examples and UNDO in examples
    undo_after_fix(World(tmp_path), FIX_JSON, UNDO)
