"""The chat's session: written as it goes (only once it has a request), started afresh by /clear, and
which saved one to continue: `--continue` / `-c` the latest of this directory, `--resume ID` (or a
prefix, or `last`), `--resume` alone a picker of this directory's sessions (newest first; Esc starts
a new session instead, as in Codex). A continued session is put back whole: its conversation (with
a fresh system prompt: AGENTS.md may have changed), its totals, its transcript on screen. A session
remembers the backend that wrote it (model and server); continuing it on another one is asked first:
on the session's own, on this one (its compactions then say that another model writes the summary),
or a new session."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from clover.core.model_protocol import Message
from clover.prompts import system_prompt
from clover.repl.bang import command_of
from clover.repl.menu import Option
from clover.repl.outputs import OutputStore, SeenLines
from clover.repl.replay import is_request, replay
from clover.repl.sessions import Session, SessionError, new_session_id
from clover.repl.status import Totals

if TYPE_CHECKING:
    from clover.repl.render import Renderer
    from clover.repl.state import ChatState
    from clover.repl.ui import ChatUI

PICK, CONTINUE = "pick", "continue"
PICKER_SIZE = 15
THEIRS, HERE, NEW = "theirs", "here", "new"


def resume(state: ChatState, ui: ChatUI, ref: str | None) -> bool:
    """Continue the session `ref` names (see find), asking first where another backend wrote it;
    False (said) when there is no such session. Leaving the picker keeps the new session."""
    renderer = ui.renderer
    try:
        session = find(state, ui, ref)
    except SessionError as exc:
        renderer.error(str(exc))
        return False
    if session is None:
        started = state.started()
        renderer.info("no session chosen" + ("" if started else f": a new one ({state.session.id})"))
        return True
    if not confirm_backend(state, ui, session):
        renderer.info(f"a new session ({state.session.id}); {session.id} stays saved")
        return True
    restore(state, renderer, session)
    return True


def find(state: ChatState, ui: ChatUI, ref: str | None) -> Session | None:
    """The session `ref` names; None when the picker was left with Esc. Raises SessionError."""
    root = str(state.root)
    if ref == CONTINUE:
        session = state.store.latest(root)
        if session is None:
            raise SessionError(f"no saved session in {root} to continue")
        return session
    if ref == PICK:
        if not ui.tty:
            return state.store.resolve("last", root)
        return pick(state, ui)
    return state.store.resolve(ref, root)


def pick(state: ChatState, ui: ChatUI) -> Session | None:
    sessions = state.store.with_requests(str(state.root))[-PICKER_SIZE:][::-1]
    if not sessions:
        raise SessionError(f"no saved sessions in {state.root} to resume")
    options = [Option(s.id, _label(s)) for s in sessions]
    chosen = ui.input.choose("Resume which session? (Esc: a new one)", options, "")
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


def backend_of(state: ChatState) -> dict[str, str]:
    """What writes the session now: a server's model by its served name, a local one by its spec."""
    url = state.settings.base_url or ""
    return {
        "model": state.model_name() if url else state.settings.model,
        "base_url": url,
        "name": state.model_name(),
    }


def described(backend: dict[str, str]) -> str:
    name = backend.get("name") or backend.get("model") or "?"
    return f"{name} at {backend['base_url']}" if backend.get("base_url") else f"{name} (local)"


def _same(theirs: dict[str, str], mine: dict[str, str]) -> bool:
    if "base_url" not in theirs:  # saved before sessions kept their server: the model's name decides
        return theirs.get("name") in (mine["name"], mine["model"])
    return theirs.get("model") == mine["model"] and theirs["base_url"] == mine["base_url"]


def confirm_backend(state: ChatState, ui: ChatUI, session: Session) -> bool:
    """Whether to continue `session` here. One written by another model or server is not continued
    on this one without asking: the session's own backend (switched to), this one, or a new session."""
    from clover.repl.model_switch import is_local, use_backend

    theirs = session.backend or ({"name": session.model} if session.model else {})
    mine = backend_of(state)
    if not theirs or _same(theirs, mine):  # nothing says who wrote it: nothing to ask
        return True
    question = f"Session {session.id} was written by {described(theirs)}; this chat is on {described(mine)}."
    can_switch = bool(theirs.get("base_url")) or is_local(theirs.get("model", ""))
    options = [Option(THEIRS, f"Continue it on {described(theirs)}", ("s",))] if can_switch else []
    options += [
        Option(HERE, f"Continue it on {described(mine)} (it did not write this session)", ("c",)),
        Option(NEW, "Start a new session instead", ("n",)),
    ]
    choice = _ask(ui, question, options)
    if choice == THEIRS:
        return use_backend(state, ui, theirs["model"], theirs.get("base_url") or None)
    if choice == HERE:
        state.history_by = described(theirs)
        return True
    return False


def _ask(ui: ChatUI, question: str, options: list[Option]) -> str:
    if ui.tty and ui.input.session is not None:
        try:
            return ui.input.choose(question, options, NEW)
        except (EOFError, KeyboardInterrupt):
            return NEW
    ui.renderer.note(question)
    keys = " / ".join(f"[{o.keys[0]}] {o.label}" for o in options)
    try:
        answer = ui.input.ask(f"{keys}: ").strip().lower()
    except EOFError:
        return NEW
    return next((o.value for o in options if answer in (o.keys[0], o.value)), NEW)


def restore(state: ChatState, renderer: Renderer, session: Session) -> None:
    state.outputs_seen = SeenLines()
    state.outputs_seen.load(session.messages, session.result_lines)
    messages = list(session.messages)
    if messages and messages[0].get("role") == "system":
        messages = messages[1:]  # the system prompt is rebuilt: AGENTS.md may have changed
    state.agent.messages[:] = [{"role": "system", "content": system_prompt(state.root, "chat")}, *messages]
    state.session = session
    state.totals = Totals.from_saved(session.totals)
    state.outputs = OutputStore()
    count = requests_of(session)
    state.totals.requests = count
    renderer.note(f"resumed session {session.id} ({count} request{'s' if count != 1 else ''})")
    replay(renderer, messages, state.outputs_seen)


def save(state: ChatState, renderer: Renderer) -> Path | None:
    """Write the session; None when it has no request yet (nothing to resume) or cannot be written."""
    if not state.started():
        return None
    session = state.session
    session.messages = state.agent.messages
    session.model, session.mode = state.model_name(), state.settings.mode
    session.backend = backend_of(state)
    session.result_lines = state.outputs_seen.saved(state.agent.messages)
    session.totals = state.totals.to_saved()
    session.title = session.title or title(state.agent.messages)
    try:
        return state.store.save(session)
    except OSError as exc:
        renderer.error(f"could not save the session: {exc}")
        return None


def fresh(state: ChatState) -> None:
    """A new conversation and session (/clear); the old one stays saved."""
    state.agent.messages[:] = [{"role": "system", "content": system_prompt(state.root, "chat")}]
    state.session = Session(new_session_id(), str(state.root), state.settings.model, state.settings.mode)
    state.outputs = OutputStore()
    state.outputs_seen = SeenLines()
    state.totals = Totals()
    state.context_tokens = 0
    state.history_by = ""


def title(messages: list[Message]) -> str:
    """What the picker lists: the first request, else the first `!command` (never its output)."""
    first = next((m for m in messages if is_request(m)), None)
    if first is not None:
        return str(first["content"]).strip().split("\n")[0][:80]
    users = [str(m.get("content")) for m in messages if m.get("role") == "user"]
    return "!" + command_of(users[0]) if users else ""
