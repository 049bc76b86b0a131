"""Slash commands. Each handler takes what a command may use (`Commands`: the chat's actions, its
state and its screen) and the argument text; returning True ends the chat."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from rich.table import Table

from clover.settings import MODES

if TYPE_CHECKING:
    from clover.agent_run import RunResult
    from clover.repl.state import ChatState
    from clover.repl.ui import ChatUI


class Commands(Protocol):
    """The chat as a command sees it (app.ChatApp is one)."""

    state: ChatState
    ui: ChatUI

    def switch_model(self, name: str) -> bool: ...
    def set_think(self, on: bool) -> None: ...
    def set_mode(self, mode: str, quiet: bool = False) -> None: ...
    def clear(self) -> None: ...
    def compact(self, forced: bool) -> bool: ...
    def undo(self, redo: bool, arg: str = "") -> None: ...
    def show_diff(self) -> None: ...
    def print_status(self, result: RunResult | None = None, full: bool = False) -> None: ...
    def save(self) -> Path | None: ...
    def resume(self, ref: str | None) -> bool: ...


Handler = Callable[[Commands, str], bool]
COMMANDS: dict[str, tuple[str, Handler]] = {}


def command(name: str, help_text: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        COMMANDS[name] = (help_text, fn)
        return fn

    return register


def help_texts() -> dict[str, str]:
    return {name: help_text for name, (help_text, _) in COMMANDS.items()}


def dispatch(app: Commands, line: str) -> bool:
    """Run a slash command; a unique prefix runs the command it starts (`/st` is /status, as the
    completion menu's first entry is what Enter takes in Claude Code)."""
    name, _, arg = line.strip()[1:].partition(" ")
    entry = COMMANDS.get(name.lower())
    if entry is None:
        close = [c for c in COMMANDS if c.startswith(name.lower())] if name else []
        if len(close) > 1:
            app.ui.renderer.error(f"/{name} is ambiguous: {', '.join('/' + c for c in close)}")
            return False
        if not close:
            app.ui.renderer.error(f"unknown command /{name}; /help lists them")
            return False
        entry = COMMANDS[close[0]]
    return entry[1](app, arg.strip())


@command("help", "list the commands and keys")
def _help(app: Commands, arg: str) -> bool:
    table = Table.grid(padding=(0, 2))
    for name, (help_text, _) in COMMANDS.items():
        table.add_row(f"/{name}", help_text)
    app.ui.console.print(table)
    app.ui.renderer.info(
        "Enter sends · Alt-Enter or Esc Enter adds a line · @path adds a file · !cmd runs cmd here · "
        "Shift+Tab cycles the mode (ask, auto-edit, plan) · Esc or Ctrl-C stops the current step · "
        "at an approval: y yes, a always, n or Esc no · Ctrl-C twice or Ctrl-D exits"
    )
    return False


@command("model", "show the model, or switch: /model NAME")
def _model(app: Commands, arg: str) -> bool:
    if arg:
        app.switch_model(arg)
    else:
        app.ui.renderer.note(f"model: {app.state.model_name()}")
    return False


@command("think", "thinking on or off: /think on|off")
def _think(app: Commands, arg: str) -> bool:
    if arg.lower() not in ("on", "off"):
        app.ui.renderer.note(f"thinking is {'on' if app.state.settings.think else 'off'}; /think on|off")
        return False
    app.set_think(arg.lower() == "on")
    return False


@command("mode", f"permission mode: /mode {'|'.join(MODES)}")
def _mode(app: Commands, arg: str) -> bool:
    if not arg:
        app.ui.renderer.note(f"mode: {app.state.settings.mode}")
    else:
        app.set_mode(arg.lower())
    return False


@command("clear", "start a fresh conversation (a new session)")
def _clear(app: Commands, arg: str) -> bool:
    app.clear()
    return False


@command("compact", "summarise older turns now to free context")
def _compact(app: Commands, arg: str) -> bool:
    app.compact(forced=True)
    return False


@command("undo", "revert what this session's last request changed (yours stays); /undo force")
def _undo(app: Commands, arg: str) -> bool:
    app.undo(redo=False, arg=arg)
    return False


@command("redo", "re-apply what /undo reverted")
def _redo(app: Commands, arg: str) -> bool:
    app.undo(redo=True, arg=arg)
    return False


@command("diff", "the changes made in this session")
def _diff(app: Commands, arg: str) -> bool:
    app.show_diff()
    return False


@command("show", "a tool result in full: /show N (default: the last)")
def _show(app: Commands, arg: str) -> bool:
    if arg and not arg.isdigit():
        app.ui.renderer.error("usage: /show N")
        return False
    app.ui.renderer.show(int(arg) if arg else None)
    return False


@command("last", "the last tool result in full")
def _last(app: Commands, arg: str) -> bool:
    app.ui.renderer.show(None)
    return False


@command("thinking", "the last turn's thinking in full")
def _thinking(app: Commands, arg: str) -> bool:
    app.ui.renderer.info(app.ui.renderer.last_thinking or "no thinking yet")
    return False


@command("permissions", "remembered approvals and rules: /permissions, /permissions remove N")
def _permissions(app: Commands, arg: str) -> bool:
    from clover.repl.permissions_view import forget, show

    verb, _, rest = arg.partition(" ")
    gate, renderer = app.state.gate.inner, app.ui.renderer
    if not arg:
        show(gate, app.state.settings.mode, renderer, app.ui.console)
    elif verb in ("remove", "rm", "forget") and rest.strip().isdigit():
        forget(gate, renderer, int(rest.strip()))
    else:
        app.ui.renderer.error("usage: /permissions, or /permissions remove N (N from the list)")
    return False


@command("status", "model, mode, tokens, context and session totals")
def _status(app: Commands, arg: str) -> bool:
    app.print_status(full=True)
    return False


@command("save", "save the session now (it is also saved as you go)")
def _save(app: Commands, arg: str) -> bool:
    path = app.save()
    app.ui.renderer.note(f"saved session {app.state.session.id} ({path})")
    return False


@command("resume", "continue a saved session: /resume ID, or pick one")
def _resume(app: Commands, arg: str) -> bool:
    if arg or app.ui.approver.menu is not None:  # on a terminal: the picker
        app.save()
        app.resume(arg or "pick")
        return False
    sessions = app.state.store.sessions(str(app.state.root))[-10:]
    if not sessions:
        app.ui.renderer.info("no saved sessions for this repository")
        return False
    table = Table.grid(padding=(0, 2))
    for s in sessions:
        turns = sum(1 for m in s.messages if m.get("role") == "user")
        table.add_row(s.id, f"{turns} requests", s.title or "")
    app.ui.console.print(table)
    app.ui.renderer.info("/resume ID continues one")
    return False


@command("exit", "leave (the session stays saved)")
def _exit(app: Commands, arg: str) -> bool:
    return True


COMMANDS["quit"] = ("leave", _exit)
