"""`clover serve` answered by the openai SDK over real HTTP on 127.0.0.1, streaming and not."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from dataclasses import dataclass, field

import pytest

pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")

from clover.core.model_protocol import AssistantTurn, StreamEvent, ToolCall  # noqa: E402
from clover.serve import create_app  # noqa: E402
from clover.settings import Settings  # noqa: E402


@dataclass
class EchoModel:
    """Answers with the last user message; asks for a tool when tools are offered."""

    name: str = "echo-model"
    context_window: int = 4096
    requests: list = field(default_factory=list)
    settings: Settings = field(default_factory=Settings)  # as LocalCloverModel: decoding options
    seen: list = field(default_factory=list)  # (max_tokens, temperature, think) each request ran with

    def complete(self, messages, tools, on_event=None, options=None):
        self.requests.append((messages, tools))
        s = dataclasses.replace(self.settings, **options.overrides()) if options else self.settings
        self.seen.append((s.max_tokens, s.temperature, s.think))
        last = messages[-1]["content"]
        if on_event:
            on_event(StreamEvent("thinking", "thinking about it"))
            for word in ("echo: ", last):
                on_event(StreamEvent("text", word))
        calls = [ToolCall(name=tools[0]["function"]["name"], arguments={"path": "a.py"})] if tools else []
        return AssistantTurn(
            text=f"echo: {last}",
            thinking="thinking about it",
            tool_calls=calls,
            prompt_tokens=7,
            completion_tokens=3,
        )


@pytest.fixture(scope="module")
def server():
    model = EchoModel()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(create_app(model), host="127.0.0.1", port=port, log_level="error")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not srv.started and time.time() < deadline:
        time.sleep(0.02)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    yield client, model
    srv.should_exit = True
    thread.join(5)


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "view",
            "description": "d",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


def test_non_streaming(server):
    client, _ = server
    reply = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}])
    assert reply.choices[0].message.content == "echo: hello"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.total_tokens == 10
    assert [m.id for m in client.models.list().data] == ["echo-model"]


def test_non_streaming_tool_calls(server):
    client, model = server
    reply = client.chat.completions.create(
        model="x", messages=[{"role": "user", "content": "look"}], tools=TOOLS
    )
    call = reply.choices[0].message.tool_calls[0]
    assert (call.function.name, call.function.arguments) == ("view", '{"path": "a.py"}')
    assert reply.choices[0].finish_reason == "tool_calls"
    assert model.requests[-1][1][0]["function"]["name"] == "view"


def test_streaming(server):
    client, _ = server
    stream = client.chat.completions.create(
        model="x",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
        tools=TOOLS,
    )
    text, calls, finish, usage = "", [], None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            calls += choice.delta.tool_calls or []
            finish = choice.finish_reason or finish
    assert text == "echo: hi"
    assert calls[0].function.name == "view"
    assert finish == "tool_calls"
    assert usage.prompt_tokens == 7


def test_bad_request_is_a_clear_error(server):
    client, _ = server
    with pytest.raises(openai.BadRequestError, match="messages"):
        client.chat.completions.create(model="x", messages=[])


def test_request_max_tokens_and_temperature_reach_the_model(server):
    # They used to be ignored: a 20-token request to the local Clover decoded up to 4096 tokens.
    client, model = server
    default = Settings().max_tokens
    client.chat.completions.create(
        model="x", messages=[{"role": "user", "content": "a"}], max_tokens=5, temperature=0.3
    )
    assert model.seen[-1] == (5, 0.3, True)
    stream = client.chat.completions.create(
        model="x",
        messages=[{"role": "user", "content": "b"}],
        max_completion_tokens=7,
        stream=True,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    list(stream)
    assert model.seen[-1] == (7, None, False)
    client.chat.completions.create(model="x", messages=[{"role": "user", "content": "c"}])
    # per-turn options, never a swapped-in settings object
    assert model.seen[-1] == (default, None, True) and model.settings == Settings()
    for bad in (
        {"max_tokens": -1},
        {"max_tokens": "many"},
        {"temperature": 9},
        {"extra_body": {"chat_template_kwargs": {"enable_thinking": "no"}}},
    ):
        with pytest.raises(openai.BadRequestError, match="must be"):
            client.chat.completions.create(model="x", messages=[{"role": "user", "content": "d"}], **bad)


def test_busy_or_invalid_port_is_one_line_before_loading(capsys):
    from typer import Exit

    from clover.serve import serve

    settings = Settings(model="scripted:/nonexistent.json")  # never loaded: the port is checked first
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        with pytest.raises(Exit) as exc:
            serve(settings, port=port)
    assert exc.value.exit_code == 2
    assert (
        capsys.readouterr().err.strip()
        == f"clover: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
    with pytest.raises(Exit):
        serve(settings, port=99999)
    assert "--port must be between 0 and 65535" in capsys.readouterr().err
