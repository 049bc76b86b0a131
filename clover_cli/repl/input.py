"""The prompt: prompt-toolkit with persistent history, Enter sends, Alt-Enter / Esc-Enter adds a
line, bracketed paste kept whole (a long paste is `[Pasted text #1 +300 lines]` while the line is
edited, as in Claude Code; the message sent, the history and the scrollback get all of it), completion
of slash commands and @path mentions, Shift+Tab cycles the permission mode (shown at the right of the input
line), a hint in the empty line when there is one. Plain line reading when stdin is not a terminal."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path
from typing import IO, Any

from prompt_toolkit import PromptSession, print_formatted_text
from prompt_toolkit.application import get_app
from prompt_toolkit.completion import Completer
from prompt_toolkit.filters import completion_is_selected
from prompt_toolkit.formatted_text import HTML, FormattedText
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.styles import Style

from clover.repl.menu import Option, approve, choose
from clover.repl.reflow import install_prompt
from clover.terminal_text import visible

PROMPT_STYLE = Style.from_dict({"mode": "ansibrightblack", "hint": "ansibrightblack italic"})
PASTE_LINES = 3  # a paste of more lines than this, or of more characters than PASTE_CHARS, is a
PASTE_CHARS = 1000  # placeholder while the line is edited (the terminal shows its last rows only)
_PLACEHOLDER = re.compile(r"\[Pasted text #(\d+) \+\d+ lines?\]")


class Pastes:
    """The long pastes of this chat, by number; `expand` puts them back in place of their placeholders."""

    def __init__(self) -> None:
        self.blocks: list[str] = []

    def add(self, text: str) -> str:
        self.blocks.append(text)
        lines = text.rstrip("\n").count("\n") + 1
        return f"[Pasted text #{len(self.blocks)} +{lines} line{'s' if lines != 1 else ''}]"

    def used(self, text: str) -> list[str]:
        return [self.blocks[int(n) - 1] for n in _PLACEHOLDER.findall(text) if 0 < int(n) <= len(self.blocks)]

    def expand(self, text: str) -> str:
        def block(m: re.Match[str]) -> str:
            n = int(m.group(1))
            return self.blocks[n - 1] if 0 < n <= len(self.blocks) else m.group(0)

        return _PLACEHOLDER.sub(block, text)


class PasteHistory(FileHistory):
    """The history keeps what was sent: a paste's text, not its placeholder."""

    def __init__(self, path: str, pastes: Pastes) -> None:
        super().__init__(path)
        self.pastes = pastes

    def append_string(self, string: str) -> None:
        super().append_string(self.pastes.expand(string))


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
        self.pastes = Pastes()
        if tty or session_kwargs:
            history_path.parent.mkdir(parents=True, exist_ok=True)
            self.session = PromptSession(
                history=PasteHistory(str(history_path), self.pastes),
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

        @kb.add(Keys.BracketedPaste)
        def _paste(event: Any) -> None:
            text = event.data.replace("\r\n", "\n").replace("\r", "\n")
            if text.count("\n") >= PASTE_LINES or len(text) > PASTE_CHARS:
                text = self.pastes.add(text)
            event.current_buffer.insert_text(text)

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
                text = self.session.prompt(
                    HTML(f"<b><ansicyan>{escape(prompt)}</ansicyan></b>"), default=default
                )
            finally:
                self.hint = ""
            for block in self.pastes.used(text):  # the whole paste in the scrollback, under its line
                shown = FormattedText([("ansibrightblack", visible(block.rstrip("\n")))])
                print_formatted_text(shown, output=self.session.output)
            return self.pastes.expand(text)
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
