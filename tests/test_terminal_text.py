"""terminal_text.visible and the guarded console; the approval menu's first-key rule."""

from __future__ import annotations

import io
import time

from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.markdown import Markdown
from rich.text import Text

from clover.repl.approvals import ALWAYS, NO, PREFIX, YES, typed_reply
from clover.repl.menu import TYPED, Option, approve
from clover.repl.toolview import LONG_LINE, clean, mark_long_lines
from clover.terminal_text import GuardedConsole, visible


def test_controls_become_visible_escapes_and_newlines_and_tabs_stay() -> None:
    text = "a\x1b[2Jb\x07c\u202ed\r\ne\rf\udcff\x9bg\th\u200bi\U000e0041\x00"
    assert visible(text) == "a\\e[2Jb\\ac\\u202ed\ne\\rf\\xff\\x9bg\th\\u200bi\\U000e0041\\0"
    assert visible("plain text, 中文, émoji 🙂\n") == "plain text, 中文, émoji 🙂\n"
    assert visible(visible(text)) == visible(text)  # escaping twice changes nothing


def test_the_console_neutralises_every_text_and_keeps_its_own_styling() -> None:
    out = io.StringIO()
    console = GuardedConsole(file=out, force_terminal=True, color_system="standard", width=80)
    console.print(Text("hi \x1b]52;c;aGk=\x1b\\ there", style="bold red"))
    console.print(Markdown("**b** \x1b[2A\x1b[2K"))
    written = out.getvalue()
    assert "\x1b]52" not in written and "\x1b[2A" not in written
    assert "\\e]52;c;aGk=" in written and "\\e[2A\\e[2K" in written
    assert "\x1b[1;31m" in written  # the style is rich's own escape, kept


def test_tool_output_drops_colours_and_shows_other_controls() -> None:
    assert clean("\x1b[32mok\x1b[0m 10%\r90%\n\x1b]52;c;eA==\x07x\x9b2J") == "90%\nx\\x9b2J"


def test_long_diff_lines_are_marked_where_they_are_cut() -> None:
    line = "+" + "x" * (LONG_LINE + 50)
    assert mark_long_lines(line).endswith("⟪… 51 more characters on this line⟫")
    assert mark_long_lines("+short") == "+short"


OPTIONS = [
    Option(YES, "Yes", ("y",)),
    Option(ALWAYS, "Always", ("a",)),
    Option(PREFIX, "Prefix", ("p",)),
    Option(NO, "No", ("n",)),
]


def _approve(keys: str, **kwargs: object) -> tuple[str, str]:
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        return approve("Allow?", OPTIONS, escape=NO, input=pipe, output=DummyOutput(), **kwargs)


def test_a_menu_key_answers_only_as_the_first_and_only_key() -> None:
    started = time.monotonic()
    assert _approve("y", grace=0.05) == (YES, "")
    assert time.monotonic() - started < 5
    assert _approve("3") == (PREFIX, "")  # a number answers at once
    assert _approve("\x1b[B\r") == (ALWAYS, "")
    assert _approve("\x1b") == (NO, "")
    # a sentence is the reply, never keys: neither `p` (prefix) nor the `a` of "please" answers
    assert _approve("please run only test_add\r") == (TYPED, "please run only test_add")
    assert _approve("p\r") == (PREFIX, "")
    assert _approve("\x1b[200~line one\nline two\x1b[201~\r") == (TYPED, "line one line two")


def test_a_typed_reply_is_a_no_with_the_users_words_unless_it_names_an_answer() -> None:
    assert typed_reply("please run only test_add", OPTIONS) == (NO, "please run only test_add")
    assert typed_reply("stop", OPTIONS) == (NO, "stop")
    assert typed_reply("yes", OPTIONS) == (YES, "")
    assert typed_reply("always", OPTIONS) == (ALWAYS, "")
    assert typed_reply("no, use pytest -x", OPTIONS) == (NO, "use pytest -x")
