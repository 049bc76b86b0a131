"""An issue's reproduction run against candidate edits (steering/reproduce.py and
probe_script.py) in a real workspace through LocalEnvironment: which candidates fix it, what a
looping candidate costs, what is written (nothing), and that it runs only through the check
runner it is given (the agent's: tests/test_turn_stage.py shows the gate deciding)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from clover.steering import reproduce
from clover.steering.edit_choice import EditChoice, verified_choice
from clover.steering.grounding import Workspace
from clover.steering.reproduce import Reproduction
from clover.tools.environment import LocalEnvironment
from clover.tools.safety.commandenv import interpreter_environment

MODULE = '''def postage(weight, express=True):
    """5.0 up to 2 kg, 1.5 per extra kg; express doubles it."""
    cost = 5.0
    if weight > 2:
        cost += (weight - 2) * 1.5
    if express:
        cost *= 2
    return cost
'''
ISSUE = "```python\n>>> from shop.ship import postage\n>>> postage(1)\n10.0\n```\n\nI expected `5.0`."
TESTS = (
    "from shop.ship import postage\n\n\ndef test_express():\n    assert postage(4, express=True) == 16.0\n"
)
FIX = ("src/shop/ship.py", "def postage(weight, express=True):", "def postage(weight, express=False):")
WRONG = ("src/shop/ship.py", "    cost = 5.0", "    cost = 4.0")
# passes the issue's example, breaks the test that passes now
OVERFIT = ("src/shop/ship.py", "    cost = 5.0", "    return 5.0")


def _workspace(root: Path, tests: str) -> Workspace:
    pkg = root / "src" / "shop"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ship.py").write_text(MODULE)
    (root / "tests").mkdir()
    (root / "tests" / "test_ship.py").write_text(tests)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    # the project's interpreter is the one these tests run on (it has pytest); commands no longer
    # inherit Clover's own venv, so it is given on purpose
    return Workspace(LocalEnvironment(str(root), env=interpreter_environment()))


@pytest.fixture
def workspace(tmp_path):
    """A test file that does not use `postage`: no regression tests to run (they cost seconds)."""
    return _workspace(tmp_path, "def test_nothing():\n    assert True\n")


@pytest.fixture
def tested(tmp_path):
    return _workspace(tmp_path, TESTS)


def runs(workspace: Workspace):
    """A check runner that runs every check in the workspace's environment."""
    return lambda check: workspace.env.run(check.argv, timeout=check.timeout)


def test_the_fix_passes_and_a_wrong_edit_or_one_that_breaks_a_test_does_not(tested):
    rep = Reproduction.from_issue(ISSUE, tested, runs(tested))
    assert rep is not None and rep.tests == ["tests/test_ship.py"]
    rows = rep.verdicts([None, WRONG, OVERFIT, FIX, WRONG])
    assert [r["checks"] for r in rows] == [["fail"], ["fail"], ["pass"], ["pass"], ["fail"]]
    # the tests run for the file as it is and for candidates that pass a check it fails
    assert [r["failed"] for r in rows] == [[], None, ["tests/test_ship.py::test_express"], [], None]
    # where the file fails no check, `only_if_failing` skips the candidates
    calm = Reproduction.from_issue(ISSUE.replace("`5.0`", "`10.0`"), tested, runs(tested))
    assert [r["checks"] for r in calm.verdicts([None, FIX], only_if_failing=True)] == [["pass"], ["skipped"]]
    assert rep.passing([WRONG, OVERFIT, FIX]) == ([0, 0, 1], 1)


def test_a_candidate_whose_old_text_is_not_in_the_file_once_is_reported_not_run(workspace):
    rep = Reproduction.from_issue(ISSUE, workspace, runs(workspace))
    assert rep.verdicts([("src/shop/ship.py", "nope", "x")])[0]["checks"] == ["setup"]


def test_it_writes_nothing_into_the_workspace(tested):
    root = Path(tested.env.root)
    before = sorted(p for p in root.rglob("*") if ".git" not in p.parts)
    rep = Reproduction.from_issue(ISSUE, tested, runs(tested))
    assert rep.passing([FIX, WRONG]) == ([1, 0], 1)
    # no __pycache__, no .pytest_cache, the file unchanged
    assert sorted(p for p in root.rglob("*") if ".git" not in p.parts) == before
    assert tested.read("src/shop/ship.py").decode() == MODULE


def test_a_looping_candidate_is_killed_and_the_rest_still_run(workspace, monkeypatch):
    monkeypatch.setattr(reproduce, "CANDIDATE_SECONDS", 0.5)
    loop = ("src/shop/ship.py", "    cost = 5.0", "    cost = 5.0\n    while True:\n        pass")
    rep = Reproduction.from_issue(ISSUE, workspace, runs(workspace))
    assert [r["checks"] for r in rep.verdicts([loop, FIX])] == [["timeout"], ["pass"]]


def test_it_runs_only_through_its_runner_and_a_refusal_runs_nothing(workspace, monkeypatch):
    asked: list[str] = []

    def refuse(check):  # the agent's runner when the gate refuses the exact command
        asked.append(shlex.join(check.argv))
        return None

    def no_run(*a, **k):
        raise AssertionError("ran without permission")

    rep = Reproduction.from_issue(ISSUE, workspace, refuse)
    monkeypatch.setattr(workspace.env, "run", no_run)
    assert rep.passing([FIX]) is None and asked[0].startswith("python3 -c ")


