"""The chat's session: written as it goes (only once it has a request), started afresh by /clear, and
which saved one to continue: `--continue` / `-c` the latest of this directory, `--resume ID` (or a
prefix, or `last`), `--resume` alone a picker of this directory's sessions (newest first; Esc starts
a new session instead, as in Codex). A continued session is put back whole: its conversation (with
a fresh system prompt: AGENTS.md may have changed), its totals, its transcript on screen."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from clover.core.protocols import Message
from clover.prompts import system_prompt
from clover.repl.bang import command_of
from clover.repl.menu import Option
from clover.repl.outputs import OutputStore
from clover.repl.replay import is_request, replay
from clover.repl.sessions import Session, SessionError, new_session_id
from clover.repl.status import Totals

if TYPE_CHECKING:
    from clover.repl.app import ChatApp

PICK, CONTINUE = "pick", "continue"
PICKER_SIZE = 15


def find(app: ChatApp, ref: str | None) -> Session | None:
    """The session `ref` names; None when the picker was left with Esc. Raises SessionError."""
    root = str(app.root)
    if ref == CONTINUE:
        session = app.store.latest(root)
        if session is None:
            raise SessionError(f"no saved session in {root} to continue")
        return session
    if ref == PICK:
        if not app.tty:
            return app.store.resolve("last", root)
        return pick(app)
    return app.store.resolve(ref, root)


def pick(app: ChatApp) -> Session | None:
    sessions = app.store.with_requests(str(app.root))[-PICKER_SIZE:][::-1]
    if not sessions:
        raise SessionError(f"no saved sessions in {app.root} to resume")
    options = [Option(s.id, _label(s)) for s in sessions]
    chosen = app.input.choose("Resume which session? (Esc: a new one)", options, "")
    return next((s for s in sessions if s.id == chosen), None)


def _label(session: Session) -> str:
    when = time.strftime("%m-%d %H:%M", time.localtime(session.updated))
    count = requests_of(session)
    title = session.title or "(untitled)"
    return f"{when} · {count} request{'s' if count != 1 else ''} · {title[:60]}"


def requests_of(session: Session) -> int:
    """What the session's totals counted (older files: the requests its messages still show)."""
    counted = Totals.from_saved(session.totals).requests if session.totals else 0
    return counted or sum(1 for m in session.messages if is_request(m))


def restore(app: ChatApp, session: Session) -> None:
    messages = list(session.messages)
    if messages and messages[0].get("role") == "system":
        messages = messages[1:]  # the system prompt is rebuilt: AGENTS.md may have changed
    app.agent.messages[:] = [{"role": "system", "content": system_prompt(app.root, "chat")}, *messages]
    app.session = session
    app.totals = Totals.from_saved(session.totals)
    app.outputs = OutputStore()
    count = requests_of(session)
    app.totals.requests = count
    app.renderer.note(f"resumed session {session.id} ({count} request{'s' if count != 1 else ''})")
    replay(app.renderer, messages)


def save(app: ChatApp) -> Path | None:
    """Write the session; None when it has no request yet (nothing to resume) or cannot be written."""
    if not any(m.get("role") == "user" for m in app.agent.messages):
        return None
    session = app.session
    session.messages = app.agent.messages
    session.model, session.mode = app.model_name(), app.settings.mode
    session.totals = app.totals.to_saved()
    session.title = session.title or title(app.agent.messages)
    try:
        return app.store.save(session)
    except OSError as exc:
        app.renderer.error(f"could not save the session: {exc}")
        return None


def fresh(app: ChatApp) -> None:
    """A new conversation and session (/clear); the old one stays saved."""
    app.agent.messages[:] = [{"role": "system", "content": system_prompt(app.root, "chat")}]
    app.session = Session(new_session_id(), str(app.root), app.settings.model, app.settings.mode)
    app.outputs = OutputStore()
    app.totals = Totals()
    app.context_tokens = 0


def title(messages: list[Message]) -> str:
    """What the picker lists: the first request, else the first `!command` (never its output)."""
    first = next((m for m in messages if is_request(m)), None)
    if first is not None:
        return str(first["content"]).strip().split("\n")[0][:80]
    users = [str(m.get("content")) for m in messages if m.get("role") == "user"]
    return "!" + command_of(users[0]) if users else ""
