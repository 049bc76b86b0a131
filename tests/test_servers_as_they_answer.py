"""The OpenAI backend against servers as they really answer, each from a real HTTP server on
127.0.0.1 sending exactly what that server sends: every context-overflow message of the table, a 200
that is not a stream, a stream that ends empty or breaks, a tool-call parse failure, a template
without tools, the context size wherever a server says it, the model name when one is served."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from clover.backends.openai_compat import OpenAICompatModel
from clover.backends.server_errors import OVERFLOWS, overflow_of
from clover.core.stops import ModelError
from clover.repl.headless import run_print
from clover.settings import Settings
from tests.fakeserver import FakeChatServer, FakeReply
from tests.server_answers import answer_for

USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello " * 200}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "view",
            "description": "Show a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


def make(server: FakeChatServer, **settings: object) -> OpenAICompatModel:
    values = {"model": "m", "base_url": server.url, **settings}
    return OpenAICompatModel(Settings(**values), max_retries=0)  # type: ignore[arg-type]


@pytest.mark.parametrize("form", OVERFLOWS, ids=lambda f: f"{f.server}: {f.situation}"[:60])
def test_every_overflow_in_the_table_is_read_from_the_servers_own_answer(form) -> None:
    """Each server's wording, sent as that server sends it: recognised, with what it tells."""
    assert overflow_of(form.example) is not None  # the table's own example
    only_max_tokens = OVERFLOWS.index(form) == 2
    max_tokens, limit = (4000, 600) if only_max_tokens else (100, 300)  # the prompt is ~320 tokens
    with FakeChatServer([FakeReply(text="fits now")], context_limit=limit, overflow=answer_for(form)) as srv:
        model = make(srv, max_tokens=max_tokens)
        if only_max_tokens:  # the prompt fits: asked again with the max_tokens that fits
            turn = model.complete(USER, [])
            assert turn.text == "fits now" and srv.requests[-1]["max_tokens"] < 300
            return
        with pytest.raises(ModelError) as caught:
            model.complete(USER, [])
    error = caught.value
    assert getattr(error, "context_overflow", False), str(error)
    assert str(error).startswith(f"the model server at {srv.url} answered HTTP 400: ")
    if "window" in form.groups:
        assert model.context_window == 300 and model.window_source == "the server's error"


def _prompt(
    tmp_path: Path, server: FakeChatServer, prompt: str = "hi", **settings: object
) -> tuple[int, str, str]:
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    out, err = io.StringIO(), io.StringIO()
    values = {"model": "m", "base_url": server.url, "checkpoints": False, **settings}
    code = run_print(Settings(**values), repo, prompt, "text", out=out, err=err)  # type: ignore[arg-type]
    return code, out.getvalue(), err.getvalue()


def test_an_overflow_compacts_and_continues_headless(tmp_path: Path) -> None:
    """llama.cpp's HTTP 400 mid-run: clover -p compacts the older turns and asks again."""
    calls = [{"name": "bash", "arguments": {"command": f"echo {c * 3000}"}} for c in "zy"]

    def replies(*extra: FakeReply) -> list[FakeReply]:
        return [FakeReply(tool_calls=[calls[0]]), FakeReply(tool_calls=[calls[1]]), *extra]

    with FakeChatServer(replies(FakeReply(text="Done."))) as srv:  # the sizes the requests have
        _prompt(tmp_path, srv, "echo two long lines", mode="yolo")
        second, third = (len(json.dumps(r["messages"])) // 4 for r in srv.requests[1:3])
    limit = (second + third) // 2  # the third request does not fit
    done = replies(FakeReply(text="Summary: echoed z."), FakeReply(text="Done."))
    with FakeChatServer(done, context_limit=limit, overflow=answer_for(OVERFLOWS[0])) as srv:
        code, out, err = _prompt(tmp_path, srv, "echo two long lines", mode="yolo")
    assert code == 0 and out == "Done.\n", err
    assert f"too long for m's {limit:,}-token context" in err and "older messages compacted" in err
    assert len(srv.requests) == 5  # two calls, the refusal, the summary, the retry
    assert "z" * 3000 not in json.dumps(srv.requests[-1]["messages"])  # the old output is summarised


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        (FakeReply(raw="<html><head><title>502 Bad Gateway</title></head></html>"), "with text/html"),
        (
            FakeReply(raw='{"error": {"message": "model is loading"}}', content_type="application/json"),
            "model is loading",
        ),
        (FakeReply(text="never", drop_after=0), "stream ended before any reply"),
    ],
    ids=["html", "json-instead-of-a-stream", "empty-stream"],
)
def test_a_200_that_is_not_a_reply_is_a_backend_failure(tmp_path: Path, reply: FakeReply, said: str) -> None:
    with FakeChatServer([reply]) as srv:
        code, out, err = _prompt(tmp_path, srv)
    assert code == 5 and out == "" and said in err, err
    assert len(srv.requests) == 1  # not sent again


