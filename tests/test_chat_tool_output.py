"""Tool results on screen: escapes stripped, `\\r` progress collapsed, head and tail with the exit
code, a one-line `path +N -M` per edit, and every edit's diff shown (call ids repeat across requests)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from clover.backends.scripted import ScriptedModel
from clover.core.model_protocol import ToolCall
from clover.core.tool_protocol import ToolResult
from clover.repl.app import ChatApp
from clover.repl.console import make_console
from clover.repl.render import Renderer
from clover.repl.toolview import clean, edit_summary, tail_lines
from clover.settings import Settings
from tests.clihelp import git_repo


def _renderer() -> tuple[Renderer, io.StringIO]:
    out = io.StringIO()
    return Renderer(make_console(False, out), live=False), out


def test_clean_strips_escapes_and_keeps_the_last_progress_state() -> None:
    raw = "\x1b[32mPASSED\x1b[0m \x1b]0;title\x07ok\r\n 10%\r 50%\r100%\nnext\x08line\n"
    assert clean(raw) == "PASSED ok\n100%\nnextline\n"


def test_bash_output_shows_head_tail_and_exit_code() -> None:
    renderer, out = _renderer()
    body = "\n".join(f"\x1b[1mline {i}\x1b[0m" for i in range(1, 31))
    body += "\n[ 50%]\r[100%]\n===== 3 failed, 9 passed in 0.5s ====="
    renderer.tool_result(
        ToolCall("bash", {"command": "pytest"}, id="c1"),
        ToolResult(f"{body}\n[exit code 1]", data={"returncode": 1}, exit_code=1),
    )
    text = out.getvalue()
    assert "⎿ ✗ 32 lines · exit 1  [1]" in text
    assert "line 1\n" in text and "line 4\n" in text and "line 5\n" not in text
    assert "… 24 more lines (/show 1)" in text
    assert "[100%]" in text and "[ 50%]" not in text
    assert "3 failed, 9 passed" in text  # the summary at the end is on screen
    assert "\x1b" not in text and "[exit code" not in text


def test_edit_result_is_one_summary_line_even_when_the_diff_is_folded() -> None:
    renderer, out = _renderer()
    diff = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n-x = 1\n+x = 2\n y = 3\n"
    renderer.tool_result(
        ToolCall("str_replace", {"path": "calc.py"}, id="c"),
        ToolResult("edited", data={"path": "calc.py", "diff": diff}),
        diff_shown=True,
    )
    assert "⎿ ✓ calc.py +1 -1  [1]" in out.getvalue()
    assert "+x = 2" not in out.getvalue()
    assert edit_summary("a.py", "+++ b/a.py\n+1\n+2\n-3\n") == "a.py +2 -1"


def test_live_tail_of_a_running_command() -> None:
    assert tail_lines("a\n\x1b[31mb\x1b[0m\n 1%\r99%\n\n", 2, 10) == ["b", "99%"]
    assert tail_lines("x" * 30, 1, 10) == ["x" * 9 + "…"]


def _repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "repo", {"calc.py": "a = 1\nb = 2\n"})


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLOVER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "home"


def _edit(old: str, new: str) -> dict:
    return {
        "tool_calls": [
            {"name": "str_replace", "arguments": {"path": "calc.py", "old_str": old, "new_str": new}}
        ]
    }


def test_two_edits_in_one_session_both_show_their_diff(tmp_path: Path, home: Path) -> None:
    repo = _repo(tmp_path)
    out = io.StringIO()
    turns = [_edit("a = 1", "a = 10"), {"text": "one"}, _edit("b = 2", "b = 20"), {"text": "two"}]
    app = ChatApp(
        Settings(mode="ask"),
        repo,
        live=False,
        tty=False,
        stdin=io.StringIO("y\n"),
        console=Console(file=out, force_terminal=False, color_system=None, width=100),
        model=ScriptedModel(turns),
    )
    app.ask("first")  # approved with its preview: the diff is shown once, before the question
    app.set_mode("auto-edit")  # no approval now: the diff must come with the result
    app.ask("second")  # the agent numbers its calls per request: the same id as the first edit
    text = out.getvalue()
    assert text.count("+a = 10") == 1 and text.count("+b = 20") == 1
    assert "⎿ ✓ calc.py +1 -1  [1]" in text and "⎿ ✓ calc.py +1 -1  [2]" in text


def test_environment_passes_output_on_as_it_arrives(tmp_path: Path) -> None:
    from clover.tools.environment import LocalEnvironment

    env = LocalEnvironment(str(tmp_path))
    seen: list[str] = []
    env.on_output = seen.append
    result = env.execute("echo one; echo two >&2")
    assert "".join(seen) == result.output and "one" in result.output and "two" in result.output
