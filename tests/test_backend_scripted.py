"""ScriptedModel replays turns from files or lists; make_model picks backends."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from clover.backends import make_model
from clover.backends.scripted import ScriptedModel
from clover.core.model_protocol import Model
from clover.core.stops import ModelError
from clover.settings import Settings

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "view",
            "description": "",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
            },
        },
    }
]


def test_replays_turns_from_a_json_file_and_runs_out(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps(
            [
                {
                    "thinking": "look first",
                    "text": "Looking.",
                    "tool_calls": [{"name": "view", "arguments": {"path": "a.py"}}],
                },
                {"text": "Done."},
            ]
        )
    )
    model = make_model(Settings(model=f"scripted:{path}"))
    assert isinstance(model, ScriptedModel) and isinstance(model, Model)
    events = []
    turn = model.complete([{"role": "user", "content": "go"}], TOOLS, events.append)
    assert (turn.thinking, turn.text) == ("look first", "Looking.")
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("view", {"path": "a.py"})]
    assert [e.kind for e in events] == ["thinking", "text", "tool_call", "usage"]
    assert events[2].data == {"name": "view", "arguments": {"path": "a.py"}}
    assert turn.prompt_tokens > 0 and turn.completion_tokens > 0
    assert model.complete([], TOOLS).text == "Done."
    with pytest.raises(ModelError, match=f"no more turns in {path}"):
        model.complete([], TOOLS)
    assert len(model.requests) == 3 and model.requests[0] == [{"role": "user", "content": "go"}]


def test_jsonl_raw_turns_are_parsed_with_the_tool_schemas(tmp_path):
    raw = (
        "<think>\nhm\n</think>\n\nOk.\n<tool_call>\n<function=view>\n<parameter=path>\nb.py\n"
        "</parameter>\n<parameter=line>\n4\n</parameter>\n</function>\n</tool_call>"
    )
    path = tmp_path / "script.jsonl"
    path.write_text(
        json.dumps({"raw": raw}) + "\n\n" + json.dumps({"raw": "<tool_call>\n<function=view>\n"}) + "\n"
    )
    model = ScriptedModel(path)
    turn = model.complete([], TOOLS)
    assert (turn.thinking, turn.text) == ("hm", "Ok.")
    assert turn.tool_calls[0].arguments == {"path": "b.py", "line": 4} and turn.tool_calls[0].error is None
    assert "missing </function>" in model.complete([], TOOLS).tool_calls[0].error


def test_in_memory_turns_delay_and_error():
    model = ScriptedModel([{"text": "slow", "delay": 0.2}, {"error": "server on fire"}])
    start = time.monotonic()
    assert model.complete([], []).text == "slow"
    assert time.monotonic() - start >= 0.2
    with pytest.raises(ModelError, match="server on fire"):
        model.complete([], [])


def test_bad_scripts_give_one_line_errors(tmp_path):
    with pytest.raises(ModelError, match="cannot read"):
        ScriptedModel(tmp_path / "missing.json")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{oops\n')
    with pytest.raises(ModelError, match="line 2: invalid JSON"):
        ScriptedModel(bad)
    with pytest.raises(ModelError, match="unknown keys"):
        ScriptedModel([{"txt": "typo"}]).complete([], [])
    with pytest.raises(ModelError, match='needs a "name"'):
        ScriptedModel([{"tool_calls": [{"arguments": {}}]}]).complete([], [])


def test_make_model_choices(tmp_path):
    with pytest.raises(ModelError, match="--base-url"):
        make_model(Settings(model="gpt-4o-mini"))
    from clover.backends.openai_compat import OpenAICompatModel

    model = make_model(Settings(model="some-model", base_url="http://127.0.0.1:9/v1"))
    assert isinstance(model, OpenAICompatModel) and model.name == "some-model"
    try:  # the local backend arrives separately; until then its absence is a clear error
        import clover.backends.local  # noqa: F401
    except ImportError:
        with pytest.raises(ModelError, match="local Clover model"):
            make_model(Settings(model=str(tmp_path)))


def test_backends_package_imports_nothing_heavy():
    code = (
        "import sys, clover.backends; assert not {'torch', 'openai'} & set(sys.modules), sys.modules.keys()"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
