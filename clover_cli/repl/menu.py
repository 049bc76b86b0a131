"""A one-question menu on the terminal (prompt-toolkit's choice input): arrows and Enter, the option's
number, or its own letter (`y`, `a`, `n`) choose at once, without Enter, as in Claude Code's
approval menu; Esc gives the option marked for it. Used by approvals and the `--resume` picker."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prompt_toolkit.application import create_app_session
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.shortcuts.choice_input import ChoiceInput
from prompt_toolkit.styles import Style

STYLE = Style.from_dict(
    {
        "selected-option": "bold",
        "number": "ansibrightblack",
        "key": "ansibrightblack",
        "question": "bold ansiyellow",
    }
)


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

    labels = [(o.value, FormattedText([("", o.label), ("class:key", keys(o))])) for o in options]
    menu = _Menu(
        message=FormattedText([("class:question", question)]),
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
