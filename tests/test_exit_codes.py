"""The one rule for how a headless run ended (clover_cli/exit_codes.py), and the two recognisers it
leans on: the model's "No change needed" answer and a test command."""

from __future__ import annotations

import pytest

from clover.call_log import is_test_command
from clover.exit_codes import HELP, ExitCode, decide
from clover.prompts import FIX, NO_CHANGE, says_no_change_needed, system_prompt


@pytest.mark.parametrize(
    ("status", "kw", "code", "label"),
    [
        ("submitted", dict(changed=True), 0, "fixed"),
        ("submitted", dict(no_change_answer=True), 0, "no_change_needed"),
        ("submitted", {}, 1, "no_change"),
        ("submitted", dict(refused=2), 3, "refused"),
        (
            "submitted",
            dict(refused=2, changed=True),
            0,
            "fixed",
        ),  # the change decides; the refusals are listed
        (
            "limits_exceeded",
            dict(refused=1),
            3,
            "refused",
        ),  # refused, then looped into the limit: the refusals are why
        ("repeated_calls", dict(refused=1), 3, "refused"),
        ("limits_exceeded", dict(changed=True), 4, "limits_exceeded"),
        ("format_error", {}, 1, "format_error"),
        ("repeated_calls", dict(changed=True), 1, "repeated_calls"),
        (
            "model_error",
            dict(refused=3),
            5,
            "model_error",
        ),  # the backend failing explains the end, not the refusals
        ("interrupted", dict(changed=True), 130, "interrupted"),
        (
            "submitted",
            dict(changed=True, cut="length"),
            0,
            "fixed",
        ),  # a fix's change stands; the cut is labelled
        ("submitted", dict(cut="length"), 4, "truncated"),
        ("submitted", dict(cut="incomplete"), 5, "truncated"),
        # the stream broke mid-reply: the model may have been writing its next call, so not "fixed"
        ("submitted", dict(changed=True, cut="incomplete"), 5, "truncated"),
        ("submitted", dict(cut="repetition", no_change_answer=True), 1, "truncated"),
        ("terminated", dict(changed=True), 143, "terminated"),
        ("hung_up", dict(refused=1), 129, "hung_up"),
    ],
)
def test_fix(status: str, kw: dict, code: int, label: str) -> None:
    outcome = decide(status, **{"refused": 0, "changed": False, "needs_change": True, **kw})
    assert (outcome.code, outcome.label) == (code, label)


@pytest.mark.parametrize(
    ("status", "kw", "code", "label"),
    [
        ("submitted", {}, 0, "answered"),
        ("submitted", dict(refused=1), 3, "refused"),
        ("submitted", dict(refused=1, changed=True), 0, "answered"),
        ("submitted", dict(cut="length"), 4, "truncated"),
        ("submitted", dict(cut="repetition"), 1, "truncated"),
        ("limits_exceeded", {}, 4, "limits_exceeded"),
        ("model_error", {}, 5, "model_error"),
    ],
)
def test_print(status: str, kw: dict, code: int, label: str) -> None:
    outcome = decide(status, **{"refused": 0, "changed": False, "needs_change": False, **kw})
    assert (outcome.code, outcome.label) == (code, label)


def test_help_names_every_code() -> None:
    for code in ExitCode:
        assert f"{int(code)} " in HELP


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("No change needed: add already adds.", True),
        ("**No change needed.** The issue is about 1.2.", True),
        ("> no change is needed here", True),
        ("Fixed add. No change needed elsewhere.", False),
        ("There was no change needed", False),
        ("", False),
    ],
)
def test_no_change_answer(answer: str, says: bool) -> None:
    assert says_no_change_needed(answer) is says


def test_the_no_change_answer_is_offered_only_when_asked() -> None:
    assert NO_CHANGE in system_prompt("/r", "fix", offer_no_change=True)
    assert system_prompt("/r", "fix") == FIX.format(
        root="/r"
    )  # the embedded model's training prompt, unchanged
    assert NO_CHANGE not in system_prompt("/r", "chat", offer_no_change=True)


@pytest.mark.parametrize(
    ("command", "is_test"),
    [
        ("python -m pytest -q", True),
        ("npm test", True),
        ("go test ./...", True),
        ("tox -e py311", True),
        ("python tests/run.py", True),
        ("ls -la", False),
        ("cat calc.py", False),
        ("git status", False),
    ],
)
def test_test_commands(command: str, is_test: bool) -> None:
    assert is_test_command(command) is is_test
