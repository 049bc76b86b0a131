"""The chat prompt: persistent history, Enter sends, Alt-Enter adds a line, pasted text kept
whole, Ctrl-C / Ctrl-D; completion of slash commands, their arguments and @paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from clover.repl.attach import attach_mentions
from clover.repl.completion import ChatCompleter
from clover.repl.input import ChatInput
from clover.repl.slash import help_texts


def _completer(root: Path) -> ChatCompleter:
    return ChatCompleter(root, help_texts(), {"mode": lambda: ("plan", "ask", "auto-edit", "yolo")})


def _complete(completer: ChatCompleter, text: str) -> list[str]:
    return [
        c.text for c in completer.get_completions(Document(text), CompleteEvent(completion_requested=True))
    ]


def test_history_persists_across_sessions(tmp_path: Path) -> None:
    history = tmp_path / "state" / "history"
    with create_pipe_input() as pipe:
        chat = ChatInput(
            history, _completer(tmp_path), tty=True, session_kwargs={"input": pipe, "output": DummyOutput()}
        )
        pipe.send_text("first question\r")
        assert chat.read() == "first question"
        pipe.send_text("/status\r")
        assert chat.read() == "/status"
    assert "+first question" in history.read_text()
    with create_pipe_input() as pipe:
        again = ChatInput(
            history, _completer(tmp_path), tty=True, session_kwargs={"input": pipe, "output": DummyOutput()}
        )
        # Up arrow twice recalls the older entry from the file written by the previous session.
        pipe.send_text("\x1b[A\x1b[A\r")
        assert again.read() == "first question"


def test_multiline_paste_and_interrupts(tmp_path: Path) -> None:
    with create_pipe_input() as pipe:
        chat = ChatInput(
            tmp_path / "history",
            _completer(tmp_path),
            tty=True,
            session_kwargs={"input": pipe, "output": DummyOutput()},
        )
        pipe.send_text("one\x1b\rtwo\r")  # Esc-Enter (= Alt-Enter) adds a line, Enter sends
        assert chat.read() == "one\ntwo"
        pipe.send_text("\x1b[200~def f():\r\n    return 1\r\n\x1b[201~\r")  # bracketed paste
        assert chat.read() == "def f():\n    return 1\n"
        pipe.send_text("half typed\x03")
        with pytest.raises(KeyboardInterrupt):
            chat.read()
        assert chat.interrupted_empty is False
        pipe.send_text("\x03")
        with pytest.raises(KeyboardInterrupt):
            chat.read()
        assert chat.interrupted_empty is True
        pipe.send_text("\x04")
        with pytest.raises(EOFError):
            chat.read()


def test_piped_input_reads_lines(tmp_path: Path) -> None:
    import io

    echo = io.StringIO()
    chat = ChatInput(
        tmp_path / "history", _completer(tmp_path), tty=False, stdin=io.StringIO("hello\ny\n"), echo=echo
    )
    assert chat.read() == "hello"
    assert chat.ask("Allow? ") == "y"
    with pytest.raises(EOFError):
        chat.read()
    assert "› hello" in echo.getvalue() and "Allow? y" in echo.getvalue()
    assert not (tmp_path / "history").exists()  # no history file for piped use


def test_complete_slash_commands_and_arguments(tmp_path: Path) -> None:
    completer = _completer(tmp_path)
    assert _complete(completer, "/he") == ["/help"]
    assert set(_complete(completer, "/")) >= {
        "/help",
        "/model",
        "/think",
        "/mode",
        "/clear",
        "/compact",
        "/undo",
        "/diff",
        "/status",
        "/save",
        "/resume",
        "/exit",
    }
    assert _complete(completer, "/mode a") == ["ask", "auto-edit"]
    assert _complete(completer, "/nothing") == []
    assert _complete(completer, "fix /he") == []  # only at the start of the line


def test_complete_paths_after_at(tmp_path: Path) -> None:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "main.py").write_text("print(1)\n")
    (tmp_path / "setup.cfg").write_text("")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".env").write_text("")
    completer = _completer(tmp_path)
    assert _complete(completer, "look at @s") == ["setup.cfg", "src/"]
    assert _complete(completer, "look at @src/") == ["src/main.py", "src/pkg/"]
    assert _complete(completer, "@src/ma") == ["src/main.py"]
    assert _complete(completer, "@.") == [".env"]  # hidden files when asked for; never .git
    assert _complete(completer, "@../") == []  # nothing outside the workspace
    assert _complete(completer, "email a@s") == []  # an @ inside a word is not a mention


def test_mentions_add_files_to_the_message(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print('hi')\n")
    outside = tmp_path.parent / "secret.txt"
    outside.write_text("nope")
    attached = attach_mentions(
        "explain @src/main.py, and @../secret.txt and @missing.py", tmp_path, room=1000
    )
    assert [rel for rel, _ in attached.added] == ["src/main.py"]
    text = attached.text
    assert text.startswith("explain @src/main.py,")
    assert "<file path=\"src/main.py\">\nprint('hi')\n" in text
    assert "nope" not in text
    assert attached.notes == [
        "@../secret.txt is outside the repository: not attached",
        "@missing.py: no such file in the repository (left as text)",
    ]
    none = attach_mentions("no mentions here", tmp_path, room=1000)
    assert (none.text, none.added, none.notes, none.refusal) == ("no mentions here", [], [], "")
