"""The agent loop on its own: limits, format errors, loop guard, thinking never sent back,
trajectory flushed every step."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clover.agent import Agent
from clover.agent_run import Limits
from clover.core.model_protocol import AssistantTurn, ModelCapabilities, ToolCall
from clover.core.stage_protocol import StageDecision
from clover.core.tool_protocol import Tool, ToolResult
from clover.trajectory import Trajectory


class HoldingStage:
    """A turn stage that holds back each call whose `text` argument it has a reason for."""

    def __init__(self, holds: dict[str, str]) -> None:
        self.holds = holds

    def review(self, turn, messages, run_check):
        calls = list(turn.tool_calls)
        return StageDecision(calls, [self.holds.get(c.arguments.get("text")) for c in calls])


@dataclass
class ListModel(ModelCapabilities):
    """Replays turns and records the messages it was sent; `holds`: its turn stage holds back
    calls by their `text` argument."""

    turns: list[AssistantTurn]
    name: str = "list"
    context_window: int = 8192
    seen: list[list[dict[str, Any]]] = field(default_factory=list)
    options: list[Any] = field(default_factory=list)
    holds: dict[str, str] = field(default_factory=dict)

    def turn_stage(self):
        return HoldingStage(self.holds) if self.holds else None

    def complete(self, messages, tools, on_event=None, options=None):
        self.seen.append(json.loads(json.dumps(messages)))
        self.options.append(options)
        if not self.turns:
            return AssistantTurn(text="out of turns")
        return self.turns.pop(0)


@dataclass
class EchoTool(Tool):
    name: str = "echo"
    description: str = "Echo the text back."
    parameters: dict = field(
        default_factory=lambda: {
            "type": "object",
            "properties": {"text": {"type": "string"}, "times": {"type": "integer"}},
            "required": ["text"],
        }
    )
    kind: str = "read"
    calls: int = 0

    def run(self, args, env):
        self.calls += 1
        return ToolResult(args["text"] * args.get("times", 1))


class NullEnv:
    root = "/nonexistent"


def call(name="echo", **args) -> ToolCall:
    return ToolCall(name=name, arguments=args)


def make_agent(turns, tmp_path: Path | None = None, **limits) -> tuple[Agent, ListModel, EchoTool]:
    model, tool = ListModel(list(turns)), EchoTool()
    trajectory = Trajectory(tmp_path / "t.jsonl") if tmp_path else None
    agent = Agent(
        model, NullEnv(), [tool], system_prompt="sys", limits=Limits(**limits), trajectory=trajectory
    )
    return agent, model, tool


def test_ends_on_answer_and_records_every_step(tmp_path):
    turns = [
        AssistantTurn(
            thinking="let me echo", tool_calls=[call(text="hi")], prompt_tokens=10, completion_tokens=5
        ),
        AssistantTurn(thinking="done now", text="All done.", prompt_tokens=20, completion_tokens=3),
    ]
    agent, model, tool = make_agent(turns, tmp_path)
    result = agent.run("say hi")
    assert result.exit_status == "submitted"
    assert result.final_text == "All done."
    assert (result.steps, result.prompt_tokens, result.completion_tokens) == (2, 30, 8)
    assert tool.calls == 1
    records = Trajectory.read(tmp_path / "t.jsonl")
    assert [r["type"] for r in records] == ["user", "assistant", "tool", "assistant", "summary"]
    assert records[1]["thinking"] == "let me echo"
    assert records[2]["output"] == "hi"
    assert records[-1]["exit_status"] == "submitted"


def test_thinking_is_never_sent_back():
    turns = [AssistantTurn(thinking="SECRET-THOUGHT", tool_calls=[call(text="x")]), AssistantTurn(text="ok")]
    agent, model, _ = make_agent(turns)
    agent.run("task")
    second_request = json.dumps(model.seen[1])
    assert "SECRET-THOUGHT" not in second_request
    assistant = [m for m in model.seen[1] if m["role"] == "assistant"][0]
    assert assistant["tool_calls"][0]["function"]["name"] == "echo"
    tool_msg = model.seen[1][-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_call_id"] == assistant["tool_calls"][0]["id"]


def test_malformed_calls_get_precise_errors_and_three_in_a_row_stop():
    bad = [
        AssistantTurn(tool_calls=[ToolCall(name="echo", error="unclosed <parameter=text>")]),
        AssistantTurn(tool_calls=[call(txt="typo")]),
        AssistantTurn(tool_calls=[call(name="nope", text="x")]),
        AssistantTurn(text="never reached"),
    ]
    agent, model, tool = make_agent(bad)
    result = agent.run("task")
    assert result.exit_status == "format_error"
    assert tool.calls == 0
    errors = [m["content"] for m in agent.messages if m["role"] == "tool"]
    assert "unclosed <parameter=text>" in errors[0] and "echo takes: text (string, required)" in errors[0]
    assert "missing required parameter 'text'" in errors[1]
    assert "Unknown tool 'nope'" in errors[2] and "echo" in errors[2]


def test_a_good_call_resets_the_format_error_count():
    turns = [
        AssistantTurn(tool_calls=[call(times="2", text="a")]),  # wrong type
        AssistantTurn(tool_calls=[call(text="b")]),
        AssistantTurn(tool_calls=[call(text=3)]),
        AssistantTurn(tool_calls=[call(text="c")]),
        AssistantTurn(text="fine"),
    ]
    agent, _, tool = make_agent(turns)
    result = agent.run("task")
    assert result.exit_status == "submitted"
    assert tool.calls == 2
    assert "parameter 'times' must be integer" in agent.messages[3]["content"]


def test_a_reply_with_neither_answer_nor_call_is_not_a_submission():
    # e.g. thinking cut off by the token limit: the model is asked to go on
    turns = [
        AssistantTurn(thinking="hmm, the bug is in"),
        AssistantTurn(tool_calls=[call(text="a")]),
        AssistantTurn(text="Fixed."),
    ]
    agent, model, tool = make_agent(turns)
    result = agent.run("task")
    assert (result.exit_status, result.final_text, result.steps, tool.calls) == ("submitted", "Fixed.", 3, 1)
    nudge = model.seen[1][-1]
    assert nudge["role"] == "user" and "neither an answer nor a tool call" in nudge["content"]
    # three in a row end the run
    agent, _, _ = make_agent(
        [AssistantTurn(thinking="..."), AssistantTurn(text="  "), AssistantTurn(), AssistantTurn(text="late")]
    )
    result = agent.run("task")
    assert result.exit_status == "format_error" and "3 replies in a row" in result.error


def test_repeated_identical_calls_are_flagged_then_stop():
    turns = [AssistantTurn(tool_calls=[call(text="same")]) for _ in range(5)]
    agent, _, tool = make_agent(turns)
    result = agent.run("task")
    assert result.exit_status == "repeated_calls"
    assert tool.calls == 2  # the third is flagged instead of run, the fourth stops the run
    flagged = [m["content"] for m in agent.messages if m["role"] == "tool"][2]
    assert "3 times in a row" in flagged


def test_a_path_spelt_three_ways_is_still_the_same_call():
    # the embedded model alternated `view tests` and `view tests/` until the step limit
    spellings = ["tests", "tests/", "./tests", "tests//"]
    turns = [AssistantTurn(tool_calls=[call(text="x", path=p)]) for p in spellings]
    agent, _, tool = make_agent(turns)
    tool.parameters["properties"]["path"] = {"type": "string"}
    result = agent.run("task")
    assert result.exit_status == "repeated_calls" and tool.calls == 2
    other = [AssistantTurn(tool_calls=[call(text="x", path=p)]) for p in ["tests", "tests/a.py", "tests"]]
    other.append(AssistantTurn(text="done"))
    agent, _, tool = make_agent(other)
    tool.parameters["properties"]["path"] = {"type": "string"}
    assert agent.run("task").exit_status == "submitted" and tool.calls == 3


@pytest.mark.parametrize(
    ("limits", "status"),
    [({"max_steps": 2}, "limits_exceeded"), ({"token_limit": 15}, "limits_exceeded")],
)
def test_limits_end_the_run(limits, status):
    turns = [AssistantTurn(tool_calls=[call(text=str(i))], prompt_tokens=10) for i in range(10)]
    agent, _, _ = make_agent(turns, **limits)
    result = agent.run("task")
    assert result.exit_status == status
    assert "limit reached" in result.error


def test_time_limit(monkeypatch):
    clock = iter(range(0, 1000, 100))
    monkeypatch.setattr("clover.agent.time.monotonic", lambda: float(next(clock)))
    turns = [AssistantTurn(tool_calls=[call(text=str(i))]) for i in range(10)]
    agent, _, _ = make_agent(turns, time_limit=250)
    result = agent.run("task")
    assert result.exit_status == "limits_exceeded" and "time limit" in result.error


def test_the_step_limit_ends_with_a_reply_written_without_tools(tmp_path):
    turns = [AssistantTurn(tool_calls=[call(text=str(i))]) for i in range(2)]
    # the wrap-up turn: a backend that cannot enforce "no tools" may still send a call; it is dropped
    turns.append(AssistantTurn(text="I echoed 0 and 1; nothing is left.", tool_calls=[call(text="again")]))
    agent, model, tool = make_agent(turns, tmp_path, max_steps=2)
    result = agent.run("task")
    assert result.exit_status == "limits_exceeded" and "step limit" in result.error
    assert result.final_text == "I echoed 0 and 1; nothing is left." and tool.calls == 2
    assert [o.tool_choice if o else None for o in model.options] == [None, None, "none"]
    assert "used all 2 steps" in model.seen[-1][-1]["content"]
    assert agent.messages[-1] == {"role": "assistant", "content": "I echoed 0 and 1; nothing is left."}
    assert Trajectory.read(tmp_path / "t.jsonl")[-2]["wrap_up"] is True
    # a follow-up in the same chat goes on from a consistent conversation
    model.turns = [AssistantTurn(text="ok")]
    assert agent.run("more").final_text == "ok"


def test_no_wrap_up_when_asked_or_for_other_limits():
    turns = [AssistantTurn(tool_calls=[call(text=str(i))], prompt_tokens=10) for i in range(10)]
    agent, model, _ = make_agent(turns, max_steps=2, wrap_up=False)
    assert agent.run("task").final_text == "" and len(model.options) == 2
    agent, model, _ = make_agent(
        [AssistantTurn(tool_calls=[call(text=str(i))], prompt_tokens=10) for i in range(9)], token_limit=15
    )
    assert agent.run("task").final_text == "" and all(o is None for o in model.options)
    # a model that says it cannot answer such a request (the embedded one's config.json)
    agent, model, _ = make_agent(
        [AssistantTurn(tool_calls=[call(text=str(i))]) for i in range(9)], max_steps=2
    )
    model.wrap_up = False
    assert agent.run("task").final_text == "" and len(model.options) == 2


def test_backend_exception_becomes_model_error():
    class Broken(ListModel):
        def complete(self, messages, tools, on_event=None, options=None):
            raise ConnectionError("boom")

    agent = Agent(Broken([]), NullEnv(), [EchoTool()], system_prompt="s")
    result = agent.run("task")
    assert result.exit_status == "model_error" and "boom" in result.error


def test_interrupt_during_a_tool_keeps_the_conversation_consistent():
    class SlowTool(EchoTool):
        def run(self, args, env):
            raise KeyboardInterrupt

    model = ListModel([AssistantTurn(tool_calls=[call(text="x")]), AssistantTurn(text="after")])
    agent = Agent(model, NullEnv(), [SlowTool()], system_prompt="s")
    result = agent.run("task")
    assert result.exit_status == "interrupted"
    assert agent.messages[-1]["role"] == "tool" and "interrupted" in agent.messages[-1]["content"]
    # The session goes on: a follow-up runs normally.
    assert agent.run("continue").final_text == "after"


def test_gate_refusal_is_reported_to_the_model():
    class DenyAll:
        def authorize(self, call, tool):
            return "denied by rule bash(rm -rf *)"

    model = ListModel([AssistantTurn(tool_calls=[call(text="x")]), AssistantTurn(text="ok")])
    tool = EchoTool()
    agent = Agent(model, NullEnv(), [tool], system_prompt="s", gate=DenyAll())
    agent.run("task")
    assert tool.calls == 0
    assert agent.messages[3]["content"] == "denied by rule bash(rm -rf *)"


def test_every_call_ends_in_on_call_done_whatever_became_of_it():
    """Headless runs report refusals from here; a refused call used to reach no callback at all
    (stream-json had its tool_call and no tool_result). on_tool_result stays for calls that ran."""

    class DenyX:
        def authorize(self, call, tool):
            return "refused: no one can approve" if call.arguments.get("text") == "x" else None

        def screen(self, tool, result):
            pass

    turns = [
        AssistantTurn(
            tool_calls=[
                call(text="x"),
                call(text="ok"),
                ToolCall("echo", {}, error="bad XML"),
                ToolCall("echo", {"text": "h"}),
            ]
        )
    ]
    turns += [AssistantTurn(tool_calls=[call(text="same")]) for _ in range(4)]
    done: list[tuple[str, bool, dict]] = []
    ran: list[str] = []
    agent = Agent(
        ListModel(turns, holds={"h": "held back"}),
        NullEnv(),
        [EchoTool()],
        system_prompt="s",
        gate=DenyX(),
        on_call_done=lambda c, r: done.append((c.arguments.get("text", ""), r.is_error, r.data)),
        on_tool_result=lambda c, r: ran.append(c.arguments["text"]),
    )
    assert agent.run("task").exit_status == "repeated_calls"
    assert [(text, err, sorted(data)) for text, err, data in done] == [
        ("x", True, ["denied"]),
        ("ok", False, []),
        ("", True, ["format_error"]),
        ("h", True, ["held"]),
        ("same", False, []),
        ("same", False, []),
        ("same", True, ["repeated"]),
        ("same", True, ["stopped"]),
    ]
    assert ran == ["ok", "same", "same"]
    answered = [m["tool_call_id"] for m in agent.messages if m["role"] == "tool"]
    assert len(answered) == len(done)  # the call that stopped the run has its answer too


def test_a_call_the_turn_stage_holds_back_is_answered_with_its_reason_not_run():
    held = ToolCall(name="echo", arguments={"text": "x"})
    agent, model, tool = make_agent(
        [
            AssistantTurn(tool_calls=[held]),
            AssistantTurn(tool_calls=[call(text="y")]),
            AssistantTurn(text="done"),
        ]
    )
    model.holds = {"x": "Not applied: it would undo the fix."}
    assert agent.run("task").exit_status == "submitted"
    assert tool.calls == 1 and agent.messages[3]["content"] == "Not applied: it would undo the fix."
    assert agent.format_errors == 0


@dataclass
class EditTool(EchoTool):
    name: str = "edit"
    kind: str = "edit"

    def run(self, args, env):
        result = super().run(args, env)
        result.edited = True  # what the file tools say of a call that changed a file
        return result


def test_a_fix_answer_before_any_edit_is_redone_as_a_required_call(tmp_path):
    """`clover fix` (early_answer_redos): an answer before any file was edited is replaced by a turn
    that must call a tool, up to the limit; after an edit the model answers when it likes."""
    turns = [
        AssistantTurn(text="Fixed, all tests pass."),
        AssistantTurn(tool_calls=[call("edit", text="x")]),
        AssistantTurn(text="Done: changed x."),
    ]
    model = ListModel(list(turns))
    agent = Agent(
        model,
        NullEnv(),
        [EchoTool(), EditTool()],
        system_prompt="sys",
        limits=Limits(early_answer_redos=2),
        trajectory=Trajectory(tmp_path / "t.jsonl"),
    )
    result = agent.run("fix it")
    assert result.exit_status == "submitted" and result.final_text == "Done: changed x."
    assert [o.tool_choice if o else None for o in model.options] == [None, "required", None]
    assert all(m.get("content") != "Fixed, all tests pass." for m in agent.messages)  # not in the chat
    redo = [r for r in Trajectory.read(tmp_path / "t.jsonl") if r["type"] == "redo"]
    assert [r["text"] for r in redo] == ["Fixed, all tests pass."]


def test_early_answers_are_redone_only_up_to_the_limit_and_not_in_chat():
    turns = []
    for i in range(3):  # an answer, and the call its redo gets
        turns += [AssistantTurn(text=f"answer {i}"), AssistantTurn(tool_calls=[call(text=str(i))])]
    agent, model, _ = make_agent(turns, early_answer_redos=2)
    assert agent.run("fix it").final_text == "answer 2"
    assert [o.tool_choice if o else None for o in model.options] == [None, "required", None, "required", None]
    agent, model, _ = make_agent([AssistantTurn(text="hi there")])  # chat: no redo
    assert agent.run("hello").final_text == "hi there" and model.options == [None]
    # a failed edit is not an edit
    failing = [AssistantTurn(tool_calls=[call("edit", text="x")]), AssistantTurn(text="done")]
    model = ListModel(list(failing) + [AssistantTurn(text="done again")])

    class Broken(EditTool):
        def run(self, args, env):
            return ToolResult("no match", is_error=True)

    agent = Agent(model, NullEnv(), [Broken()], system_prompt="sys", limits=Limits(early_answer_redos=1))
    assert agent.run("fix it").final_text == "done again"


def test_the_checkpoint_asks_for_redos_and_only_a_fix_gets_them(tmp_path):
    """early_answer_redos comes from the model (the embedded checkpoint's config.json sets it);
    `clover fix` (kind "fix") applies it, chat never does."""
    from clover.backends.local import LocalCloverModel
    from clover.runner import build_agent
    from clover.settings import Settings
    from clover.tools.environment import LocalEnvironment

    assert LocalCloverModel(Settings(model="embedded")).early_answer_redos == 1
    model = ListModel([])
    model.early_answer_redos = 1  # type: ignore[attr-defined]
    env = LocalEnvironment(str(tmp_path))
    assert build_agent(Settings(), env, kind="fix", model=model).limits.early_answer_redos == 1
    assert build_agent(Settings(), env, kind="chat", model=model).limits.early_answer_redos == 0
    assert build_agent(Settings(), env, kind="fix", model=ListModel([])).limits.early_answer_redos == 0