def test_a_stream_that_breaks_after_tokens_keeps_them(tmp_path: Path) -> None:
    """Chunk-encoded, as llama.cpp streams: the server goes away mid-message (httpx raises)."""
    with FakeChatServer([FakeReply(text="The answer is forty-two, and", drop_after=4)], chunked=True) as srv:
        turn = make(srv).complete(USER, [])
        assert turn.text == "The answer is fo" and turn.finish_reason == "incomplete"
        srv.add(FakeReply(text="never", drop_after=0))
        with pytest.raises(ModelError, match="broke before any reply"):
            make(srv).complete(USER, [])
    with FakeChatServer([FakeReply(text="Partial answer", drop_after=2)], chunked=True) as srv:
        code, out, err = _prompt(tmp_path, srv)
    assert code == 5 and out == "Partial\n" and "cannot reach" not in err


@pytest.mark.parametrize("in_stream", [False, True], ids=["http-500", "error-event"])
def test_a_tool_call_parse_failure_is_asked_again_as_text(in_stream: bool) -> None:
    message = 'Failed to parse input at pos 27: <tool_call>\n{"name": "view", "argum'
    failed = (
        FakeReply(text="", error_event={"code": 500, "message": message, "type": "server_error"})
        if in_stream
        else FakeReply(status=500, body={"error": {"code": 500, "message": message, "type": "server_error"}})
    )
    again = FakeReply(text='<tool_call>\n{"name": "view", "arguments": {"path": "a.py"}}\n</tool_call>')
    with FakeChatServer([failed, again]) as srv:
        turn = make(srv).complete(USER, TOOLS)
        assert [(c.name, c.arguments) for c in turn.tool_calls] == [("view", {"path": "a.py"})]
        assert "tools" in srv.requests[0] and "tools" not in srv.requests[1]  # the retry: calls as text
        assert "view" in srv.requests[1]["messages"][0]["content"]  # the specs went into the prompt


def test_a_template_without_tools_gets_text_tools() -> None:
    props = {"chat_template_caps": {"supports_tools": False}, "default_generation_settings": {"n_ctx": 4096}}
    with FakeChatServer([FakeReply(text="ok")], models=["m"], props=props) as srv:
        model = make(srv)
        model.complete(USER, TOOLS)
        assert "tools" not in srv.requests[0] and model.tool_format == "text"
        assert model.context_window == 4096 and model.window_source == "GET /props"
        with pytest.raises(ModelError, match="takes no tools"):
            make(srv, tool_format="native").complete(USER, TOOLS)


@pytest.mark.parametrize(
    ("server", "window", "source"),
    [
        ({"max_model_len": 32768}, 32768, "GET /v1/models"),  # vLLM
        (
            {"model_fields": {"meta": {"n_ctx": 2048, "n_ctx_train": 8192}}},
            2048,
            "GET /v1/models",
        ),  # llama.cpp
        ({"props": {"default_generation_settings": {"n_ctx": 1024}}}, 1024, "GET /props"),  # llama.cpp slots
        (
            {"ollama_ps": {"models": [{"name": "m", "model": "m", "context_length": 8192}]}},
            8192,
            "GET /api/ps",
        ),
        ({"ollama_show": {"parameters": "stop <|im_end|>\nnum_ctx 16384"}}, 16384, "POST /api/show"),
        ({}, 0, "unknown"),  # llama-cpp-python: nothing says
    ],
    ids=["vllm", "llamacpp-meta", "llamacpp-props", "ollama-ps", "ollama-show", "unknown"],
)
def test_the_context_size_is_read_where_each_server_puts_it(server: dict, window: int, source: str) -> None:
    with FakeChatServer(models=["m"], **server) as srv:
        model = make(srv)
        assert (model.context_window, model.window_source) == (window, source)


def test_the_model_is_named_by_the_server_when_it_serves_one() -> None:
    with FakeChatServer([FakeReply(text="hi")], models=["SmolLM2-135M-Instruct.Q4_1.gguf"]) as srv:
        model = make(srv, model="embedded")
        assert model.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
        model.complete(USER, [])
        assert srv.requests[-1]["model"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    with (
        FakeChatServer(models=["a", "b"]) as srv,
        pytest.raises(ModelError, match=r"serves 2 models \(a, b\)"),
    ):
        make(srv, model="embedded")


def test_print_takes_tool_format(tmp_path: Path) -> None:
    from tests.clihelp import run_clover

    with FakeChatServer([FakeReply(text="ok")], models=["m"]) as srv:
        args = ["-p", "look", "--base-url", srv.url, "--tool-format", "text", "--output-format", "json"]
        done = run_clover(*args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["result"] == "ok"
        assert "tools" not in srv.requests[0]
