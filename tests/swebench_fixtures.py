"""Small SWE-bench-format instances built from real temporary git repositories, and models for
batch-runner tests.

Each instance is its own tiny package `calc` whose `combine` returns `a - b` instead of `a + b`:
the base commit has the bug and one passing test; the test patch adds a failing test
(FAIL_TO_PASS) and keeps the old one (PASS_TO_PASS); the gold patch fixes the source. `repo` is
the repository's path, as synthfix instances have it (swebench's spec map does not know it).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clover.core.model_protocol import (
    AssistantTurn,
    EventHandler,
    Message,
    ModelCapabilities,
    ToolCall,
    ToolSpec,
)
from clover.core.stops import ModelError

SOURCE = '''"""Tiny calculator."""


def combine(a, b):
    """Return the sum of a and b."""
    return a {op} b


def double(a):
    return 2 * a
'''

OLD_TEST = """from calc.core import double


def test_double():
    assert double(3) == 6
"""

NEW_TEST = (
    OLD_TEST.replace("import double", "import combine, double")
    + """

def test_combine_adds():
    assert combine(2, 3) == 5
"""
)

# The fix every fixture needs: one shell command, as a scripted agent would run it.
FIX_COMMAND = "sed -i 's/return a - b/return a + b/' calc/core.py && python -c 'print(1)'"


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def _diff_after(repo: Path, path: str, text: str) -> str:
    """The diff that turns the committed file at `path` into `text` (the tree is restored)."""
    target = repo / path
    old = target.read_text() if target.exists() else None
    target.write_text(text)
    diff = _git(repo, "diff", "--", path)
    if old is None:
        target.unlink()
    else:
        target.write_text(old)
    return diff


def make_instance(root: Path, name: str = "fixture__calc-1") -> dict[str, Any]:
    """A git repository under `root` and its SWE-bench row (with the JSON-string list fields)."""
    repo = root / name
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("")
    (repo / "calc" / "core.py").write_text(SOURCE.format(op="-"))
    (repo / "tests" / "test_core.py").write_text(OLD_TEST)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "calc with a bug")
    base = _git(repo, "rev-parse", "HEAD").strip()
    return {
        "repo": str(repo),
        "instance_id": name,
        "base_commit": base,
        "patch": _diff_after(repo, "calc/core.py", SOURCE.format(op="+")),
        "test_patch": _diff_after(repo, "tests/test_core.py", NEW_TEST),
        "problem_statement": f"combine() subtracts instead of adding. [{name}]",
        "hints_text": "",
        "created_at": "2024-01-01T00:00:00Z",
        "version": "0.1",
        "FAIL_TO_PASS": json.dumps(["tests/test_core.py::test_combine_adds"]),
        "PASS_TO_PASS": json.dumps(["tests/test_core.py::test_double"]),
        "environment_setup_commit": base,
    }


def write_dataset(root: Path, n: int = 1) -> tuple[Path, list[dict[str, Any]]]:
    rows = [make_instance(root, f"fixture__calc-{i + 1}") for i in range(n)]
    path = root / "dataset.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


def fix_script() -> list[dict[str, Any]]:
    """ScriptedModel turns that fix any fixture instance: one bash call, then a summary."""
    return [
        {"tool_calls": [{"name": "bash", "arguments": {"command": FIX_COMMAND}}]},
        {"text": "combine() now adds."},
    ]


@dataclass
class FixtureModel(ModelCapabilities):
    """Fixes every instance like the script above, except: the instance named in `raise_for`
    fails with a model error, and the one in `crash_for` kills its worker process (os._exit) while
    the file `crash_once` exists (it is removed first, so a resumed run goes through).
    Every call is logged to `calls_log` as "<instance> <step> <pid>" lines."""

    calls_log: str
    raise_for: str | None = None
    crash_for: str | None = None
    crash_once: str | None = None
    delay: float = 0.0  # seconds before the first answer (lets a second worker take the next instance)
    name: str = "fixture-model"
    context_window: int = 32768

    def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        on_event: EventHandler | None = None,
        options: object = None,
    ) -> AssistantTurn:
        task = next(m["content"] for m in messages if m["role"] == "user")
        iid = task.split("[", 1)[1].split("]", 1)[0]
        step = sum(m["role"] == "assistant" for m in messages) + 1
        with open(self.calls_log, "a") as fh:
            fh.write(f"{iid} {step} {os.getpid()}\n")
        if iid == self.crash_for and self.crash_once and os.path.exists(self.crash_once):
            os.unlink(self.crash_once)
            os._exit(17)  # as if the worker were killed
        if iid == self.raise_for:
            raise ModelError("fixture: model server unreachable")
        if step == 1:
            time.sleep(self.delay)
            call = ToolCall("bash", {"command": FIX_COMMAND})
            return AssistantTurn(
                tool_calls=[call],
                prompt_tokens=100,
                completion_tokens=20,
                stats={"forwards": 5.0, "tokens_per_forward": 4.0},
            )
        return AssistantTurn(
            text="fixed",
            prompt_tokens=150,
            completion_tokens=10,
            stats={"forwards": 10.0, "tokens_per_forward": 1.0},
        )
