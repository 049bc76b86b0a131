"""The chat as the user meets it, apart from its state (state.py): where it draws (the terminal, or
stderr when stdout is redirected), the renderer, the input line, the approval questions and the
key watcher that lets Esc and Ctrl-D act while the agent works."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from rich.console import Console

from clover.agent_run import RunResult
from clover.repl.approvals import Approver
from clover.repl.completion import ChatCompleter
from clover.repl.console import make_console
from clover.repl.input import ChatInput
from clover.repl.keys import EscWatch
from clover.repl.render import Renderer
from clover.repl.slash import help_texts
from clover.settings import Settings
from clover.terminal_text import visible


class ChatUI:
    def __init__(
        self,
        settings: Settings,
        root: Path,
        home: Path,
        *,
        live: bool = True,
        tty: bool | None = None,
        stdin: IO[str] | None = None,
        console: Console | None = None,
        input_kwargs: dict[str, Any] | None = None,
        completions: dict[str, Callable[[], Iterable[str]]] | None = None,
        cycle_mode: Callable[[], str] | None = None,
    ) -> None:
        terminal = _terminal()  # stdout, or stderr when stdout is redirected: the UI stays on screen
        self.tty = (sys.stdin.isatty() and terminal is not None) if tty is None else tty
        self.transcript = sys.stdout if tty is None and self.tty and terminal is not sys.stdout else None
        self.console = console or make_console(self.tty, terminal if self.tty else None)
        self.renderer = Renderer(self.console, live=live and settings.live and self.tty)
        completer = ChatCompleter(root, help_texts(), completions or {})
        prompt_io = input_kwargs
        if prompt_io is None and self.tty and terminal is not sys.stdout:
            from prompt_toolkit.output import create_output

            prompt_io = {"output": create_output(stdout=terminal)}
        self.input = ChatInput(
            home / "history",
            completer,
            tty=self.tty,
            stdin=stdin,
            echo=None if self.tty else self.console.file,
            session_kwargs=prompt_io,
            cycle_mode=cycle_mode,
        )
        self.input.mode = settings.mode
        menu = self.input.approve if self.tty and self.input.session is not None else None
        self.approver = Approver(self.console, root, self.input.ask, menu=menu)
        self.approver.before_ask, self.approver.after_ask = self._before_question, self._after_question
        # Esc interrupts like Ctrl-C while the agent works (a real terminal only, not a test's pipe).
        self.keys = EscWatch() if self.tty and input_kwargs is None else None
        self.renderer.typed = self._typed
        self.working = False  # the agent is at work on a request

    def banner(self, name: str, settings: Settings, root: Path, default_model: bool) -> None:
        if default_model:
            name += " (the built-in tiny Clover; --model / --base-url pick another)"
        self.renderer.note(f"Clover chat · model {name} · mode {settings.mode} · {root}")
        self.renderer.status(
            "/help · Alt-Enter: new line · !cmd runs it · Shift+Tab: mode · Esc stops · Ctrl-D exits"
        )

    def report(self, result: RunResult, declined: bool) -> None:
        """How the request ended, when it did not end with an answer."""
        renderer = self.renderer
        if self.exit_requested():
            renderer.stop_live()
            renderer.note("⏹ Ctrl-D (input closed): leaving")
        elif result.exit_status == "interrupted":
            renderer.note("⏹ interrupted: back at the prompt, the conversation is kept")
        elif declined:
            renderer.note("⏹ declined: say what Clover should do instead")
            self.input.hint = "the call was declined: tell Clover what to do instead"
        elif result.exit_status != "submitted":
            renderer.error(f"{result.exit_status}: {result.error}")

    def write_transcript(self, text: str, result: RunResult) -> None:
        """With stdout redirected (`clover chat > out.txt`) the file gets each request and answer."""
        if self.transcript is None:
            return
        answer = visible(result.final_text) or f"({result.exit_status})"
        self.transcript.write(f"› {text}\n\n{answer}\n\n")
        self.transcript.flush()

    def exit_requested(self) -> bool:
        """Ctrl-D while the agent worked, or at one of its questions."""
        return (self.keys is not None and self.keys.exit_requested) or self.approver.closed

    def start_keys(self) -> None:
        if self.keys is not None:
            self.keys.start()

    def stop_keys(self) -> None:
        if self.keys is not None:
            self.keys.stop()
            self.input.type_ahead(self.keys.take_typed())

    def back_at_prompt(self, text: str) -> bool:
        """Put `text` at the prompt to be edited or sent again; False where there is no prompt line."""
        if self.input.session is None:
            return False
        self.input.type_ahead(text)
        return True

    def _typed(self) -> str:
        return self.input.pending + (self.keys.preview() if self.keys is not None else "")

    def _before_question(self) -> None:
        self.renderer.stop_live()
        self.stop_keys()  # the question reads the terminal itself

    def _after_question(self) -> None:
        if self.working:
            self.start_keys()


def _terminal() -> IO[str] | None:
    """Where the chat draws: stdout, or stderr when stdout is redirected (`clover chat > out.txt`
    must not hide the questions in the file); None without a terminal."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and stream.isatty():
                return stream
        except (AttributeError, ValueError):
            continue
    return None


def display_name(settings: Settings) -> str:
    """The model as the banner names it before it loads (a script by its file name)."""
    if settings.model.startswith("scripted:"):
        return "scripted:" + Path(settings.model[len("scripted:") :]).name
    return settings.model
