"""Erasing what was drawn after the terminal got narrower. Most terminals (tmux, VTE, iTerm2, kitty,
Alacritty, WezTerm, Windows Terminal, Terminal.app) re-wrap a line wider than the new width onto
several rows, so a region drawn as N rows now takes more, and the cursor sits lower: rich's live
region and prompt-toolkit's prompt, which move up N rows to erase themselves, left the rows above
behind (a ghost copy of the input line, a partial reply above the final text). Both count the rows
after re-wrapping instead. xterm and Konsole cut long lines instead: there rows stay rows."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from prompt_toolkit.application import Application
from rich.console import Console, ConsoleOptions, RenderResult
from rich.control import Control
from rich.live import Live
from rich.live_render import LiveRender
from rich.segment import ControlType


def terminal_reflows(environ: Mapping[str, str] = os.environ) -> bool:
    if environ.get("TMUX"):  # tmux is the terminal drawn on, and it re-wraps
        return True
    return not (environ.get("XTERM_VERSION") or environ.get("KONSOLE_VERSION"))


def rows_after(widths: list[int], width: int, reflows: bool = True) -> int:
    """Rows that lines of these cell widths take once the terminal is `width` columns wide."""
    if not reflows or width <= 0:
        return len(widths)
    return sum(max(1, -(-w // width)) for w in widths)


class ReflowLiveRender(LiveRender):
    """rich's live region, erased by the rows its lines take at the terminal's current width."""

    def __init__(self, console: Console, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.console = console
        self.widths: list[int] = []
        self.reflows = terminal_reflows()

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        segments = list(super().__rich_console__(console, options))
        widths = [0]
        for segment in segments:
            if segment.text == "\n" and not segment.control:
                widths.append(0)
            elif not segment.control:
                widths[-1] += segment.cell_length
        self.widths = widths
        yield from segments

    def _rows(self) -> int:
        return rows_after(self.widths, self.console.size.width, self.reflows) if self.widths else 0

    def position_cursor(self) -> Control:
        if self._shape is None:
            return Control()
        rows = max(self._rows(), 1)
        return Control(
            ControlType.CARRIAGE_RETURN,
            (ControlType.ERASE_IN_LINE, 2),
            *(((ControlType.CURSOR_UP, 1), (ControlType.ERASE_IN_LINE, 2)) * (rows - 1)),
        )

    def restore_cursor(self) -> Control:
        if self._shape is None:
            return Control()
        return Control(
            ControlType.CARRIAGE_RETURN,
            *(((ControlType.CURSOR_UP, 1), (ControlType.ERASE_IN_LINE, 2)) * self._rows()),
        )


def install_live(live: Live) -> None:
    """Give a rich `Live` the re-wrap-aware region (before it starts); rich 13 on (pyproject) draws
    its region with a LiveRender, any other region is kept."""
    old = live._live_render
    if isinstance(old, LiveRender):
        live._live_render = ReflowLiveRender(
            live.console, old.renderable, style=old.style, vertical_overflow=old.vertical_overflow
        )


def install_prompt(app: Application[Any]) -> None:
    """prompt-toolkit erases its prompt on a resize from where it believes the cursor is; after the
    terminal re-wrapped the prompt's rows the cursor is lower. Tell its renderer the real row first
    (prompt-toolkit 3.0.52 on, as pyproject asks, resizes in `_on_resize`)."""
    original = app._on_resize
    reflows = terminal_reflows()

    def on_resize() -> None:
        with contextlib.suppress(Exception):  # private parts moved: erase as prompt-toolkit always did
            _correct_cursor(app)
        original()

    def _correct_cursor(app: Any) -> None:
        renderer = app.renderer
        screen, size = renderer._last_screen, renderer._last_size
        width = app.output.get_size().columns
        if reflows and screen is not None and size is not None and 0 < width < size.columns:
            cursor = renderer._cursor_pos
            widths = [max(screen.data_buffer[y].keys(), default=-1) + 1 for y in range(cursor.y)]
            row = rows_after(widths, width) + cursor.x // width
            renderer._cursor_pos = cursor._replace(y=row)

    app._on_resize = on_resize
