"""The chat's context window as the user meets it: compacting the conversation with progress on
screen (the summary itself is compaction.py's), and @mentions attached only when they fit in the
room the context has left (attach.py reads and checks the files)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from clover.loop_guard import TRUNCATED
from clover.prompts import instructions_file, system_prompt
from clover.repl import compaction
from clover.repl.attach import attach_mentions

if TYPE_CHECKING:
    from clover.repl.render import Renderer
    from clover.repl.state import ChatState
    from clover.repl.ui import ChatUI

ANSWER_ROOM = 4  # a quarter of the context stays free for the answer and the tools


def attach(state: ChatState, ui: ChatUI, text: str) -> str | None:
    """The message with its @mentions attached; None (said, and the text back at the prompt) when
    they do not fit in the context."""
    window = state.model.context_window
    room = window - state.used_tokens() - window // ANSWER_ROOM if window else None
    attached = attach_mentions(text, state.root, room, window)
    for note in attached.notes:
        ui.renderer.warn(note)
    if attached.refusal:
        ui.renderer.error(attached.refusal)
        ui.back_at_prompt(text)  # to be edited
        return None
    for rel, tokens in attached.added:
        ui.renderer.info(f"added @{rel} to the context (~{tokens:,} tokens)")
    return attached.text


def compact(state: ChatState, renderer: Renderer, forced: bool) -> bool:
    """Summarise the older turns; True when the conversation got smaller (the caller saves it)."""
    task = compaction.task_state(state.current_request, _git_status(state.root))
    if state.history_by:  # the summary replaces turns this model did not write: say so first
        renderer.warn(
            f"compacting with {state.model_name()}: it summarises turns written by {state.history_by} "
            "(the session file keeps the summary in their place)"
        )
    renderer.begin_progress("compacting: the model summarises the older turns")
    try:
        done = compaction.compact(
            state.agent.messages,
            state.model.inner,
            system_prompt=system_prompt(state.root, "chat"),
            task_state=task,
            window=state.model.context_window,
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
    state.context_tokens = 0
    how = "a summary by the model" if done.by_model else "a list of the earlier requests"
    if done.cut:
        how = f"a summary by the model, cut short ({TRUNCATED.get(done.cut, done.cut)})"
    instructions = instructions_file(state.root)
    kept = f"{instructions[0]} and the task" if instructions else "the task"
    say = renderer.warn if done.cut else renderer.note
    say(f"⟳ context compacted: {done.removed} older messages → {how} ({sizes}; {kept} re-injected)")
    return True


def _git_status(root: Path) -> str:
    from clover.tools.git.gitporcelain import status_short
    from clover.tools.git.hostgit import HostGitError

    try:  # libgit2: nothing planted in .git/config runs
        return status_short(root).split("\n", 1)[1]
    except (HostGitError, OSError, IndexError):
        return ""