def test_nothing_to_tell_apart_when_the_file_already_passes(workspace):
    rep = Reproduction.from_issue(ISSUE.replace("`5.0`", "`10.0`"), workspace, runs(workspace))
    assert rep.passing([FIX]) is None


def test_a_check_whose_setup_fails_says_nothing(workspace):
    rep = Reproduction.from_issue(
        ISSUE.replace(">>> postage(1)", ">>> w = postage('x')\n>>> postage(1)"), workspace, runs(workspace)
    )
    assert rep.verdicts([None])[0]["checks"] == ["setup"] and rep.passing([FIX]) is None
    # a module or a name the workspace does not have is not even tried (an issue is untrusted text)
    assert (
        Reproduction.from_issue(ISSUE.replace("shop.ship", "shop.gone"), workspace, runs(workspace)) is None
    )
    assert (
        Reproduction.from_issue(
            ISSUE.replace("import postage", "import postage, gone"), workspace, runs(workspace)
        )
        is None
    )


def test_sites_are_the_called_functions_outside_the_tests(workspace):
    rep = Reproduction.from_issue(ISSUE, workspace, runs(workspace))
    assert rep.sites(workspace) == [("src/shop/ship.py", MODULE, "def postage(weight, express=True):")]


def test_verified_choice_takes_the_likeliest_passing_candidate_stage_by_stage(workspace):
    rep = Reproduction.from_issue(ISSUE, workspace, runs(workspace))
    fallback = EditChoice("    cost = 5.0", "    cost = 4.0", 7, "src/shop/ship.py")
    calls: list[str] = []

    def stage(name, cands):
        return lambda: calls.append(name) or cands

    got = verified_choice(
        rep, [stage("likeliest", [WRONG]), stage("region", [FIX]), stage("sites", [])], fallback
    )
    assert (got.path, got.old_str, got.new_str, got.verified) == (*FIX, True) and calls == [
        "likeliest",
        "region",
    ]
    assert verified_choice(rep, [stage("x", [WRONG])], fallback) == fallback
    # checks the file already passes leave the model's choice where it keeps them passing
    calm = Reproduction.from_issue(ISSUE.replace("`5.0`", "`10.0`"), workspace, runs(workspace))
    harmless = EditChoice(
        "        cost += (weight - 2) * 1.5", "        cost += (weight - 2) * 2.5", 7, "src/shop/ship.py"
    )
    assert verified_choice(calm, [stage("y", [FIX])], harmless) == harmless
    assert calm.runs == 2  # the file as it is (its candidates skipped), then the fallback with the tests


def test_an_edit_that_would_undo_a_reproduced_fix_is_held_back(workspace):
    fixed = Reproduction.from_issue(
        ISSUE.replace("`5.0`", "`10.0`"), workspace, runs(workspace)
    )  # the file gives 10.0
    harmless = (
        "src/shop/ship.py",
        "        cost += (weight - 2) * 1.5",
        "        cost += (weight - 2) * 2.5",
    )

    def own(c):
        return EditChoice(c[1], c[2], 3, c[0])

    got = verified_choice(fixed, [lambda: [WRONG, harmless]], own(WRONG))
    assert got.held and "`postage(1)` -> `10.0`" in got.held and not got.verified
    assert verified_choice(fixed, [lambda: [harmless, WRONG]], own(harmless)) == own(harmless)


def test_an_edit_that_breaks_a_passing_test_is_held_back_too(tested):
    fixed = Reproduction.from_issue(ISSUE.replace("`5.0`", "`10.0`"), tested, runs(tested))
    # leaves the issue's example alone (postage(1) stays 10.0) but breaks test_express
    harmful = ("src/shop/ship.py", "        cost += (weight - 2) * 1.5", "        cost += (weight - 2) * 2.5")
    got = verified_choice(fixed, [], EditChoice(harmful[1], harmful[2], 3, harmful[0]))
    assert got.held and "break a test" in got.held


def test_a_run_past_its_budget_skips_the_candidates_left(workspace, monkeypatch):
    monkeypatch.setattr(reproduce, "CANDIDATE_SECONDS", 0.4)
    monkeypatch.setattr(reproduce, "RUN_SECONDS", 0.2)
    loop = ("src/shop/ship.py", "    cost = 5.0", "    cost = 5.0\n    while True:\n        pass")
    rep = Reproduction.from_issue(ISSUE, workspace, runs(workspace))
    rows = rep.verdicts([None, loop, FIX])
    assert [r["checks"] for r in rows] == [["fail"], ["timeout"], ["skipped"]]


def test_the_latest_user_message_that_states_a_check_is_the_issue(workspace):
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": ISSUE},
        {"role": "user", "content": "Your reply had neither an answer nor a tool call."},
    ]
    rep = Reproduction.from_messages(messages, workspace, runs(workspace))
    assert rep is not None and rep.checks[0].probe == "postage(1)"
    assert Reproduction.from_messages(messages[:2], workspace, runs(workspace)) is None
