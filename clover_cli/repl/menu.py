"""One-question menus on the terminal. `choose` (prompt-toolkit's choice input, the `--resume`
picker): arrows and Enter, the option's number or its letter choose at once; Esc gives the option
marked for it. `approve` (the approval question) also takes a typed reply: its keys answer only as
the first key typed while it is shown (a letter when nothing follows it within KEY_GRACE, a
number at once); anything else typed is text, shown under the options and sent with Enter as the
"say what to do instead" reply, so an instruction typed at the question ("please run only
test_add") is never read as keys. Keys typed before the question appeared start that text too."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prompt_toolkit.application import Application, create_app_session, get_app_session
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.input.typeahead import get_typeahead
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.shortcuts.choice_input import ChoiceInput
from prompt_toolkit.styles import Style

from clover.terminal_text import visible

STYLE = Style.from_dict(
    {
        "selected-option": "bold",
        "number": "ansibrightblack",
        "key": "ansibrightblack",
        "question": "bold ansiyellow",
        "typed": "bold",
    }
)
KEY_GRACE = 0.5  # seconds a menu letter waits for a next key: none, it answers; one, it was text
TYPED = "typed"  # approve's answer when the user typed a reply instead of choosing


class _Menu(ChoiceInput[str]):
    """Gone from the screen once answered: the caller prints what was chosen (the menu's own final
    frame would show the arrow's row, not a letter's choice)."""

    def _create_application(self) -> Any:
        app = super()._create_application()
        app.erase_when_done = True
        return app


@dataclass(frozen=True)
class Option:
    value: str
    label: str
    keys: tuple[str, ...] = ()  # letters that choose it at once


def choose(
    question: str,
    options: Sequence[Option],
    *,
    escape: str | None = None,
    input: Any = None,
    output: Any = None,
) -> str:
    """The chosen option's value. Esc gives `escape` (None: Esc does nothing); Ctrl-C raises
    KeyboardInterrupt, Ctrl-D EOFError. `input`/`output`: prompt-toolkit's, for tests."""
    kb = KeyBindings()

    def pick(value: str) -> Any:
        def handler(event: Any) -> None:
            event.app.exit(result=value, style="class:accepted")

        return handler

    for number, option in enumerate(options[:9], 1):
        kb.add(str(number), eager=True)(pick(option.value))
        for key in option.keys:
            kb.add(key, eager=True)(pick(option.value))
    if escape is not None:
        kb.add("escape", eager=True)(pick(escape))

    @kb.add("c-d", eager=True)
    def _closed(event: Any) -> None:
        event.app.exit(exception=EOFError(), style="class:aborting")

    def keys(option: Option) -> str:
        shown = [*option.keys, *(["Esc"] if option.value == escape else [])]
        return f"  ({', '.join(shown)})" if shown else ""

    labels = [(o.value, FormattedText([("", visible(o.label)), ("class:key", keys(o))])) for o in options]
    menu = _Menu(
        message=FormattedText([("class:question", visible(question))]),
        options=labels,
        style=STYLE,
        symbol="❯",
        key_bindings=kb,
    )
    session = (
        create_app_session(input=input, output=output) if input is not None or output is not None else None
    )
    with session or contextlib.nullcontext():
        return menu.prompt()


def _keys_label(option: Option, escape: str | None) -> str:
    shown = [*option.keys, *(["Esc"] if option.value == escape else [])]
    return f"  ({', '.join(shown)})" if shown else ""


