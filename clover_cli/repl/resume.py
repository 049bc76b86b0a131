"""Which saved session to continue: `--continue` / `-c` the latest of this directory, `--resume ID`
(or a prefix, or `last`), `--resume` alone a picker of this directory's sessions (newest first; Esc
starts a new session instead, as in Codex). The session is then put back into the chat: its
conversation (with a fresh system prompt: AGENTS.md may have changed), its totals, its transcript."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from clover.prompts import system_prompt
from clover.repl.menu import Option
from clover.repl.outputs import OutputStore
from clover.repl.replay import is_request, replay
from clover.repl.sessions import Session, SessionError
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
    app.outputs = OutputStore(session.outputs_dir(app.store))
    count = requests_of(session)
    app.totals.requests = count
    app.renderer.note(f"resumed session {session.id} ({count} request{'s' if count != 1 else ''})")
    replay(app.renderer, messages)
