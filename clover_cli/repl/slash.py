"""Slash commands. Each handler takes the chat app and the argument text; returning True ends the chat."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.table import Table

from clover.settings import MODES

if TYPE_CHECKING:
    from clover.repl.app import ChatApp

Handler = Callable[["ChatApp", str], bool]
COMMANDS: dict[str, tuple[str, Handler]] = {}


def command(name: str, help_text: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        COMMANDS[name] = (help_text, fn)
        return fn

    return register


def help_texts() -> dict[str, str]:
    return {name: help_text for name, (help_text, _) in COMMANDS.items()}


def dispatch(app: ChatApp, line: str) -> bool:
    """Run a slash command; a unique prefix runs the command it starts (`/st` is /status, as the
    completion menu's first entry is what Enter takes in Claude Code)."""
    name, _, arg = line.strip()[1:].partition(" ")
    entry = COMMANDS.get(name.lower())
    if entry is None:
        close = [c for c in COMMANDS if c.startswith(name.lower())] if name else []
        if len(close) > 1:
            app.renderer.error(f"/{name} is ambiguous: {', '.join('/' + c for c in close)}")
            return False
        if not close:
            app.renderer.error(f"unknown command /{name}; /help lists them")
            return False
        entry = COMMANDS[close[0]]
    return entry[1](app, arg.strip())


@command("help", "list the commands and keys")
def _help(app: ChatApp, arg: str) -> bool:
    table = Table.grid(padding=(0, 2))
    for name, (help_text, _) in COMMANDS.items():
        table.add_row(f"/{name}", help_text)
    app.console.print(table)
    app.renderer.info(
        "Enter sends · Alt-Enter or Esc Enter adds a line · @path adds a file · !cmd runs cmd here · "
        "Shift+Tab cycles the mode (ask, auto-edit, plan) · Esc or Ctrl-C stops the current step · "
        "at an approval: y yes, a always, n or Esc no · Ctrl-C twice or Ctrl-D exits"
    )
    return False


@command("model", "show the model, or switch: /model NAME")
def _model(app: ChatApp, arg: str) -> bool:
    if arg:
        app.switch_model(arg)
    else:
        app.renderer.note(f"model: {app.model_name()}")
    return False


@command("think", "thinking on or off: /think on|off")
def _think(app: ChatApp, arg: str) -> bool:
    if arg.lower() not in ("on", "off"):
        app.renderer.note(f"thinking is {'on' if app.settings.think else 'off'}; /think on|off")
        return False
    app.set_think(arg.lower() == "on")
    return False


@command("mode", f"permission mode: /mode {'|'.join(MODES)}")
def _mode(app: ChatApp, arg: str) -> bool:
    if not arg:
        app.renderer.note(f"mode: {app.settings.mode}")
    else:
        app.set_mode(arg.lower())
    return False


@command("clear", "start a fresh conversation (a new session)")
def _clear(app: ChatApp, arg: str) -> bool:
    app.clear()
    return False


@command("compact", "summarise older turns now to free context")
def _compact(app: ChatApp, arg: str) -> bool:
    app.compact(forced=True)
    return False


@command("undo", "revert what this session's last request changed (yours stays); /undo force")
def _undo(app: ChatApp, arg: str) -> bool:
    app.undo(redo=False, arg=arg)
    return False


@command("redo", "re-apply what /undo reverted")
def _redo(app: ChatApp, arg: str) -> bool:
    app.undo(redo=True, arg=arg)
    return False


@command("diff", "the changes made in this session")
def _diff(app: ChatApp, arg: str) -> bool:
    app.show_diff()
    return False


@command("show", "a tool result in full: /show N (default: the last)")
def _show(app: ChatApp, arg: str) -> bool:
    if arg and not arg.isdigit():
        app.renderer.error("usage: /show N")
        return False
    app.renderer.show(int(arg) if arg else None)
    return False


@command("last", "the last tool result in full")
def _last(app: ChatApp, arg: str) -> bool:
    app.renderer.show(None)
    return False


@command("thinking", "the last turn's thinking in full")
def _thinking(app: ChatApp, arg: str) -> bool:
    app.renderer.info(app.renderer.last_thinking or "no thinking yet")
    return False


@command("permissions", "remembered approvals and rules: /permissions, /permissions remove N")
def _permissions(app: ChatApp, arg: str) -> bool:
    from clover.repl.permissions_view import forget, show

    verb, _, rest = arg.partition(" ")
    if not arg:
        show(app)
    elif verb in ("remove", "rm", "forget") and rest.strip().isdigit():
        forget(app, int(rest.strip()))
    else:
        app.renderer.error("usage: /permissions, or /permissions remove N (N from the list)")
    return False


@command("status", "model, mode, tokens, context and session totals")
def _status(app: ChatApp, arg: str) -> bool:
    app.print_status(full=True)
    return False


@command("save", "save the session now (it is also saved as you go)")
def _save(app: ChatApp, arg: str) -> bool:
    path = app.save()
    app.renderer.note(f"saved session {app.session.id} ({path})")
    return False


@command("resume", "continue a saved session: /resume ID, or pick one")
def _resume(app: ChatApp, arg: str) -> bool:
    if arg or app.approver.menu is not None:  # on a terminal: the picker
        app.save()
        app.resume(arg or "pick")
        return False
    sessions = app.store.sessions(str(app.root))[-10:]
    if not sessions:
        app.renderer.info("no saved sessions for this repository")
        return False
    table = Table.grid(padding=(0, 2))
    for s in sessions:
        turns = sum(1 for m in s.messages if m.get("role") == "user")
        table.add_row(s.id, f"{turns} requests", s.title or "")
    app.console.print(table)
    app.renderer.info("/resume ID continues one")
    return False


@command("exit", "leave (the session stays saved)")
def _exit(app: ChatApp, arg: str) -> bool:
    return True


COMMANDS["quit"] = ("leave", _exit)