def approve(
    question: str,
    options: Sequence[Option],
    *,
    escape: str,
    grace: float = KEY_GRACE,
    input: Any = None,
    output: Any = None,
) -> tuple[str, str]:
    """(an option's value, "") when chosen, or (TYPED, the text) when a reply was typed and sent with
    Enter. Esc gives `escape`; Ctrl-C raises KeyboardInterrupt, Ctrl-D EOFError."""
    asked = _Approval(question, options, escape, grace)
    session = (
        create_app_session(input=input, output=output) if input is not None or output is not None else None
    )
    with session or contextlib.nullcontext():
        # keys typed before the question showed were meant for something else: text, never an answer
        early = get_typeahead(get_app_session().input)
        asked.typed = "".join(k.data for k in early if k.data.isprintable())
        app: Application[tuple[str, str]] = Application(
            layout=Layout(Window(FormattedTextControl(asked.view, show_cursor=False), wrap_lines=True)),
            key_bindings=asked.bindings(),
            style=STYLE,
            erase_when_done=True,
            full_screen=False,
        )
        return app.run()


class _Approval:
    """One approval question as it is answered: the highlighted option and what was typed."""

    def __init__(self, question: str, options: Sequence[Option], escape: str, grace: float) -> None:
        self.question, self.options, self.escape, self.grace = question, options, escape, grace
        self.selected = 0
        self.typed = ""
        self.letters = {key: o.value for o in options for key in o.keys}

    @staticmethod
    def answer(event: Any, value: str, text: str = "") -> None:
        event.app.exit(result=(value, text))

    def type_text(self, event: Any, text: str) -> None:
        first = not self.typed
        self.typed += text
        value = self.letters.get(self.typed) if first and len(text) == 1 else None
        if value is not None:  # a menu letter as the first key: it answers unless a key follows
            app = event.app

            def fire() -> None:
                if self.typed == text and not app.is_done:
                    app.exit(result=(value, ""))

            asyncio.get_running_loop().call_later(self.grace, fire)

    def enter(self, event: Any) -> None:
        typed = self.typed.strip()
        if not typed:
            self.answer(event, self.options[self.selected].value)
        elif typed in self.letters:
            self.answer(event, self.letters[typed])
        else:
            self.answer(event, TYPED, typed)

    def move(self, by: int) -> None:
        self.selected = (self.selected + by) % len(self.options)

    def backspace(self) -> None:
        self.typed = self.typed[:-1]

    def bindings(self) -> KeyBindings:
        kb = KeyBindings()

        @kb.add(Keys.Any)
        def _key(event: Any) -> None:
            if event.data and event.data.isprintable():
                self.type_text(event, event.data)

        @kb.add(Keys.BracketedPaste)
        def _paste(event: Any) -> None:
            self.type_text(event, " ".join(event.data.split()) + " " if event.data.strip() else "")

        for number, option in enumerate(self.options[:9], 1):

            @kb.add(str(number), eager=True)
            def _number(event: Any, value: str = option.value, digit: str = str(number)) -> None:
                if self.typed:
                    self.type_text(event, digit)
                else:
                    self.answer(event, value)

        kb.add("up")(lambda event: self.move(-1))
        kb.add("down")(lambda event: self.move(1))
        kb.add("backspace")(lambda event: self.backspace())
        kb.add("enter")(self.enter)
        kb.add("escape", eager=True)(lambda event: self.answer(event, self.escape))

        @kb.add("c-c", eager=True)
        def _interrupt(event: Any) -> None:
            event.app.exit(exception=KeyboardInterrupt(), style="class:aborting")

        @kb.add("c-d", eager=True)
        def _closed(event: Any) -> None:
            event.app.exit(exception=EOFError(), style="class:aborting")

        return kb

    def view(self) -> FormattedText:
        parts: list[tuple[str, str]] = [("class:question", visible(self.question) + "\n")]
        for i, option in enumerate(self.options):
            chosen = i == self.selected and not self.typed
            parts.append(("class:selected-option" if chosen else "", f"{'❯' if chosen else ' '} {i + 1}. "))
            parts.append(("class:selected-option" if chosen else "", visible(option.label)))
            parts.append(("class:key", _keys_label(option, self.escape) + "\n"))
        if self.typed:
            parts.append(("class:typed", f"› {visible(self.typed)}▏"))
            parts.append(("class:key", "  Enter: refuse and tell Clover this · Esc: no"))
        else:
            parts.append(("class:key", "  or type what Clover should do instead"))
        return FormattedText(parts)
