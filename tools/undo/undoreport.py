"""What an undo / redo will do and did, as lines for the user (the CLI and the chat print them).

A plan names the session, the request and the steps it reverts, then one line per path: what the
undo does to it, how the agent's step had changed it, and a diff summary (+added -removed lines,
or "binary"); conflicts follow, each with why it is left alone.
"""

from __future__ import annotations

from typing import Any

from clover.tools.textio import quoted_path
from clover.tools.undo.treescan import Entry
from clover.tools.undo.undojournal import Group
from clover.tools.undo.undoplan import Action, Outcome, Plan, verb


def _steps(steps: list[int]) -> str:
    if not steps:
        return "no step"
    if len(steps) == 1:
        return f"step {steps[0]}"
    if steps == list(range(steps[0], steps[-1] + 1)):
        return f"steps {steps[0]}-{steps[-1]}"
    return "steps " + ", ".join(map(str, steps))


def headline(group: Group, plan: Plan) -> str:
    what = "redo" if plan.redo else "undo"
    label = group.label if len(group.label) <= 70 else group.label[:69] + "…"
    return f'{what}: session {group.session}, request {group.request} "{label}" ({_steps(group.steps)})'


def _lines(repo: Any, entry: Entry | None) -> bytes | None:
    if entry is None or entry.kind not in ("f", "l"):
        return b"" if entry is None else None
    return repo[entry.oid].data


def _named(entry: Entry | None) -> str:
    if entry is None or entry.kind != "r":
        return "none"
    return entry.oid if entry.oid.startswith("ref: ") else entry.oid[:12]


def _stat(repo: Any, old: Entry | None, new: Entry | None) -> str:
    """+added -removed lines from `old` to `new` (the step's change), or what kind of change."""
    import pygit2

    if "r" in (old and old.kind, new and new.kind):  # a ref: what it named, and names now
        return f"{_named(old)} -> {_named(new)}"
    a, b = _lines(repo, old), _lines(repo, new)
    if a is None or b is None:
        return ""
    if b"\0" in a[:8000] or b"\0" in b[:8000]:
        return "binary"
    if a == b:
        return ""
    _ctx, added, removed = pygit2.Patch.create_from(a, b).line_stats
    return f"+{added} -{removed}"


def _does(a: Action, redo: bool) -> str:
    if a.target is None:
        return "delete"
    if a.current is None:
        return "restore"
    return "reapply" if redo else "revert"


def _action_line(repo: Any, a: Action, redo: bool, inside: int = 0) -> str:
    step_before, step_after = (a.current, a.target) if redo else (a.target, a.current)
    detail = f"{verb(step_before, step_after)} by the agent"
    if inside:
        detail += f", with the {inside} path(s) in it"
    else:
        detail = ", ".join(x for x in (detail, _stat(repo, step_before, step_after)) if x)
    saved = " (your version is saved first)" if a.save is not None else ""
    return f"  {_does(a, redo):8} {quoted_path(a.path)}{'/' if inside else ''}  ({detail}){saved}"


def _folded(repo: Any, actions: list[Action], redo: bool) -> list[str]:
    """One line per action; a directory made or removed whole is one line with a count."""
    lines, i = [], 0
    while i < len(actions):
        a, j = actions[i], i + 1
        whole_dir = {a.current and a.current.kind, a.target and a.target.kind} == {"d", None}
        while (
            whole_dir
            and j < len(actions)
            and actions[j].path.startswith(a.path + "/")
            and (_does(actions[j], redo) == _does(a, redo))
        ):
            j += 1
        lines.append(_action_line(repo, a, redo, inside=j - i - 1))
        i = j
    return lines


def describe(repo: Any, group: Group, plan: Plan) -> list[str]:
    lines = [headline(group, plan)]
    lines += _folded(repo, plan.actions, plan.redo)
    for m, why in plan.moves:
        src, dst = (m.src, m.dst) if plan.redo else (m.dst, m.src)
        lines.append(
            f"  move     {quoted_path(src)} -> {quoted_path(dst)}  (the agent moved this repository)"
            + (f": cannot, {why}" if why else "")
        )
    if plan.settled and not plan.actions:
        lines.append(f"  ({len(plan.settled)} path(s) already as they should be)")
    for c in plan.conflicts:
        lines.append(f"  CONFLICT {quoted_path(c.path)}: {c.conflict}; left alone")
    if plan.conflicts:
        lines.append("  (--force overwrites a conflicting file after saving your version)")
    return lines


def summary(outcome: Outcome, redo: bool) -> list[str]:
    what = "redone" if redo else "undone"
    n = len(outcome.done) + len(outcome.moved)
    lines = [
        f"{what}: {n} path(s) changed"
        + (f", {len(outcome.conflicts)} conflict(s) left alone" if outcome.conflicts else "")
    ]
    for c in outcome.conflicts:
        lines.append(f"  CONFLICT {quoted_path(c.path)}: {c.conflict}")
    for m, why in outcome.failed_moves:
        lines.append(f"  not moved: {quoted_path(m.dst if not redo else m.src)}: {why}")
    for path in outcome.saved:
        lines.append(f"  your version was saved to {quoted_path(path)}")
    return lines
