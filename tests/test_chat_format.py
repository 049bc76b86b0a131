"""model/text/chat.py: ChatML rendering, thinking, tool-call formats, streaming classification."""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import example, given, settings
from hypothesis import strategies as st

from clover.model.text.chat import (
    SPECIAL_TOKENS,
    StreamParser,
    parse_assistant,
    parse_tool_calls,
    render_messages,
    split_thinking,
    text_messages,
    tool_schemas,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "view",
            "description": "Show a file.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "file path"},
                    "view_range": {"type": "array", "items": {"type": "integer"}},
                    "line": {"type": "integer"},
                    "verbose": {"type": "boolean"},
                },
                "required": ["path"],
            },
        },
    }
]
SCHEMAS = tool_schemas(TOOLS)


def call_msg(name: str, args: dict, call_id: str = "c1") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def test_render_full_conversation():
    messages = [
        {"role": "system", "content": "You are Clover."},
        {"role": "user", "content": "Fix it."},
        {
            "role": "assistant",
            "content": "<think>secret plan</think>Looking.",
            "tool_calls": [
                call_msg("view", {"path": "a.py", "view_range": [1, 5]}),
                call_msg("view", {"path": "b.py"}, "c2"),
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "tool", "tool_call_id": "c2", "content": "two"},
        {"role": "assistant", "content": "Done."},
    ]
    out = render_messages(messages, TOOLS)
    assert out.startswith("<|im_start|>system\nYou are Clover.\n\n# Tools")
    assert "<tools>" in out and "<name>view</name>" in out and "<required>true</required>" in out
    assert "secret plan" not in out  # history keeps only final answers
    assert (
        "<|im_start|>assistant\nLooking.\n<tool_call>\n<function=view>\n<parameter=path>\na.py\n</parameter>\n"
        "<parameter=view_range>\n[1, 5]\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=view>\n"
        "<parameter=path>\nb.py\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
    ) in out
    # Consecutive tool results share one user turn.
    assert (
        "<|im_start|>user\n<tool_response>\none\n</tool_response>\n<tool_response>\ntwo\n</tool_response><|im_end|>\n"
    ) in out
    assert out.endswith("<|im_start|>assistant\nDone.<|im_end|>\n<|im_start|>assistant\n<think>\n")
    assert out.count("<|im_start|>") == out.count("<|im_end|>") + 1


def test_compact_tool_prompt_lists_signatures_only():
    msgs = [{"role": "system", "content": "SYS"}, {"role": "user", "content": "hi"}]
    full = render_messages(msgs, TOOLS)
    compact = render_messages(msgs, TOOLS, tool_prompt="compact")
    assert "- view(path, view_range?, line?, verbose?)" in compact
    assert "Show a file." in full and "Show a file." not in compact
    assert compact.startswith("<|im_start|>system\nSYS\n\n# Tools") and "<function=NAME>" in compact
    assert len(compact) < len(full)


def test_generation_prompt_and_no_tools():
    msgs = [{"role": "user", "content": "hi"}]
    assert (
        render_messages(msgs, think=False)
        == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    assert render_messages(msgs, add_generation_prompt=False) == "<|im_start|>user\nhi<|im_end|>\n"
    # Tools without a system message get one.
    assert text_messages(msgs, TOOLS)[0]["role"] == "system"


def test_jinja_template_wins():
    template = (
        "{% for m in messages %}[{{ m.role }}]{{ m.content }}"
        "{% if m.tool_calls %}{% for c in m.tool_calls %}({{ c.function.name }}:{{ "
        "c.function.arguments.path }}){% endfor %}{% endif %}"
        "{% endfor %}{% if tools %}T{{ tools|length }}{% endif %}{% if add_generation_prompt %}>{{ "
        "enable_thinking }}{% endif %}"
    )
    msgs = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [call_msg("view", {"path": "x"})]},
    ]
    assert (
        render_messages(msgs, TOOLS, think=False, template=template) == "[user]hi[assistant](view:x)T1>False"
    )


def test_jinja_template_is_sandboxed():
    import jinja2.exceptions

    evil = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    try:
        render_messages([], template=evil)
    except jinja2.exceptions.SecurityError:
        pass
    else:
        raise AssertionError("sandbox let the template reach Python internals")


