"""`clover undo`: revert (or redo) the agent's latest request, exactly what it changed.

It always prints the plan first: the session, the request and the steps, then every path with
what the undo does to it and the step's diff summary, and every conflict (a path changed since
the step: left alone). Then:
- on a terminal it asks (default: no), unless `--yes`;
- without a terminal (a script, CI) it acts: the command was typed for that, the plan is in the
  output, nothing the user changed is overwritten (conflicts are only with `--force`, after
  saving the user's version) and `clover undo --redo` takes it back;
- `--dry-run` prints the plan and stops.
Exit codes: 0 done (everything), 1 nothing to do, declined, or conflicts left, 2 usage error.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from clover.cli_common import fail


def run_undo(
    repo: Path, *, redo: bool, yes: bool, force: bool, dry_run: bool, list_only: bool, session: str | None
) -> int:
    if not repo.is_dir():
        fail(f"not a directory: {repo}")
    from clover.tools.undo import undoreport
    from clover.tools.undo.checkpoints import Checkpoints, SnapshotError

    try:
        store = Checkpoints(str(repo.resolve()))
        if list_only:
            _list(store, session)
            return 0
        group, plan = store.plan(redo=redo, session=session, force=force)
    except SnapshotError as exc:
        fail(str(exc), code=1)
    for line in undoreport.describe(store.repo, group, plan):
        typer.echo(line)
    if dry_run:
        return 0
    if not (plan.actions or plan.moves or plan.settled):
        typer.echo("nothing can be done: every path conflicts (see above)", err=True)
        return 1
    if sys.stdin.isatty() and not yes:
        answer = input(f"{'Redo' if redo else 'Undo'} this? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            typer.echo("nothing was done")
            return 1
    try:
        _group, outcome = store.apply(plan, session=session, force=force)
    except (SnapshotError, OSError) as exc:
        fail(str(exc), code=1)
    for line in undoreport.summary(outcome, redo):
        typer.echo(line)
    if not redo and not outcome.conflicts:
        typer.echo("(clover undo --redo puts it back)")
    return 1 if outcome.conflicts or outcome.failed_moves else 0


def _list(store: object, session: str | None) -> None:
    groups = store.groups(session)  # type: ignore[attr-defined]
    if not groups:
        typer.echo("no agent changes recorded here")
    for g in reversed(groups):
        paths = {c.path for r in g.records for c in r.changes}
        typer.echo(
            f'session {g.session}, request {g.request} "{g.label[:60]}": {len(paths)} path(s), {g.state()}'
        )
