"""/undo, /redo and /diff in the chat: the plan first (confirmed on a terminal), then what was done;
the options as the chat spells them (`/undo force`, not the command line's `--force`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clover.repl.render import Renderer
    from clover.repl.state import ChatState
    from clover.repl.ui import ChatUI

# clover undo's plan names its command-line flag; in the chat the same choice is `/undo force`
CLI_FORCE_HINT = "  (--force overwrites a conflicting file after saving your version)"
CHAT_FORCE_HINT = "  (/undo force overwrites a conflicting file after saving your version)"


def _chat_form(line: str) -> str:
    return CHAT_FORCE_HINT if line == CLI_FORCE_HINT else line


def undo(state: ChatState, ui: ChatUI, redo: bool, arg: str = "") -> None:
    """/undo, /redo: this session's latest request, exactly what its steps changed; the plan is
    shown first and, on a terminal, confirmed. `arg`: `force` also overwrites paths changed
    since (the user's version saved first), `yes` does not ask."""
    from clover.tools.undo import undoreport
    from clover.tools.undo.checkpoints import SnapshotError

    if state.recorder is None:
        ui.renderer.error("checkpoints are off or unavailable here")
        return
    words, store = set(arg.split()), state.recorder.checkpoints
    force = "force" in words
    try:
        group, plan = store.plan(redo=redo, session=state.session.id, force=force)
    except SnapshotError as exc:
        ui.renderer.error(
            f"{exc} (clover undo --list shows every session's requests)"
            if "nothing" in str(exc)
            else str(exc)
        )
        return
    for line in undoreport.describe(store.repo, group, plan):
        ui.renderer.info(line)
    if not (plan.actions or plan.moves or plan.settled):
        ui.renderer.error("nothing can be done: every path conflicts")
        return
    if ui.tty and "yes" not in words:
        try:
            answer = ui.input.ask(f"{'Redo' if redo else 'Undo'} this? [y/N] ")
        except (EOFError, KeyboardInterrupt):
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            ui.renderer.info("nothing was done")
            return
    try:
        _group, outcome = store.apply(plan, session=state.session.id, force=force)
    except (SnapshotError, OSError) as exc:
        ui.renderer.error(str(exc))
        return
    lines = undoreport.summary(outcome, redo)
    ui.renderer.note(("↷ " if redo else "↶ ") + lines[0] + f" (request {group.request}: {group.label})")
    for line in lines[1:]:
        ui.renderer.info(line)


def show_diff(state: ChatState, renderer: Renderer) -> None:
    from clover.gitdiff import diff_trees

    if state.baseline is None:
        renderer.error("/diff needs a git repository")
        return
    now = state.worktree()
    diff = diff_trees(state.root, state.baseline, now) if now else ""
    if not diff.strip():
        renderer.info("no changes in this session")
        return
    renderer.diff(diff)
