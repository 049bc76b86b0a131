"""Rendering: the diffusion line, tool results cut and shown whole, diffs highlighted on a terminal
and plain in a pipe, thinking folded, approvals' preview diffs equal to what the tools then do."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from clover.core.model_protocol import AssistantTurn, StreamEvent, ToolCall
from clover.core.tool_protocol import ToolResult
from clover.repl.approvals import Approver, edit_preview
from clover.repl.console import make_console
from clover.repl.diffusion_view import DiffusionView
from clover.repl.one_line import describe_call
from clover.repl.render import Renderer
from clover.tools.environment import LocalEnvironment
from clover.tools.files import CreateTool, InsertTool, StrReplaceTool


def _renderer(terminal: bool, live: bool = False) -> tuple[Renderer, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100) if terminal else make_console(False, out)
    return Renderer(console, live=live), out


def test_diffusion_view_fills_masked_positions_round_by_round() -> None:
    view = DiffusionView()
    rounds = [
        [None, None, None, None],
        ["def", None, None, None],
        ["def", " f", "():", None],
        ["def", " f", "():", "\n"],
    ]
    lines = []
    for i, tokens in enumerate(rounds):
        view.update(StreamEvent("block_round", data={"tokens": tokens, "block": 2, "round": i}))
        lines.append(view.plain())
    assert lines[0].endswith("│ ░░░░") and "4/4 masked" in lines[0]
    assert lines[1].endswith("│ def░░░")
    assert lines[3].endswith("│ def f():⏎") and "0/4 masked" in lines[3]
    assert view.filled == 4
    view.update(StreamEvent("block_round", data={"tokens": [None] * 4, "block": 3, "round": 0}))
    assert view.blocks_done == 1 and view.block == 3 and view.rounds == 5 and view.filled == 4


def test_live_view_shows_the_block_while_decoding() -> None:
    renderer, _ = _renderer(terminal=True, live=False)
    renderer.on_event(
        StreamEvent("block_round", data={"tokens": ["x", None, "=", None], "block": 0, "round": 1})
    )
    buf = io.StringIO()
    Console(file=buf, width=100, color_system=None).print(renderer._live_view())
    assert "block 0 · round 1 │ x░=░" in buf.getvalue()
    assert "2 tok · 1 rounds" in buf.getvalue()


def test_turn_settles_thinking_folded_and_answer_as_markdown() -> None:
    renderer, out = _renderer(terminal=True)
    renderer.begin_turn()
    renderer.on_event(StreamEvent("thinking", "Let me look at the file first.\nThen edit it."))
    renderer.on_event(StreamEvent("text", "# Done\nAll **good**."))
    renderer.end_turn(
        AssistantTurn(text="# Done\nAll **good**.", thinking="Let me look at the file first.\nThen edit it.")
    )
    text = out.getvalue()
    assert "\x1b[" in text  # styled on a terminal
    assert "∴ thought for" in text and "Let me look at the file first. Then edit it." in text
    assert "**" not in text  # markdown rendered, not raw


def test_an_edit_verified_by_the_issues_example_says_so() -> None:
    renderer, out = _renderer(terminal=False)
    call = ToolCall("str_replace", {"path": "a.py", "old_str": "x - 1", "new_str": "x + 1"})
    renderer.end_turn(
        AssistantTurn(tool_calls=[call], stats={"verified_edits": 1.0, "reproduction_runs": 2.0})
    )
    assert "running the issue's example" in out.getvalue()
    renderer.end_turn(AssistantTurn(tool_calls=[call], stats={"verified_edits": 0.0}))
    assert out.getvalue().count("issue's example") == 1


def test_tool_results_are_cut_and_shown_whole_on_request() -> None:
    renderer, out = _renderer(terminal=False)
    call = ToolCall("bash", {"command": "seq 1 50", "timeout": 5}, id="c1")
    assert describe_call(call) == "bash(seq 1 50)"
    renderer.tool_call(call)
    number = renderer.tool_result(call, ToolResult("\n".join(str(i) for i in range(1, 51))))
    text = out.getvalue()
    assert number == 1 and "⏺ bash(seq 1 50)" in text and "… 42 more lines (/show 1)" in text
    assert "\n    7\n" not in text and "\n    50\n" in text  # head and tail
    renderer.show(1)
    assert "\n50\n" in out.getvalue()
    renderer.tool_result(ToolCall("view", {"path": "missing.py"}), ToolResult("no such file", is_error=True))
    renderer.show(5)
    assert "✗ 1 line  [2]" in out.getvalue() and "no result 5; there are 2" in out.getvalue()
    assert "\x1b" not in out.getvalue()


def test_diffs_are_highlighted_on_a_terminal() -> None:
    diff = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
    renderer, out = _renderer(terminal=True)
    renderer.tool_result(
        ToolCall("str_replace", {"path": "x.py"}), ToolResult("Edited x.py", data={"diff": diff})
    )
    assert "\x1b[" in out.getvalue() and "a = 2" in out.getvalue()
    plain, plain_out = _renderer(terminal=False)
    plain.tool_result(
        ToolCall("str_replace", {"path": "x.py"}), ToolResult("Edited x.py", data={"diff": diff})
    )
    assert "+a = 2" in plain_out.getvalue() and "\x1b" not in plain_out.getvalue()


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (StrReplaceTool(), {"path": "m.py", "old_str": "b = 2\n", "new_str": "b = 3\nc = 4\n"}),
        (CreateTool(), {"path": "new/n.py", "file_text": "x = 1\n"}),
        (CreateTool(), {"path": "m.py", "file_text": "rewritten = 0\n"}),
        (InsertTool(), {"path": "m.py", "insert_line": 1, "text": "inserted = 1"}),
        (
            InsertTool(),
            {"path": "m.py", "insert_line": 3, "text": "at_the_end = 6\n"},
        ),  # valid: edits keep .py parsing
    ],
)
def test_preview_diff_is_what_the_tool_does(tmp_path: Path, tool: object, args: dict) -> None:
    (tmp_path / "m.py").write_text("a = 1\nb = 2\nd = 5\n")
    env = LocalEnvironment(str(tmp_path))
    preview = edit_preview(tool, args, env)  # type: ignore[arg-type]
    assert preview is not None
    result = tool.run(args, env)  # type: ignore[attr-defined]
    assert not result.is_error, result.output
    assert preview == result.data["diff"]


def test_preview_shows_nothing_for_an_edit_the_tool_refuses(tmp_path: Path) -> None:
    # old_str occurs twice: the tool refuses, so no diff is offered for approval (one used to be).
    (tmp_path / "m.py").write_text("x = 1\nx = 1\n")
    env = LocalEnvironment(str(tmp_path))
    args = {"path": "m.py", "old_str": "x = 1\n", "new_str": "x = 2\n"}
    assert edit_preview(StrReplaceTool(), args, env) is None
    assert StrReplaceTool().run(args, env).is_error
    assert edit_preview(None, {"path": "m.py"}, env) is None  # a tool without a dry run
    out = io.StringIO()
    approver = Approver(make_console(False, out), tmp_path, lambda q: "y")
    ok = {"path": "m.py", "old_str": "x = 1\nx = 1\n", "new_str": "y = 2\n"}
    assert approver(ToolCall("str_replace", ok, id="c1"), StrReplaceTool(), "") == "yes"
    assert "+y = 2" in out.getvalue() and "c1" in approver.previewed


def test_approver_shows_the_command_and_maps_answers(tmp_path: Path) -> None:
    out = io.StringIO()
    answers = iter(["maybe", "", "A"])
    approver = Approver(make_console(False, out), tmp_path, lambda q: next(answers))
    call = ToolCall("bash", {"command": "rm -rf build"}, id="c9")
    assert approver(call, None, "needs approval") == "always"  # type: ignore[arg-type]
    assert "rm -rf build" in out.getvalue() and "please answer y, n or a" in out.getvalue()

    def closed(question: str) -> str:
        raise EOFError

    assert Approver(make_console(False, out), tmp_path, closed)(call, None, "") == "no"  # type: ignore[arg-type]