def test_round_trip_render_then_parse():
    args = {"path": "src/a b.py", "view_range": [3, -1], "line": 7, "verbose": True}
    text = text_messages(
        [{"role": "assistant", "content": "Let me look.", "tool_calls": [call_msg("view", args)]}]
    )[0]["content"]
    thinking, answer, calls = parse_assistant(text, SCHEMAS)
    assert (thinking, answer) == ("", "Let me look.")
    assert [(c.name, c.arguments, c.error) for c in calls] == [("view", args, None)]


@settings(max_examples=60, deadline=None)
@given(value=st.text().filter(lambda v: "</parameter>" not in v), n=st.integers(-(10**6), 10**6))
@example(value="<think>", n=0).via("a value that mentions thinking tags stays the call's")
@example(value="x </think> y", n=1)
def test_round_trip_any_string_value(value, n):
    text = text_messages(
        [{"role": "assistant", "content": "", "tool_calls": [call_msg("view", {"path": value, "line": n})]}]
    )
    _, _, calls = parse_assistant(text[0]["content"], SCHEMAS)
    assert len(calls) == 1 and calls[0].error is None
    assert calls[0].arguments == {"path": value, "line": n}


def test_values_may_hold_closing_tags():
    text = (
        "<tool_call>\n<function=view>\n<parameter=path>\nx </tool_call> </function> y\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    rest, calls = parse_tool_calls(text)
    assert (
        rest == ""
        and calls[0].arguments == {"path": "x </tool_call> </function> y"}
        and calls[0].error is None
    )


def test_coercion_follows_schema():
    text = (
        "<tool_call>\n<function=view>\n<parameter=path>\n3\n</parameter>\n<parameter=line>\n3\n"
        "</parameter>\n<parameter=verbose>\nTrue\n</parameter>\n</function>\n</tool_call>"
    )
    _, calls = parse_tool_calls(text, SCHEMAS)
    assert calls[0].arguments == {"path": "3", "line": 3, "verbose": True}
    _, calls = parse_tool_calls(text)  # no schema: values stay strings
    assert calls[0].arguments == {"path": "3", "line": "3", "verbose": "True"}
    bad = text.replace("\n3\n</parameter>\n<parameter=verbose>", "\nthree\n</parameter>\n<parameter=verbose>")
    assert parse_tool_calls(bad, SCHEMAS)[1][0].arguments["line"] == "three"  # left for the schema check


def test_hermes_json_calls():
    text = (
        'Sure.\n<tool_call>\n{"name": "view", "arguments": {"path": "a.py", "line": 2}}\n</tool_call>\n'
        '<tool_call>{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}</tool_call>'
    )
    rest, calls = parse_tool_calls(text)
    assert rest == "Sure."
    assert [(c.name, c.arguments, c.error) for c in calls] == [
        ("view", {"path": "a.py", "line": 2}, None),
        ("bash", {"command": "ls"}, None),
    ]
    assert calls[0].raw.startswith("<tool_call>") and calls[0].raw.endswith("</tool_call>")


def test_bare_function_block_and_missing_close_at_end():
    _, calls = parse_tool_calls("<function=view>\n<parameter=path>\na\n</parameter>\n</function>")
    assert calls[0].name == "view" and calls[0].arguments == {"path": "a"} and calls[0].error is None
    # Stopped at a stop sequence before </tool_call>: the complete call is kept.
    _, calls = parse_tool_calls(
        "<tool_call>\n<function=view>\n<parameter=path>\na\n</parameter>\n</function>\n<|im_end|>"
    )
    assert calls[0].error is None and calls[0].arguments == {"path": "a"}


def test_malformed_calls_give_precise_errors():
    cases = {
        "<tool_call>\n<function=view>\n<parameter=path>\na.py\n": "unclosed <parameter=path>",
        "<tool_call>\n<function=view>\n<parameter=path>\na\n</parameter>\n": "missing </function>",
        "<tool_call>\n<function=>\n</function>\n</tool_call>": "missing function name",
        "<tool_call>\n<function=view\n<parameter=path>\na\n</parameter>\n</function></tool_call>": "expected '>'",
        '<tool_call>{"name": "view", "arguments": {"path": }}</tool_call>': "invalid JSON",
        '<tool_call>{"arguments": {}}</tool_call>': 'missing "name"',
        '<tool_call>{"name": "view", "arguments": [1]}</tool_call>': "must be a JSON object",
        "<tool_call>\n</tool_call>": "empty <tool_call>",
        "<tool_call>hello</tool_call>": "must hold <function=NAME>",
        "<tool_call>\n<function=view>\nstray\n</function>\n</tool_call>": "expected <parameter=...>",
        "<tool_call>\n<function=view>\n</function>\ntrailing words": "expected </tool_call>",
    }
    for text, expected in cases.items():
        _, calls = parse_tool_calls(text, SCHEMAS)
        assert len(calls) == 1, text
        assert calls[0].error and expected in calls[0].error, (text, calls[0].error)


def test_one_bad_call_does_not_hide_the_next():
    text = (
        '<tool_call>{"name": oops}</tool_call>\n<tool_call>\n<function=view>\n<parameter=path>\nb\n'
        "</parameter>\n</function>\n</tool_call>"
    )
    _, calls = parse_tool_calls(text)
    assert calls[0].error and calls[1].error is None and calls[1].arguments == {"path": "b"}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "<tool_call>",
                "</tool_call>",
                "<function=",
                "view",
                ">",
                "</function>",
                "<parameter=",
                "path",
                "</parameter>",
                "\n",
                "{",
                "}",
                '"name"',
                ":",
                '"x"',
                "<think>",
                "</think>",
                "text",
                " ",
                "<|im_end|>",
            ]
        ),
        max_size=40,
    ).map("".join)
    | st.text()
)
def test_parsing_never_raises(text):
    thinking, answer, calls = parse_assistant(text, SCHEMAS)
    assert isinstance(thinking, str) and isinstance(answer, str)
    for call in calls:
        assert isinstance(call.arguments, dict) and (call.error is None or call.error)
        assert call.error is not None or call.name


