"""Outside its competence the embedded model says so (steering/competence.py): in a
repository larger than it was made for, past the prompt length it handles, or when its own reply
scores low, it answers briefly that this needs a larger model and how to connect one, and the
garbled reply it replaces never reaches the stream (`if the / if the` in this repository)."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest

from clover.core.model_protocol import AssistantTurn
from clover.steering.competence import HONEST, Limits

torch = pytest.importorskip("torch")

from clover.core.tool_protocol import tool_spec  # noqa: E402
from clover.tools.environment import LocalEnvironment  # noqa: E402
from clover.tools.registry import default_tools  # noqa: E402
from tests.test_tool_grammar import clover as clover  # noqa: E402,F401 - the module fixture
from tests.test_tool_grammar import variant  # noqa: E402

MARK = "needs a larger model"


def _repo(root, files: int):
    for i in range(files):
        (root / "pkg" / f"mod_{i}.py").parent.mkdir(parents=True, exist_ok=True)
        (root / "pkg" / f"mod_{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return LocalEnvironment(str(root))


def _limited(clover, env=None, **limits):
    model = variant(clover, max_tokens=48)
    model.config = dataclasses.replace(clover.config, **limits)
    if env is not None:
        model.bind_workspace(env)
    return model


def _turn(model, user="What does this repository do?", forced_call: bool = False):
    events = []
    tools = [tool_spec(t) for t in default_tools() if t.name in ("view", "grep")]
    forced = {0: model.tokenizer.token_id("<tool_call>")} if forced_call else None
    turn = model.complete([{"role": "user", "content": user}], tools, on_event=events.append, forced=forced)
    return turn, [e for e in events if e.kind in ("thinking", "text")]


def test_the_honest_reply_says_how_to_connect_a_larger_model():
    text = HONEST.format(why="x")
    assert MARK in text and "--base-url" in text and "--model DIR" in text
    assert (
        not Limits().active
        and Limits(max_repo_files=5).repo_too_big(6)
        and not Limits(max_repo_files=5).repo_too_big(5)
    )


def test_in_a_repository_past_its_size_work_on_it_is_answered_honestly(clover, tmp_path):
    model = _limited(clover, _repo(tmp_path, 12), max_repo_files=10)
    turn, shown = _turn(model, forced_call=True)  # it starts work on the repository: a tool call
    assert not turn.tool_calls and MARK in turn.text and "12 files, past the 10" in turn.text
    assert [e.text for e in shown] == [turn.text]  # nothing of the replaced reply was streamed
    assert turn.stats["outside_competence"] == 1.0
    # within the size, the same turn is the model's own
    model = _limited(clover, _repo(tmp_path / "small", 3), max_repo_files=10)
    turn, _ = _turn(model, forced_call=True)
    assert MARK not in turn.text and "outside_competence" not in turn.stats


def test_a_prompt_past_the_length_it_handles_is_answered_without_decoding(clover):
    turn, shown = _turn(_limited(clover, max_prompt_tokens=20))
    assert MARK in turn.text and turn.completion_tokens == 0 and [e.text for e in shown] == [turn.text]


def test_a_reply_it_scores_low_is_replaced(clover):
    # the random checkpoint's replies score far below any threshold a trained one clears
    turn, shown = _turn(_limited(clover, min_reply_logprob=-1.0))
    assert MARK in turn.text and "per token, below the -1.00" in turn.text
    assert [e.text for e in shown] == [turn.text] and turn.stats["reply_logprob"] < -1.0
    # judged and kept: the decoded reply streams as usual, with its score in the stats
    turn, shown = _turn(_limited(clover, min_reply_logprob=-1000.0))
    assert MARK not in turn.text and turn.stats["reply_logprob"] > -1000.0


def test_the_embedded_model_in_a_large_repository(tmp_path):
    """The shipped weights and config: "What does this repository do?" in a repository of 260
    modules gets the honest reply, not a garbled overview."""
    from clover.runner import build_agent, build_model
    from clover.settings import Settings

    env = _repo(tmp_path, 260)
    settings = Settings(mode="ask", max_steps=4, max_tokens=256, checkpoints=False)
    agent = build_agent(settings, env, kind="chat", model=build_model(settings))
    result = agent.run("What does this repository do?")
    assert MARK in result.final_text and "260 files, past the 200" in result.final_text


def test_after_an_edit_the_replacement_says_what_changed_not_that_it_needs_a_larger_model():
    # hand-written runs: a fix's final answer scored low, and "this needs a larger model" would have
    # been said of a bug it fixed
    from clover.core.tool_protocol import EDITED_KEY
    from clover.steering.competence import edited_files, reply_text

    messages = [
        {"role": "user", "content": "fix add"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]},
        {
            "role": "tool",
            "name": "str_replace",
            "content": "Edited calc.py. Line 2 now read (with context):\n...",
            EDITED_KEY: ["calc.py"],  # what the agent adds to a message of a call that edited
        },
        {
            "role": "tool",
            "name": "insert",
            "content": "Inserted lines 3-4 into pkg/a.py (after line 2):\n...",
            EDITED_KEY: ["pkg/a.py"],
        },
        {"role": "tool", "name": "str_replace", "content": "str_replace: not applied, the edit would ..."},
        {"role": "tool", "name": "bash", "content": "Edited nothing.py. (a command's output)"},
    ]
    assert edited_files(messages) == ["calc.py", "pkg/a.py"]  # not a command's output that reads alike
    text = reply_text("its reply scored -2.00 per token", messages[:-1])
    assert text.startswith("Changed `calc.py`, `pkg/a.py` (the diff shows how).") and MARK not in text
    # a later request, after the reply that ended this one, starts afresh
    later = [*messages[:-1], {"role": "assistant", "content": "Fixed."}, {"role": "user", "content": "hi"}]
    assert edited_files(later) == [] and MARK in reply_text("x", later)


def test_a_fluent_loop_is_no_answer():
    # the old chat set's "Add a web dashboard with user accounts to this project." (earlier
    # weights): the taught feature reply, garbled, starting over; it scores -0.06 per token
    from clover.steering.competence import repeats_itself

    looped = (
        "That is too big a change for me. Describe a bug: what you ran, what you expected and what you got. "
        "For a bigger task, a larger model (`clover chat --model`, find I can't answer generbe a bug: what "
        "you ran, what you expected and what you got. For a bigger task"
    )
    assert repeats_itself(looped)
    assert not repeats_itself(
        "I can find code (grep, outline), view files, fix a small bug with str_replace and run "
        "the tests. Describe a bug: what you ran, what you expected and what you got."
    )
    assert (
        Limits(min_reply_logprob=-0.6).judge(AssistantTurn(text=looped), "stop", None, lambda: -0.06)
        == "its reply ran into a loop"
    )
