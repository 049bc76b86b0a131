"""The runaway-loop guard every agent run has (clover_cli/loop_guard.py, put around the model by
runner.build_agent): a reply that repeats itself is stopped as it streams and cut where the loop
began, found by the decoder's own detector (model/decoder/repetition.py) over characters, and reported in
characters, never as made-up token counts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from clover.backends.scripted import ScriptedModel
from clover.loop_guard import TEXT_RULE, LoopGuard, guarded_complete, truncation
from clover.model.decoder.repetition import loop_start
from tests.clihelp import isolated_env, run_fix


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("A" * 400, None),  # 399 repeats past the first copy: not yet a loop
        ("A" * 401, (0, 1)),
        ("Sure: " + "s" * 4000, (6, 1)),  # followed back past the window the check looks at
        ("x = 1\n" + "ab" * 300, (6, 2)),
        ("# a heading\n" + "-" * 120 + "\nsome code\n", None),  # a rule line in code is no loop
        ("word " * 70, None),  # a unit of 5 repeated 70 times: 345 characters past the first copy
    ],
)
def test_the_detector_over_characters(text: str, start: tuple[int, int] | None) -> None:
    assert loop_start(text, TEXT_RULE) == start


def test_a_long_unit_needs_eight_copies_past_the_first() -> None:
    line = "the same sentence, said once more and again.\n"  # 46 characters
    assert loop_start(line * 9, TEXT_RULE) is None  # 8 copies past the first: 368 < 400 characters
    assert loop_start("start " + line * 10, TEXT_RULE) == (6, len(line))


def test_a_runaway_turn_is_cut_and_reported_in_characters() -> None:
    streamed = "Sure: " + "s" * 4000
    turn = guarded_complete(ScriptedModel([{"text": streamed}]), [], [], None)
    assert turn.finish_reason == "repetition" and turn.text == "Sure: ss" and not turn.tool_calls
    assert turn.stats == {"streamed_chars": len(streamed), "cut_chars": len(streamed) - len("Sure: ss")}
    # the stream stopped before the backend counted anything: no token count is made up
    assert turn.prompt_tokens == 0 and turn.completion_tokens == 0
    assert truncation(turn) == "the reply kept repeating itself and was stopped after 4,006 characters"


def test_a_turn_that_ends_normally_passes_through() -> None:
    guard = LoopGuard(ScriptedModel([{"text": "All done.", "completion_tokens": 3}]))
    turn = guard.complete([], [])
    assert turn.text == "All done." and turn.completion_tokens == 3 and turn.finish_reason == "stop"
    assert guard.cut_reason() == "" and guard.cut_note() == ""


def test_every_agent_run_has_the_guard(tmp_path: Path) -> None:
    from clover.runner import build_agent
    from clover.settings import Settings
    from clover.tools.environment import LocalEnvironment

    model = ScriptedModel([{"text": "Looping: " + "ab" * 1000}])
    agent = build_agent(Settings(checkpoints=False), LocalEnvironment(str(tmp_path)), kind="fix", model=model)
    result = agent.run("go")
    assert result.final_text == "Looping: abab" and result.stats["streamed_chars"] == 2009


def test_the_loop_guard_stops_a_runaway_fix(tmp_path: Path) -> None:
    """`clover fix` for real, its scripted model looping: the run is stopped, not taken for an
    answer, and the report says how many characters the loop streamed."""
    looped = "I will fix it. " + "fix " * 1000
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": looped}, {"text": "never asked for"}]))
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "a.py").write_text("x = 1\n")
    (tmp_path / "issue.md").write_text("fix it")
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        f"scripted:{script}",
        "--output-format",
        "json",
        env=isolated_env(tmp_path),
    )
    report = json.loads(proc.stdout)
    assert proc.returncode == report["exit_code"] != 0, proc.stderr
    assert report["outcome"] == "truncated" and report["steps"] == 1
    assert report["final_text"] == "I will fix it. fix fix"
    assert report["truncated"] == (
        f"the reply kept repeating itself and was stopped after {len(looped):,} characters"
    )
    assert report["stats"]["streamed_chars"] == len(looped)
    assert report["completion_tokens"] == 0  # the backend counted none before the stop
    assert report["patch"] == ""
