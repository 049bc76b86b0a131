"""Typed tool-call values (steering/typed_values.py): integers, numbers, booleans and
arrays of them are well formed by construction, as the parser reads them back."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clover.model.text.chat_parse import _coerce
from clover.schema import check_arguments
from clover.steering.typed_values import value_shape

RANGE = {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}
SHAPES = {
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "range": RANGE,
    "numbers": {"type": "array", "items": {"type": "number"}},
}


def _prefixes_ok(shape, text: str) -> bool:
    return all(shape.prefix_ok(text[:i]) for i in range(len(text) + 1))


@given(st.integers(-(10**9), 10**9), st.sampled_from(["", "\n", " \n"]))
def test_every_prefix_of_an_integer_is_accepted(n, tail):
    shape = value_shape(SHAPES["integer"])
    text = json.dumps(n) + tail
    assert _prefixes_ok(shape, text) and shape.complete(text)


@given(st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: round(x, 3)))
def test_every_prefix_of_a_number_is_accepted(x):
    shape = value_shape(SHAPES["number"])
    text = repr(x) if "e" not in repr(x) else str(int(x))
    assert _prefixes_ok(shape, text) and shape.complete(text)


@given(st.lists(st.integers(-50, 5000), min_size=2, max_size=2), st.sampled_from([", ", ",", " , "]))
def test_every_prefix_of_a_range_is_accepted(pair, sep):
    shape = value_shape(RANGE)
    text = "[" + sep.join(map(str, pair)) + "]\n"
    assert _prefixes_ok(shape, text) and shape.complete(text)
    assert _coerce(text, RANGE) == pair


@pytest.mark.parametrize(
    "kind,text",
    [
        ("integer", "3O"),
        ("integer", "007"),
        ("integer", "1.5"),
        ("integer", "x"),
        ("number", ".5"),
        ("number", "1..2"),
        ("boolean", "yes"),
        ("range", "[4,, 45]"),
        ("range", "[4, 5, 6"),
        ("range", "[4]"),
        ("range", "4, 5"),
        ("range", "[4, 5]]"),
        ("numbers", "[1, a]"),
    ],
)
def test_malformed_values_are_refused_as_soon_as_they_go_wrong(kind, text):
    shape = value_shape(SHAPES[kind])
    assert not _prefixes_ok(shape, text) and not shape.complete(text)


@pytest.mark.parametrize(
    "kind,text", [("integer", "-"), ("number", "2."), ("range", "[4,"), ("range", "[4"), ("boolean", "tr")]
)
def test_unfinished_values_cannot_close(kind, text):
    shape = value_shape(SHAPES[kind])
    assert _prefixes_ok(shape, text) and not shape.complete(text)


def test_complete_values_pass_the_schema_check():
    schema = {"type": "object", "properties": SHAPES, "required": list(SHAPES)}
    texts = {"integer": "12\n", "number": "2.5", "boolean": "true", "range": "[1, 20]", "numbers": "[]"}
    for kind, text in texts.items():
        assert value_shape(SHAPES[kind]).complete(text), kind
    args = {k: _coerce(v, SHAPES[k]) for k, v in texts.items()}
    assert check_arguments(schema, args) is None


def test_free_text_parameters_have_no_shape():
    for spec in (
        {"type": "string"},
        {"type": ["integer", "null"]},
        {"type": "object"},
        {},
        None,
        {"type": "array"},
    ):
        assert value_shape(spec) is None


def test_whitespace_cannot_flood_a_value():
    shape = value_shape(RANGE)
    assert shape.prefix_ok("[20, ") and shape.complete("[20, 4]\n")
    assert not shape.prefix_ok("[20   , 4") and not shape.prefix_ok("[20, 4\n\n\n")
    assert not shape.prefix_ok("[-  ") and not shape.prefix_ok("[20, -\n")  # no blank inside a number