def test_split_thinking():
    assert split_thinking("<think>\nplan\n</think>\n\nanswer") == ("plan", "answer")
    assert split_thinking("plan</think>\n\nanswer") == ("plan", "answer")  # the prompt opened it
    assert split_thinking("<think>\nstill going") == ("still going", "")
    assert split_thinking("just text") == ("", "just text")
    assert split_thinking("all thinking, cut off", opened=True) == ("all thinking, cut off", "")


def test_special_tokens():
    assert SPECIAL_TOKENS[:4] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
    assert {
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
    } <= set(SPECIAL_TOKENS)


def _stream(text: str, step: int, thinking: bool) -> list[tuple[str, str]]:
    parser, out = StreamParser(thinking=thinking), []
    for i in range(0, len(text), step):
        out += parser.feed(text[i : i + step])
    out += parser.finish()
    merged: list[tuple[str, str]] = []
    for kind, piece in out:
        if merged and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + piece)
        else:
            merged.append((kind, piece))
    return merged


def test_stream_parser_classifies_any_split():
    call = "<tool_call>\n<function=view>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>"
    text = f"I should look.\n</think>\n\nLet me see <b>.\n{call}"
    for step in (1, 2, 3, 7, 1000):
        assert _stream(text, step, thinking=True) == [
            ("thinking", "I should look.\n"),
            ("text", "Let me see <b>.\n"),
            ("tool_call", call),
        ]
    assert _stream("<think>hm</think>ok", 1, thinking=False) == [("thinking", "hm"), ("text", "ok")]
    assert _stream("a <tool", 2, thinking=False) == [
        ("text", "a <tool")
    ]  # a held prefix is flushed at the end


def test_chat_module_is_torch_free():
    code = (
        "import sys, clover.model.text.chat; assert 'torch' not in sys.modules; "
        "ours = [m for m in sys.modules if m.startswith('clover.') and not m.startswith('clover.model')]; "
        "assert not ours, ours"
    )  # nothing of the CLI, tools or evals either
    subprocess.run([sys.executable, "-c", code], check=True)
