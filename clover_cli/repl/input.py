"""The prompt: prompt-toolkit with persistent history, Enter sends, Alt-Enter / Esc-Enter adds a
line, bracketed paste kept whole (prompt-toolkit inserts a paste as one piece, newlines included), completion
of slash commands and @path mentions, Shift+Tab cycles the permission mode (shown at the right of the input
line), a hint in the empty line when there is one. Plain line reading when stdin is not a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path
from typing import IO, Any

from prompt_toolkit import PromptSession, print_formatted_text
from prompt_toolkit.application import get_app
from prompt_toolkit.completion import Completer
from prompt_toolkit.filters import completion_is_selected
from prompt_toolkit.formatted_text import HTML
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.styles import Style

from clover.repl.menu import Option, approve, choose
from clover.repl.reflow import install_prompt

PROMPT_STYLE = Style.from_dict({"mode": "ansibrightblack", "hint": "ansibrightblack italic"})


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
        cycle_mode: Callable[[], str] | None = None,
    ) -> None:
        """`cycle_mode`: Shift+Tab's action, returning the new mode; `session_kwargs`: prompt-toolkit's
        input/output (tests, or the terminal on stderr when stdout is redirected)."""
        self.tty = tty
        self.stdin = stdin or sys.stdin
        self.echo = echo
        self.interrupted_empty = False
        self.pending = ""  # typed ahead while the agent worked: whole lines are sent, the rest pre-filled
        self.cycle_mode = cycle_mode
        self.mode = ""  # shown under the prompt
        self.hint = ""  # a one-off line under the prompt (e.g. after a declined call)
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
                rprompt=self._mode_line,
                placeholder=self._placeholder,
                style=PROMPT_STYLE,
                **(session_kwargs or {}),
            )
            install_prompt(self.session.app)  # no ghost of the prompt when the terminal narrows

    def _mode_line(self) -> Any:
        """The permission mode at the right of the input line while it is edited (hidden when the text
        reaches it; not left in the scrollback once the line is sent)."""
        if not self.mode or get_app().is_done:
            return None
        return HTML(f"<mode>⏵ {escape(self.mode)} · shift+tab</mode>")

    def _placeholder(self) -> Any:
        """A hint in the empty input line, e.g. after a declined call: what to type now."""
        return HTML(f"<hint>{escape(self.hint)}</hint>") if self.hint else None

    def _bindings(self) -> KeyBindings:
        kb = KeyBindings()

        @kb.add("escape", "enter")
        def _newline(event: Any) -> None:
            event.current_buffer.insert_text("\n")

        @kb.add("c-c")
        def _interrupt(event: Any) -> None:
            self.interrupted_empty = not event.current_buffer.text
            event.app.exit(exception=KeyboardInterrupt(), style="class:aborting")

        @kb.add("s-tab")
        def _cycle(event: Any) -> None:
            if self.cycle_mode is not None:
                self.mode = self.cycle_mode()
                event.app.invalidate()

        @kb.add("enter", filter=completion_is_selected)
        def _accept_completion(event: Any) -> None:
            """Enter on a highlighted completion takes it; a slash command is then sent at once."""
            buffer = event.current_buffer
            completion = buffer.complete_state.current_completion if buffer.complete_state else None
            if completion is not None:
                buffer.apply_completion(completion)
            if buffer.text.startswith("/") and " " not in buffer.text.strip():
                buffer.validate_and_handle()

        return kb

    def type_ahead(self, text: str) -> None:
        self.pending += text

    def read(self, prompt: str = "› ") -> str:
        if self.session is not None:
            self.interrupted_empty = False
            if "\n" in self.pending:  # a line typed ahead and ended with Enter: send it as typed
                line, _, self.pending = self.pending.partition("\n")
                print_formatted_text(
                    HTML(f"<b><ansicyan>{escape(prompt)}</ansicyan></b>{escape(line)}"),
                    output=self.session.output,
                )
                self.session.history.append_string(line)
                return line
            default, self.pending = self.pending, ""
            try:
                return self.session.prompt(
                    HTML(f"<b><ansicyan>{escape(prompt)}</ansicyan></b>"), default=default
                )
            finally:
                self.hint = ""
        line = self.stdin.readline()
        if not line:
            raise EOFError
        text = line.rstrip("\n")
        if self.echo is not None:
            self.echo.write(f"{prompt}{text}\n")
            self.echo.flush()
        return text

    def choose(self, question: str, options: Sequence[Option], escape_value: str | None) -> str:
        """One key among `options` (a terminal only); see menu.choose."""
        return choose(
            question,
            options,
            escape=escape_value,
            input=self.session_kwargs.get("input"),
            output=self.session_kwargs.get("output"),
        )

    def approve(self, question: str, options: Sequence[Option], escape_value: str) -> tuple[str, str]:
        """An approval: one key, or a typed reply (a terminal only); see menu.approve."""
        return approve(
            question,
            options,
            escape=escape_value,
            input=self.session_kwargs.get("input"),
            output=self.session_kwargs.get("output"),
        )

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
