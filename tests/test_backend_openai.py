"""OpenAICompatModel against a real HTTP server on 127.0.0.1 (tests/fakeserver.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from clover.agent import Agent
from clover.backends.openai_compat import OpenAICompatModel
from clover.core.stops import ModelError
from clover.settings import Settings
from tests.fakeserver import FakeChatServer, FakeReply

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "view",
            "description": "Show a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
                "required": ["path"],
            },
        },
    }
]
USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Look at a.py"}]
XML_CALL = (
    "<tool_call>\n<function=view>\n<parameter=path>\na.py\n</parameter>\n<parameter=line>\n3\n"
    "</parameter>\n</function>\n</tool_call>"
)


def make(server: FakeChatServer, **kw) -> OpenAICompatModel:
    stream = kw.pop("stream", True)
    settings = Settings(model="test-model", base_url=server.url, **kw)
    return OpenAICompatModel(settings, stream=stream, max_retries=0)


@pytest.fixture
def server():
    with FakeChatServer() as srv:
        yield srv


@pytest.mark.parametrize("stream", [True, False])
def test_native_tool_calls(server, stream):
    server.add(
        FakeReply(
            text="Looking.",
            tool_calls=[
                {"name": "view", "arguments": {"path": "a.py", "line": 3}},
                {"name": "view", "arguments": {"path": "b.py"}, "id": "x9"},
            ],
            prompt_tokens=21,
            completion_tokens=9,
        )
    )
    events = []
    turn = make(server, stream=stream).complete(USER, TOOLS, events.append)
    assert turn.text == "Looking." and turn.finish_reason == "tool_calls"
    assert [(c.name, c.arguments, c.id, c.error) for c in turn.tool_calls] == [
        ("view", {"path": "a.py", "line": 3}, "call_0", None),
        ("view", {"path": "b.py"}, "x9", None),
    ]
    assert (turn.prompt_tokens, turn.completion_tokens) == (21, 9)
    assert "".join(e.text for e in events if e.kind == "text") == "Looking."
    assert [e.data for e in events if e.kind == "tool_call"] == [
        {"name": "view", "arguments": {"path": "a.py", "line": 3}},
        {"name": "view", "arguments": {"path": "b.py"}},
    ]
    assert events[-1].kind == "usage" and events[-1].data == {"prompt_tokens": 21, "completion_tokens": 9}
    sent = server.requests[0]
    assert sent["tools"] == TOOLS and sent["messages"] == USER and sent["model"] == "test-model"
    assert sent.get("stream", False) is stream and ("stream_options" in sent) is stream


def test_bad_native_arguments_become_call_errors(server):
    server.add(
        FakeReply(
            tool_calls=[
                {"name": "view", "arguments": '{"path": "a.py"'},
                {"name": "view", "arguments": "[1]"},
                {"name": "view", "arguments": ""},
            ]
        )
    )
    calls = make(server).complete(USER, TOOLS).tool_calls
    assert "not valid JSON" in calls[0].error and calls[0].raw == '{"path": "a.py"'
    assert "must be a JSON object" in calls[1].error
    assert calls[2].error is None and calls[2].arguments == {}


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
@pytest.mark.parametrize("stream", [True, False])
def test_reasoning_becomes_thinking(server, field, stream):
    server.add(FakeReply(text="Answer.", reasoning="Let me think about it.", reasoning_field=field))
    events = []
    turn = make(server, stream=stream).complete(USER, [], events.append)
    assert (turn.thinking, turn.text) == ("Let me think about it.", "Answer.")
    assert "".join(e.text for e in events if e.kind == "thinking") == "Let me think about it."
    assert "".join(e.text for e in events if e.kind == "text") == "Answer."


def test_think_tags_in_content_become_thinking(server):
    server.add(
        FakeReply(text="<think>\nhidden plan\n</think>\n\nVisible."),
        FakeReply(text="plan only</think>\n\nAfter."),
    )
    events = []
    model = make(server)
    turn = model.complete(USER, [], events.append)
    assert (turn.thinking, turn.text) == ("hidden plan", "Visible.")
    assert "".join(e.text for e in events if e.kind == "thinking") == "hidden plan\n"
    assert "".join(e.text for e in events if e.kind == "text") == "Visible."
    assert model.complete(USER, []).thinking == "plan only"  # the server's template opened <think>


def test_text_mode_renders_tools_and_history_as_text(server):
    server.add(FakeReply(text=f"I will look.\n{XML_CALL}"))
    history = USER + [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "view", "arguments": '{"path": "z.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "view", "content": "file body"},
    ]
    events = []
    turn = make(server, tool_format="text").complete(history, TOOLS, events.append)
    assert turn.text == "I will look."
    assert [(c.name, c.arguments, c.error) for c in turn.tool_calls] == [
        ("view", {"path": "a.py", "line": 3}, None)
    ]
    assert "<tool_call>" not in "".join(e.text for e in events)  # call markup is held back from the stream
    sent = server.requests[0]
    assert "tools" not in sent
    roles = [m["role"] for m in sent["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert (
        sent["messages"][0]["content"].startswith("Be brief.\n\n# Tools")
        and "<name>view</name>" in sent["messages"][0]["content"]
    )
    assert "<function=view>\n<parameter=path>\nz.py\n</parameter>" in sent["messages"][2]["content"]
    assert sent["messages"][3]["content"] == "<tool_response>\nfile body\n</tool_response>"


@pytest.mark.parametrize(
    "reply",
    [
        XML_CALL,
        '<tool_call>\n{"name": "view", "arguments": {"path": "a.py", "line": 3}}\n</tool_call>',
    ],
)
def test_auto_switches_to_text_when_calls_come_as_text(server, reply):
    server.add(FakeReply(text=reply), FakeReply(text="Done."))
    model = make(server)  # tool_format auto
    turn = model.complete(USER, TOOLS)
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("view", {"path": "a.py", "line": 3})]
    assert model.tool_format == "text"
    assert "tools" in server.requests[0]
    model.complete(USER, TOOLS)
    assert "tools" not in server.requests[1] and "<tools>" in server.requests[1]["messages"][0]["content"]


def test_native_mode_does_not_parse_text_calls(server):
    server.add(FakeReply(text=XML_CALL))
    model = make(server, tool_format="native")
    assert model.complete(USER, TOOLS).tool_calls == [] and model.tool_format == "native"


def test_rejected_optional_fields_fall_back():
    with FakeChatServer([FakeReply(text="one"), FakeReply(text="two")], reject_stream_options=True) as srv:
        model = make(srv, think=False)
        assert model.complete(USER, []).text == "one"
        assert model.complete(USER, []).text == "two"
        assert "stream_options" in srv.requests[0] and "stream_options" not in srv.requests[1]
        assert srv.requests[1]["chat_template_kwargs"] == {"enable_thinking": False}
        assert len(srv.requests) == 3  # one rejected request, then one per turn
    with FakeChatServer([FakeReply(text=XML_CALL)], reject_tools=True) as srv:
        model = make(srv)
        assert model.complete(USER, TOOLS).tool_calls[0].arguments == {"path": "a.py", "line": 3}
        assert model.tool_format == "text"


def test_a_rejected_tool_choice_is_dropped_not_the_tools():
    """A server without tool_choice support (`clover fix` asks for "required" when it redoes an early
    answer): the turn is asked again without it, and tools stay native."""
    from clover.core.model_protocol import TurnOptions

    native = FakeReply(tool_calls=[{"name": "view", "arguments": {"path": "a.py", "line": 3}}])
    with FakeChatServer([native, FakeReply(text="two")], reject_tool_choice=True) as srv:
        model = make(srv, tool_format="auto")
        turn = model.complete(USER, TOOLS, options=TurnOptions(tool_choice="required"))
        assert turn.tool_calls[0].arguments == {"path": "a.py", "line": 3} and model.tool_format == "auto"
        assert srv.requests[0]["tool_choice"] == "required" and "tool_choice" not in srv.requests[1]
        assert "tools" in srv.requests[1]
        assert model.complete(USER, TOOLS, options=TurnOptions(tool_choice="none")).text == "two"
        assert len(srv.requests) == 3 and "tool_choice" not in srv.requests[2]


def test_unreachable_server_names_the_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAICompatModel(Settings(model="m", base_url=f"http://127.0.0.1:{port}/v1"), max_retries=0)
    with pytest.raises(
        ModelError, match=rf"cannot reach the model server at http://127.0.0.1:{port}/v1"
    ) as info:
        model.complete(USER, [])
    assert "\n" not in str(info.value)


def test_closed_server_is_unreachable():
    srv = FakeChatServer([FakeReply(text="never")])
    model = make(srv)
    srv.close()
    with pytest.raises(ModelError, match="cannot reach"):
        model.complete(USER, [])


def test_http_errors_are_one_line():
    with FakeChatServer(api_key="right-key", models=["test-model"]) as srv:
        with pytest.raises(
            ModelError,
            match=r"rejected the API key \(HTTP 401: Incorrect API key provided.\); no API key is set",
        ):
            make(srv).complete(USER, [])
        with pytest.raises(ModelError, match="rejected the API key.*check --api-key"):
            make(srv, api_key="wrong").complete(USER, [])
        with pytest.raises(ModelError, match="model 'other' not found at .*/v1.*does not exist"):
            OpenAICompatModel(
                Settings(model="other", base_url=srv.url, api_key="right-key"), max_retries=0
            ).complete(USER, [])
        srv.add(FakeReply(status=503, error="overloaded,\n try later"))
        with pytest.raises(ModelError, match="answered HTTP 503: overloaded, try later$"):
            make(srv, api_key="right-key").complete(USER, [])


# --------------------------------------------------------------------------- end to end

BUGGY = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


def _repo(path):
    path.mkdir()
    (path / "calc.py").write_text(BUGGY)
    (path / "test_calc.py").write_text(TEST)
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True)
    return path


def _xml(name: str, **args: str) -> str:
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def _replies(text_calls: bool) -> list[FakeReply]:
    pytest_cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider test_calc.py"
    steps = [
        ("view", {"path": "calc.py"}),
        ("str_replace", {"path": "calc.py", "old_str": "return a - b", "new_str": "return a + b"}),
        ("bash", {"command": pytest_cmd}),
    ]
    out = []
    for name, args in steps:
        if text_calls:
            out.append(FakeReply(text=f"Next: {name}.\n{_xml(name, **args)}", reasoning=f"SECRET-{name}"))
        else:
            out.append(FakeReply(tool_calls=[{"name": name, "arguments": args}], reasoning=f"SECRET-{name}"))
    out.append(FakeReply(text="Fixed: add() subtracted.", reasoning="SECRET-final"))
    return out


@pytest.mark.parametrize("text_calls", [False, True], ids=["native", "text"])
def test_agent_fixes_a_bug_through_the_fake_server(tmp_path, text_calls):
    from clover.tools.environment import LocalEnvironment
    from clover.tools.registry import tools_by_name

    repo = _repo(tmp_path / "repo")
    tools = tools_by_name()
    env = LocalEnvironment(str(repo), timeout=60)
    with FakeChatServer(_replies(text_calls)) as srv:
        model = make(srv)
        agent = Agent(
            model, env, [tools["view"], tools["str_replace"], tools["bash"]], system_prompt="Fix bugs."
        )
        result = agent.run("add(2, 3) returns -1")
        assert result.exit_status == "submitted", result.error
        assert result.final_text == "Fixed: add() subtracted." and result.steps == 4
        assert (repo / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
        tool_outputs = [m["content"] for m in agent.messages if m["role"] == "tool"]
        assert "1 passed" in tool_outputs[2]
        assert model.tool_format == ("text" if text_calls else "auto")
        # Thinking never goes back to the server.
        assert not any("SECRET" in json.dumps(r) for r in srv.requests)
        last = srv.requests[-1]["messages"]
        if text_calls:
            assert "tools" not in srv.requests[-1]
            assert (
                last[-1]["role"] == "user"
                and "<tool_response>" in last[-1]["content"]
                and "1 passed" in last[-1]["content"]
            )
        else:
            assert srv.requests[-1]["tools"][0]["function"]["name"] == "view"
            assert last[-1]["role"] == "tool" and "1 passed" in last[-1]["content"]


def test_turn_options_apply_to_one_request_only():
    """Per-turn options (the chat's /think, clover serve's per-request fields) change that request,
    never the backend's settings."""
    from clover.core.model_protocol import TurnOptions

    with FakeChatServer([FakeReply(text="a"), FakeReply(text="b"), FakeReply(text="c")]) as srv:
        model = make(srv, max_tokens=100)
        model.complete(USER, [])
        model.complete(USER, [], None, TurnOptions(think=False, max_tokens=7, temperature=0.5))
        model.complete(USER, [])
        first, second, third = srv.requests
        assert "chat_template_kwargs" not in first and first["max_tokens"] == 100
        assert second["chat_template_kwargs"] == {"enable_thinking": False}
        assert (second["max_tokens"], second["temperature"]) == (7, 0.5)
        assert third == first | {"messages": third["messages"]}
        assert model.settings.think and model.settings.max_tokens == 100


def test_a_turn_that_may_not_call_sends_tool_choice_none():
    from clover.core.model_protocol import TurnOptions

    with FakeChatServer([FakeReply(text="a"), FakeReply(text="b")]) as srv:
        model = make(srv)
        model.complete(USER, TOOLS)
        model.complete(USER, TOOLS, None, TurnOptions(tool_choice="none"))
        first, second = srv.requests
        assert "tool_choice" not in first and first["tools"] == second["tools"]
        assert second["tool_choice"] == "none"
