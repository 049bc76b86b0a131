"""The chat's context window as the user meets it: compacting the conversation with progress on
screen (the summary itself is compaction.py's), and @mentions attached only when they fit in the
room the context has left (attach.py reads and checks the files)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from clover.prompts import instructions_file, system_prompt
from clover.repl import compaction
from clover.repl.attach import attach_mentions
from clover.repl.guard import TRUNCATED

if TYPE_CHECKING:
    from clover.repl.app import ChatApp

ANSWER_ROOM = 4  # a quarter of the context stays free for the answer and the tools


def attach(app: ChatApp, text: str) -> str | None:
    """The message with its @mentions attached; None (said, and the text back at the prompt) when
    they do not fit in the context."""
    window = app.model.context_window
    room = window - app.used_tokens() - window // ANSWER_ROOM if window else None
    attached = attach_mentions(text, app.root, room, window)
    for note in attached.notes:
        app.renderer.warn(note)
    if attached.refusal:
        app.renderer.error(attached.refusal)
        if app.input.session is not None:
            app.input.type_ahead(text)  # back at the prompt, to be edited
        return None
    for rel, tokens in attached.added:
        app.renderer.info(f"added @{rel} to the context (~{tokens:,} tokens)")
    return attached.text


def compact(app: ChatApp, forced: bool) -> bool:
    """Summarise the older turns; True when the conversation got smaller."""
    renderer = app.renderer
    state = compaction.task_state(app.current_request, _git_status(app.root))
    if app.history_by:  # the summary replaces turns this model did not write: say so first
        renderer.warn(
            f"compacting with {app.model_name()}: it summarises turns written by {app.history_by} "
            "(the session file keeps the summary in their place)"
        )
    renderer.begin_progress("compacting: the model summarises the older turns")
    try:
        done = compaction.compact(
            app.agent.messages,
            app.model.inner,
            system_prompt=system_prompt(app.root, "chat"),
            task_state=state,
            window=app.model.context_window,
            keep_tokens=0 if forced else None,
            on_event=renderer.on_event,
        )
    except KeyboardInterrupt:
        renderer.stop_live()
        renderer.note("compaction interrupted; the conversation is unchanged")
        return False
    finally:
        renderer.stop_live()
    if done is None:
        renderer.info("nothing to compact yet")
        return False
    sizes = f"~{done.before_tokens:,} → ~{done.after_tokens:,} tokens"
    if not done.applied:
        renderer.warn(f"compaction would not shrink the conversation ({sizes}); it is unchanged")
        return False
    app.context_tokens = 0
    how = "a summary by the model" if done.by_model else "a list of the earlier requests"
    if done.cut:
        how = f"a summary by the model, cut short ({TRUNCATED.get(done.cut, done.cut)})"
    instructions = instructions_file(app.root)
    kept = f"{instructions[0]} and the task" if instructions else "the task"
    say = renderer.warn if done.cut else renderer.note
    say(f"⟳ context compacted: {done.removed} older messages → {how} ({sizes}; {kept} re-injected)")
    app.save()
    return True


def _git_status(root: Path) -> str:
    from clover.tools.hostgit import HostGitError, status_short

    try:  # libgit2: nothing planted in .git/config runs
        return status_short(root).split("\n", 1)[1]
    except (HostGitError, OSError, IndexError):
        return ""
