"""The prompt: prompt-toolkit with persistent history, Enter sends, Alt-Enter / Esc-Enter adds a
line, bracketed paste kept whole (prompt-toolkit inserts a paste as one piece, newlines included),
completion of slash commands and @path mentions. Plain line reading when stdin is not a terminal."""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path
from typing import IO, Any

from prompt_toolkit import PromptSession, print_formatted_text
from prompt_toolkit.completion import Completer
from prompt_toolkit.formatted_text import HTML
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings


class ChatInput:
    """`read()` returns the next message; raises EOFError at Ctrl-D / end of input and
    KeyboardInterrupt at Ctrl-C (`interrupted_empty` says whether the line was empty)."""

    def __init__(
        self,
        history_path: Path,
        completer: Completer,
        *,
        tty: bool,
        stdin: IO[str] | None = None,
        echo: IO[str] | None = None,
        session_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.tty = tty
        self.stdin = stdin or sys.stdin
        self.echo = echo
        self.interrupted_empty = False
        self.pending = ""  # typed ahead while the agent worked: whole lines are sent, the rest pre-filled
        self.session: PromptSession[str] | None = None
        self.session_kwargs = session_kwargs or {}
        if tty or session_kwargs:
            history_path.parent.mkdir(parents=True, exist_ok=True)
            self.session = PromptSession(
                history=FileHistory(str(history_path)),
                completer=completer,
                complete_while_typing=True,
                key_bindings=self._bindings(),
                multiline=False,
                enable_open_in_editor=False,
                **(session_kwargs or {}),
            )

    def _bindings(self) -> KeyBindings:
        kb = KeyBindings()

        @kb.add("escape", "enter")
        def _newline(event: Any) -> None:
            event.current_buffer.insert_text("\n")

        @kb.add("c-c")
        def _interrupt(event: Any) -> None:
            self.interrupted_empty = not event.current_buffer.text
            event.app.exit(exception=KeyboardInterrupt(), style="class:aborting")

        return kb

    def type_ahead(self, text: str) -> None:
        self.pending += text

    def read(self, prompt: str = "› ") -> str:
        if self.session is not None:
            self.interrupted_empty = False
            if "\n" in self.pending:  # a line typed ahead and ended with Enter: send it as typed
                line, _, self.pending = self.pending.partition("\n")
                print_formatted_text(HTML(f"<b><ansicyan>{escape(prompt)}</ansicyan></b>{escape(line)}"),
                                     output=self.session.output)
                self.session.history.append_string(line)
                return line
            default, self.pending = self.pending, ""
            return self.session.prompt(HTML(f"<b><ansicyan>{escape(prompt)}</ansicyan></b>"), default=default)
        line = self.stdin.readline()
        if not line:
            raise EOFError
        text = line.rstrip("\n")
        if self.echo is not None:
            self.echo.write(f"{prompt}{text}\n")
            self.echo.flush()
        return text

    def ask(self, question: str) -> str:
        """One answer line (approvals); not kept in the history."""
        if self.session is not None:
            asker: PromptSession[str] = PromptSession(**self.session_kwargs)
            return asker.prompt(HTML(f"<b><ansiyellow>{escape(question)}</ansiyellow></b>"))
        if self.echo is not None:
            self.echo.write(question)
            self.echo.flush()
        line = self.stdin.readline()
        if not line:
            raise EOFError
        if self.echo is not None:
            self.echo.write(line if line.endswith("\n") else line + "\n")
        return line.strip()
