"""The step boundary: every command a step runs sees the workspace through a copy-on-write layer,
and only what policy accepts of what it changed reaches the real files, recorded for undo.

    start()  -> a StepView (tools/safety/overlay.py): the command runs through its launcher
    settle() -> what the command changed (the upper layer, read exactly), decided
                (tools/safety/steppolicy.py), applied (tools/safety/stepapply.py) or, for a check, discarded

Who decides what: the boundary enforces; a held change (one that would make a program run later
on the host) is applied only when `approve` (the agent's gate: the user in the chat) says so, and
never without one (headless). What the step changed is recorded by `recorder` (the checkpoints of
the agent's current step, tools/undo/checkpoints.py), and every settled step is reported to `observe`
(the trajectory), checks included: a test run or an example run is a step too, whose changes are
thrown away and said.

Where user namespaces or overlayfs are missing, there is no boundary (`available()` says why) and
the environment falls back to recording by scanning.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from clover.tools.safety import overlay, stepapply, steppolicy
from clover.tools.safety.overlay import StepView
from clover.tools.safety.steppolicy import Held


class ExactRecorder(Protocol):
    """The undo recorder's side of the boundary: the state of the paths a step will change, taken
    before it is applied, and the record made after. `capture` returns None outside a step."""

    def capture(self, paths: list[str]) -> Any: ...

    def commit(self, before: Any) -> None: ...


@dataclass
class StepReport:
    """What one command of a step did to the workspace, as the boundary settled it."""

    kept_changes: bool  # False for a check: nothing was applied
    applied: list[str] = field(default_factory=list)
    kept: list[tuple[str, str]] = field(default_factory=list)  # (path, why) left as it was, by rule
    held: list[tuple[str, str, bool]] = field(default_factory=list)  # (path, why, approved)
    failed: list[tuple[str, str]] = field(default_factory=list)
    discarded: list[str] = field(default_factory=list)  # a check's changes, thrown away
    error: str = ""

    def notes(self) -> list[str]:
        """Lines for the command's output: what did not happen as the command meant it to."""
        out = []
        if self.error:
            out.append(f"[step boundary: {self.error}; none of the command's file changes were applied]")
        if self.discarded:
            out.append(
                f"[step boundary: this run's {len(self.discarded)} file change(s) were thrown away "
                f"({_few(self.discarded)}): it is a check, not a change]"
            )
        by_reason: dict[str, list[str]] = {}
        for path, why in self.kept:
            by_reason.setdefault(why, []).append(path)
        for why, paths in by_reason.items():
            out.append(f"[step boundary: left as they were: {_few(paths)} ({why})]")
        for _path, why, approved in self.held:
            if not approved:
                out.append(
                    f"[step boundary: not applied: {why}. Ask the user to make this change themselves]"
                )
        for path, why in self.failed:
            out.append(f"[step boundary: could not apply {path}: {why}]")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "kept_changes": self.kept_changes,
            "applied": self.applied,
            "kept": [list(k) for k in self.kept],
            "held": [{"path": p, "why": w, "approved": a} for p, w, a in self.held],
            "failed": [list(f) for f in self.failed],
            "discarded": self.discarded,
            "error": self.error,
        }


def _few(paths: Sequence[str], n: int = 3) -> str:
    shown = ", ".join(paths[:n])
    return shown + (f" and {len(paths) - n} more" if len(paths) > n else "")


def available(base: str, roots: Sequence[str] = ()) -> tuple[bool, str]:
    """Whether steps can run behind the boundary here (layers under `base` or a fallback)."""
    found, why = overlay.layer_base(base, list(roots))
    return found is not None, why


class StepBoundary:
    """One per environment: the directories a command may write (`roots`: the workspace first)."""

    def __init__(self, roots: Sequence[str], base: str, pid_namespace: bool, home: str | None = None) -> None:
        found, why = overlay.layer_base(base, list(roots))
        if found is None:
            raise OSError(why)
        self.base = found
        overlay.remove_stale(found)
        self.roots = [os.path.realpath(r) for r in roots]
        self.pid_namespace = pid_namespace
        self.home = os.path.realpath(home) if home else None
        self.approve: Callable[[list[Held]], set[str]] | None = None
        self.recorder: ExactRecorder | None = None
        self.observe: Callable[[StepReport], None] | None = None

    def start(self) -> StepView:
        return StepView(self.base, [r for r in self.roots if os.path.isdir(r)], self.pid_namespace)

    def settle(self, view: StepView, keep: bool = True, ask: bool = True) -> StepReport:
        """Read what the command wrote, decide, apply (or discard, for a check); the view is gone
        after. `ask`: False where no one may be asked now (a stop in progress): held changes wait
        for no answer and are not applied."""
        report = StepReport(kept_changes=keep)
        try:
            layers = list(view.changes())
        except (overlay.LayerError, OSError) as exc:
            report.error = f"its changes could not be read ({exc})"
            view.close()
            self._observe(report)
            return report
        try:
            for layer, changes in layers:
                if not changes:
                    continue
                if not keep:
                    report.discarded += [c.path for c in changes if c.kind != "dir"]
                    continue
                self._settle_layer(layer.lower, changes, report, ask)
        finally:
            view.close()
        self._observe(report)
        return report

    def _settle_layer(
        self, root: str, changes: list[overlay.LayerChange], report: StepReport, ask: bool
    ) -> None:
        review = steppolicy.review(root, changes, self._home_in(root))
        approved = set()
        if review.held and ask and self.approve is not None:
            approved = self.approve(review.held)
        for held in review.held:
            ok = held.path in approved
            report.held.append((held.path, held.why, ok))
            if ok:
                review.apply.append(held.change)
        review.apply.sort(key=lambda c: c.path.count("/"))
        report.kept += review.kept
        relative = root == self.roots[0]
        before = (
            self.recorder.capture(stepapply.touched(root, review)) if relative and self.recorder else None
        )
        done = stepapply.apply(root, review)
        if before is not None and self.recorder is not None:
            self.recorder.commit(before)
        prefix = "" if relative else root + "/"
        report.applied += [prefix + p for p in done.paths]
        report.failed += [(prefix + p, why) for p, why in done.failed]

    def _home_in(self, root: str) -> str | None:
        if self.home is None:
            return None
        if self.home == root:
            return ""
        if self.home.startswith(root + "/"):
            return self.home[len(root) + 1 :]
        return None

    def _observe(self, report: StepReport) -> None:
        if self.observe is not None:
            self.observe(report)


__all__ = ["ExactRecorder", "StepBoundary", "StepReport", "available"]
