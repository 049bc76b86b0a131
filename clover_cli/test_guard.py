"""The test guard of `clover fix`: the repository's tests before and after the agent's
change; a test that passed before and fails after is reported, and, for a model that asks for it
(`rolls_back_test_breaks`, declared by the embedded checkpoint's config), the change is rolled back.

The tests run like any command the agent would run: through its Environment (the sandbox applies)
and only where the run's permission gate, which asks no one, allows the exact command (yolo, or an
allow rule for it); otherwise the report says they were not run and why. Each run is a step of its own
behind the step boundary and a check: whatever the tests (or a conftest.py the agent planted)
write in the workspace is thrown away, recorded in the trajectory and named in the report.
Nothing else is changed: a roll-back reverses exactly the agent's diff (`git apply -R`), so the
user's own uncommitted work stays, and a diff that no longer applies is left in place and said so.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clover.core.model_protocol import Model, ToolCall
from clover.tools.testrun import TestRun, argv, run_tests, test_files

TIMEOUT = 180.0  # seconds for one run of the tests; a slower suite is not checked (the report says so)
MAX_FILES = 200


@dataclass
class GuardReport:
    checked: bool  # the tests ran before and after
    note: str  # one line for the run's report
    broken: list[str] = field(default_factory=list)  # passed before, fail (or are gone) after
    rolled_back: bool = False
    discarded: list[str] = field(default_factory=list)  # what the test runs wrote, thrown away

    def to_json(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "note": self.note,
            "broken": self.broken,
            "rolled_back": self.rolled_back,
            "discarded": self.discarded,
        }


class TestGuard:
    """`start()` before the agent runs, `finish(root, patch)` after it."""

    __test__ = False  # not a pytest test class

    def __init__(
        self, env: Any, may_run: Callable[[str], bool], roll_back: bool = False, timeout: float = TIMEOUT
    ) -> None:
        self.env, self.may_run, self.roll_back, self.timeout = env, may_run, roll_back, timeout
        self.files: list[str] = []
        self.before: TestRun | None = None
        self.skipped = ""  # why the tests are not checked

    def start(self) -> None:
        try:
            self.files = test_files(self.env.list_files(self.env.root))[:MAX_FILES]
        except (OSError, ValueError):
            self.files = []
        if not self.files:
            self.skipped = "no test files found"
            return
        command = shlex.join(argv("python3", str(self.env.root), self.files))
        if not self.may_run(command):
            self.skipped = (
                "the permission mode does not run commands unasked (--yes, or an allow rule for "
                "`python3 -c *`, lets it)"
            )
            return
        self.before = run_tests(self.env, self.files, self.timeout)
        if not self.before.ok:
            self.skipped = self.before.error

    def finish(self, root: Path, patch: str | bytes) -> GuardReport:
        """Compare the tests after the change with before; roll the change back where asked."""
        if self.skipped or self.before is None:
            return GuardReport(False, f"tests not checked: {self.skipped}")
        if not patch.strip():
            return GuardReport(True, "tests checked: nothing was changed")
        after = run_tests(self.env, self.files, self.timeout)
        report = self._compare(root, patch, after)
        touched = sorted(set(self.before.discarded) | set(after.discarded))
        if touched:  # a test run is a check: what it wrote was thrown away, and the report says so
            shown = ", ".join(touched[:3]) + (f" and {len(touched) - 3} more" if len(touched) > 3 else "")
            report.note += f"; the test runs also changed {len(touched)} path(s), thrown away ({shown})"
            report.discarded = touched
        return report

    def _compare(self, root: Path, patch: str | bytes, after: TestRun) -> GuardReport:
        was = self.before.outcomes  # type: ignore[union-attr]
        if not after.ok:  # they ran before the change and do not now (a hang, a crash): that is breaking them
            broken = sorted(t for t, o in was.items() if o == "passed")
            return self._broken(root, patch, broken, f"the tests no longer run ({after.error})")
        broken = sorted(
            t
            for t, o in was.items()
            if o == "passed"
            and after.outcomes.get(t, "gone") != "passed"
            and after.outcomes.get(t) != "skipped"
        )
        fixed = sum(1 for t, o in after.outcomes.items() if o == "passed" and was.get(t) == "failed")
        if not broken:
            return GuardReport(True, f"tests checked: none that passed before fails now ({fixed} fixed)")
        shown = ", ".join(broken[:5]) + (f" and {len(broken) - 5} more" if len(broken) > 5 else "")
        return self._broken(root, patch, broken, f"{len(broken)} passing test(s) fail: {shown}")

    def _broken(self, root: Path, patch: str, broken: list[str], what: str) -> GuardReport:
        """Report the breakage, and roll the change back where asked."""
        if not self.roll_back:
            return GuardReport(True, f"the change breaks the tests: {what}", broken)
        if revert(root, patch):
            return GuardReport(
                True, f"rolled back: the change broke the tests: {what}", broken, rolled_back=True
            )
        return GuardReport(
            True,
            f"the change breaks the tests: {what} (it could not be rolled back; `clover undo` "
            "reverts the run's steps)",
            broken,
        )


def revert(root: Path, patch: str | bytes) -> bool:
    """Reverse `patch` (a git diff of the agent's change, ideally the files' own bytes) in the work
    tree; False if it no longer applies. Hardened git (tools/git/gitsafe.py): nothing the repository's
    config names runs."""
    from clover.tools.git.gitsafe import run_git

    data = patch.encode("utf-8", "surrogateescape") if isinstance(patch, str) else patch
    data = data if data.endswith(b"\n") else data + b"\n"
    for args in (["--check"], []):  # all or nothing: check first, then apply
        try:
            proc = run_git(
                ["apply", "-R", "--whitespace=nowarn", *args, "-"], str(root), input=data, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        if proc.returncode != 0:
            return False
    return True


def start_guard(env: Any, model: Model, gate_allows: Callable[[str], bool]) -> TestGuard:
    """The guard for one run, its tests already run (the state before the agent)."""
    guard = TestGuard(env, gate_allows, roll_back=model.rolls_back_test_breaks)
    guard.start()
    return guard


def guard_for_fix(settings: Any, env: Any, model: Model) -> TestGuard:
    """`clover fix`'s guard: the tests run where the run's permission gate (headless: it asks no
    one, so an asked command is refused) allows them."""
    from clover.runner import build_gate
    from clover.stage_checks import CHECK_TOOL

    gate = build_gate(settings, env.root)
    return start_guard(
        env, model, lambda command: gate.authorize(ToolCall("bash", {"command": command}), CHECK_TOOL) is None
    )


__all__ = ["GuardReport", "TestGuard", "guard_for_fix", "revert", "start_guard"]
