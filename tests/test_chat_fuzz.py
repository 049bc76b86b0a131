"""Property tests: model/text/chat.py's parsers never raise (and do not need their own safety net)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from clover.model.text.chat import (
    ParsedCall,
    StreamParser,
    parse_assistant,
    parse_tool_calls,
    render_tool_call,
    split_thinking,
)

MARKUP = [
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "</function>",
    "<parameter=",
    "</parameter>",
    ">",
    "<",
    "\n",
    "{",
    "}",
    '"name"',
    '"arguments"',
    ":",
    ",",
    '"',
    "bash",
    "command",
    "<think>",
    "</think>",
    "<|im_end|>",
    "<|endoftext|>",
    "ls -la",
    "[",
    "]",
    "null",
    "1",
    " ",
    "=",
    "<tool_response>",
]
SCHEMAS = {
    "bash": {"type": "object", "properties": {"command": {"type": "string"}, "timeout": {"type": "number"}}},
    "view": {
        "properties": {
            "path": {"type": "string"},
            "n": {"type": ["integer", "null"]},
            "flag": {"type": "boolean"},
            "obj": {"type": "object"},
        }
    },
    "odd": {"properties": {"x": {"type": 5}, "y": None, "z": {"type": [1, "integer"]}}},
}

markup_soup = st.lists(st.one_of(st.sampled_from(MARKUP), st.text(max_size=6)), max_size=40).map("".join)
any_text = st.one_of(st.text(max_size=200), markup_soup)


def _check_calls(calls) -> None:
    for call in calls:
        assert isinstance(call, ParsedCall)
        assert isinstance(call.arguments, dict)
        assert call.error is None or isinstance(call.error, str)
        # the try/except in parse_tool_calls is a safety net; the real parser should not need it
        assert not (call.error or "").startswith("could not parse tool calls"), call.error


@settings(max_examples=400, deadline=None)
@given(any_text, st.sampled_from([None, SCHEMAS]))
def test_parse_tool_calls_never_raises(text, schemas):
    rest, calls = parse_tool_calls(text, schemas)
    assert isinstance(rest, str)
    _check_calls(calls)


@settings(max_examples=300, deadline=None)
@given(any_text, st.booleans())
def test_parse_assistant_and_split_thinking_never_raise(text, opened):
    thinking, answer, calls = parse_assistant(text, SCHEMAS, opened=opened)
    assert isinstance(thinking, str) and isinstance(answer, str)
    _check_calls(calls)
    a, b = split_thinking(text, opened)
    assert isinstance(a, str) and isinstance(b, str)


@settings(max_examples=300, deadline=None)
@given(st.lists(any_text, max_size=8), st.booleans())
def test_stream_parser_never_raises(chunks, thinking):
    parser = StreamParser(thinking=thinking)
    out = []
    for chunk in chunks:
        out += parser.feed(chunk)
    out += parser.finish()
    assert all(kind in ("thinking", "text", "tool_call") and isinstance(t, str) for kind, t in out)


plain = st.text(
    st.characters(blacklist_characters="<\r", blacklist_categories=("Cs",)), min_size=1, max_size=30
).filter(lambda s: s == s.strip("\n"))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), plain, max_size=4))
def test_rendered_calls_parse_back(args):
    schemas = {"tool": {"properties": {k: {"type": "string"} for k in args}}}
    rest, calls = parse_tool_calls("before " + render_tool_call("tool", args), schemas)
    assert rest == "before"
    assert (
        len(calls) == 1 and calls[0].name == "tool" and calls[0].arguments == args and calls[0].error is None
    )
