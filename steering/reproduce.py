"""An issue's reproduction, run against candidate edits in the agent's environment.

The embedded model chooses its str_replace among one-line repairs (edit_choice.py). When the issue
states what a call should give (issue_checks.py), the candidates are also run: in the model's order
of preference, the first one under which every check the file as it is fails now passes is the
edit. Checks the current file already passes, or whose setup fails, say nothing and are dropped;
without a check left, the model's likelihood alone decides, as before.

Running code is an action like any shell command, so this module runs nothing itself: each run is
a StageCheck handed to `run_check`, the agent's runner (agent.py), where the agent's gate decides
about the exact command, the environment runs it behind the step boundary (Environment.run, the
same sandbox as every command) and the trajectory records it. Each candidate has a time and memory
limit, and nothing is written (the edited module is compiled in memory; no bytecode is cached).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clover.core.stage_protocol import CheckRunner, StageCheck
from clover.steering.issue_checks import Check, extract_checks, probed_names

SCRIPT = (Path(__file__).parent / "probe_script.py").read_text(encoding="utf-8")
CANDIDATE_SECONDS = 2.0  # per candidate (a repair can turn a loop endless)
MAX_CANDIDATES = 256  # per run (edit_choice.MAX_PAIRS: a stage's candidates run at once)
TEST_SECONDS = 30.0  # the repository's tests, per candidate that passes a check
RUN_SECONDS = 60.0  # one run: candidates left when it is spent are skipped
MAX_TEST_FILES = 8
MAX_FILES = 2000  # Python files read for definitions and tests (a larger repository: the first ones)
TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$")
Candidate = tuple[str, str, str]  # path, old, new


@dataclass
class Judgement:
    counts: list[int]  # per candidate: checks failing now that pass (0 if it breaks what passes now)
    live: int  # checks the file as it is fails
    breaks: list[bool]  # per candidate: a check or a test that passes now fails under it


class Reproduction:
    """The checks of one issue in the workspace at `root`; `run_check` runs them (the agent's)."""

    def __init__(self, root: str, checks: list[Check], run_check: CheckRunner, tests: list[str] = ()) -> None:
        self.root, self.checks, self.run_check, self.tests = root, checks, run_check, list(tests)
        self.runs = 0
        self.python: str | None = None

    @classmethod
    def from_issue(cls, issue: str, workspace: Any, run_check: CheckRunner) -> Reproduction | None:
        files, _ = workspace.listing()

        def read(path: str) -> str | None:
            data = workspace.read(path)
            return data.decode("utf-8", "replace") if data is not None else None

        python_files = [f for f in files if f.endswith(".py")][:MAX_FILES]
        checks = extract_checks(issue, python_files, read)
        if not checks:
            return None
        # the repository's tests that use what the checks call: a fix must keep them passing
        names = probed_names(checks)
        uses = re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\b")
        tests = [f for f in python_files if names and TEST_FILE.search(f) and uses.search(read(f) or "")]
        return cls(str(workspace.env.root), checks, run_check, tests[:MAX_TEST_FILES])

    @classmethod
    def from_messages(
        cls, messages: list[Any], workspace: Any, run_check: CheckRunner
    ) -> Reproduction | None:
        """The checks of the latest user message that states any (a chat's bug report may come
        after other requests; the agent's own reminders state none)."""
        for message in reversed(messages):
            if message.get("role") == "user" and (
                found := cls.from_issue(str(message.get("content") or ""), workspace, run_check)
            ):
                return found
        return None

    def argv(
        self,
        candidates: list[Candidate | None],
        python: str,
        test_all: bool = False,
        only_if_failing: bool = False,
    ) -> list[str]:
        root = self.root
        spec = {
            "root": root,
            "paths": [root, f"{root}/src", f"{root}/lib"],
            "timeout": CANDIDATE_SECONDS,
            "checks": [c.to_json() for c in self.checks],
            "candidates": candidates,
            "tests": self.tests,
            "test_timeout": TEST_SECONDS if self.tests else 0,
            "test_all": test_all,
            "only_if_failing": only_if_failing,
            "budget": RUN_SECONDS,
        }
        return [python, "-c", SCRIPT, json.dumps(spec)]

    def verdicts(
        self, candidates: list[Candidate | None], test_all: bool = False, only_if_failing: bool = False
    ) -> list[dict[str, Any]] | None:
        """Per candidate {"checks": a verdict per check, "failed": failing test ids or None}, or
        None (refused, no Python, or no answer)."""
        for python in [self.python] if self.python else ["python3", "python"]:
            argv = self.argv(candidates, python, test_all, only_if_failing)
            # the budget, plus the candidate running when it ran out (and the tests' first run)
            timeout = RUN_SECONDS + CANDIDATE_SECONDS + 3 * TEST_SECONDS + 10
            shown = sum(c is not None for c in candidates)
            purpose = f"the issue's example against {shown} candidate edit(s)"
            result = self.run_check(StageCheck(argv, timeout, purpose))
            if result is None:  # the gate refused it
                return None
            self.runs += 1
            if result.returncode == 127:
                continue
            self.python = python
            out = (
                result.stdout.decode("utf-8", "replace")
                if isinstance(result.stdout, bytes)
                else str(result.stdout)
            )
            try:
                rows = json.loads(out.strip().rsplit("\n", 1)[-1])
            except (ValueError, IndexError):
                return None
            ok = isinstance(rows, list) and len(rows) == len(candidates)
            shaped = ok and all(
                isinstance(r, dict) and len(r.get("checks") or ()) == len(self.checks) for r in rows
            )
            return rows if shaped else None
        return None

    def judge(
        self, candidates: list[Candidate], test_all: bool = False, only_if_failing: bool = False
    ) -> Judgement | None:
        """The candidates against the file as it is; None when the checks could not run. The tests
        run for candidates that pass a check the file fails (`test_all`: for every candidate).
        `only_if_failing`: the candidates are skipped when the file fails no check (then `live` is 0
        and only that is known)."""
        rows = self.verdicts([None, *candidates[:MAX_CANDIDATES]], test_all, only_if_failing)
        if rows is None:
            return None
        now = rows[0]["checks"]
        live = [i for i, v in enumerate(now) if v in ("fail", "timeout", "crash")]
        held = [i for i, v in enumerate(now) if v == "pass"]
        failing_now = rows[0]["failed"]

        def count(row: dict[str, Any]) -> int:
            passed = sum(row["checks"][i] == "pass" for i in live)
            failed = row["failed"] if row["failed"] is not None else ["<not run>"]
            if passed and failing_now is not None and set(failed) - set(failing_now):
                return 0  # it breaks a test that passed (or the tests no longer run)
            return 0 if any(row["checks"][i] != "pass" for i in held) else passed

        def breaks(row: dict[str, Any]) -> bool:
            new_failures = (
                failing_now is not None
                and row["failed"] is not None
                and set(row["failed"]) - set(failing_now)
            )
            return any(row["checks"][i] != "pass" for i in held) or bool(new_failures)

        rows = rows[1:] + [{"checks": ["setup"] * len(self.checks), "failed": None}] * (
            len(candidates) - len(rows) + 1
        )
        return Judgement([count(r) for r in rows], len(live), [breaks(r) for r in rows])

    def passing(self, candidates: list[Candidate]) -> tuple[list[int], int] | None:
        """For each candidate, how many of the checks that the file as it is fails pass under it (0
        when it makes a test fail that passes now, or a check), and how many fail now; None when
        none fails now (nothing to tell candidates apart by) or the checks could not run."""
        judged = self.judge(candidates)
        return (judged.counts, judged.live) if judged is not None and judged.live else None

    def held_message(self) -> str:
        shown = "; ".join(
            f"`{c.probe}`" + (f" -> `{c.expect.text}`" if c.expect.text else "") for c in self.checks
        )
        return (
            "Not applied: with the file as it is, the issue's example already does what the issue asks "
            f"({shown}), and this edit would undo that or break a test that passes now. If the fix is "
            "complete, run the tests or answer."
        )

    def sites(self, workspace: Any) -> list[tuple[str, str, str]]:
        """(path, file text, `def` line) of each function or class the checks call, as defined in
        the workspace's non-test files."""
        names = probed_names(self.checks)
        files, _ = workspace.listing()
        out = []
        for path in files:
            if not path.endswith(".py") or "test" in path.rsplit("/", 1)[-1]:
                continue
            data = workspace.read(path)
            text = data.decode("utf-8", "replace").replace("\r\n", "\n") if data is not None else ""
            for name in names:
                for m in re.finditer(rf"(?m)^[ \t]*(?:async )?(?:def|class) {re.escape(name)}\b.*$", text):
                    if text.count(m.group(0)) == 1:
                        out.append((path, text, m.group(0)))
        return out[:8]


__all__ = ["Judgement", "Reproduction"]
