"""Typed tool-call values, well formed by construction: integers, numbers, booleans and arrays of
numbers as the parser (model/text/chat_parse.py `_coerce`) reads them back.

A small model writes `timeout` as `3O` or `view_range` as `[4,, 45]`; the call then fails the
schema check and costs a step. The tool grammar asks `ValueShape.prefix_ok` of every token it
accepts inside such a value and only lets `</parameter>` close one that is `complete`. Strings and
types not listed here stay free text."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from clover.model.text.chat_parse import _coerce, _types_of
from clover.tools.files import MAX_VIEW_LINES

# JSON numbers (no leading zeros: `json.loads` refuses them), whole and while being written
_INT, _INT_PART = r"-?(?:0|[1-9]\d*)", r"-?(?:0|[1-9]\d*)?"
_NUM, _NUM_PART = rf"{_INT}(?:\.\d+)?", r"-?(?:(?:0|[1-9]\d*)(?:\.\d*)?)?"
# a value sits on its own line: `<parameter=p>\nVALUE\n</parameter>`. Whitespace runs are short:
# unbounded, a diffusion decoder can fill a block with blanks until the token budget cuts the value.
_WS = r"[ \t\n]{0,2}"


def _array(item: str, part: str) -> tuple[str, str]:
    """(prefix, complete) patterns of a JSON array of `item`s."""
    open_ = rf"\[{_WS}(?:{item}{_WS},{_WS})*(?:{part}|{item}{_WS})?"  # blanks only after a whole item
    done = rf"\[{_WS}(?:{item}(?:{_WS},{_WS}{item})*)?{_WS}\]"
    return rf"{_WS}(?:{open_}|{done}{_WS})?", rf"{_WS}{done}{_WS}"


def _scalar(item: str, part: str) -> tuple[str, str]:
    return rf"{_WS}(?:{part}|{item}{_WS})", rf"{_WS}{item}{_WS}"


_SHAPES: dict[str, tuple[tuple[str, str], str]] = {
    "integer": (_scalar(_INT, _INT_PART), "-0123456789 \t\n"),
    "number": (_scalar(_NUM, _NUM_PART), "-.0123456789 \t\n"),
    "boolean": (
        (
            rf"{_WS}(?:t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|(?:true|false){_WS})?",
            rf"{_WS}(?:true|false){_WS}",
        ),
        "truefals \t\n",
    ),
    "array/integer": (_array(_INT, _INT_PART), "-0123456789[], \t\n"),
    "array/number": (_array(_NUM, _NUM_PART), "-.0123456789[], \t\n"),
}


@dataclass(frozen=True)
class ValueShape:
    """What a typed parameter's text may be: `prefix_ok` while it is written, `complete` to close."""

    key: str
    least: int = 0  # arrays: minItems
    most: int | None = None  # arrays: maxItems
    spec: Any = field(default=None, compare=False)  # the schema, for the parser's own coercion
    # grounding: line numbers of a file with this many lines (an integer: 0..lines, insert after a
    # line; an array: a view_range [start, end], 1 <= start <= lines, end = -1 or start <= end <
    # start + MAX_VIEW_LINES: the tool clamps an end past the file, so "[1, 20]" reads a README's top
    # whatever its length)
    lines: int | None = None

    def prefix_ok(self, text: str) -> bool:
        if _compiled(self.key)[0].fullmatch(text) is None:
            return False
        if "]" in text:  # the array is closed: only what may stand as the whole value
            return self.complete(text)
        if self.lines is not None and not self._in_file(text, partial=True):
            return False
        return self.most is None or text.count(",") < self.most  # no item past maxItems is started

    def complete(self, text: str) -> bool:
        if _compiled(self.key)[1].fullmatch(text) is None:
            return False
        value = _coerce(text, self.spec)  # what the parser will hand the tool
        if isinstance(value, str):
            return False
        if self.lines is not None and not self._in_file(text, partial=False):
            return False
        n = len(value) if isinstance(value, list) else None
        return n is None or (n >= self.least and (self.most is None or n <= self.most))

    def _in_file(self, text: str, *, partial: bool) -> bool:
        """Every number written so far is (or can still grow into) a line number of the file."""
        assert self.lines is not None
        items = re.findall(r"-?\d*", text)
        items = [i for i in items if i]
        last_open = (
            partial and bool(items) and bool(re.search(r"[-\d]\Z", text))
        )  # not `$`: it matches before a final newline
        for k, item in enumerate(items):
            lo, hi, minus_one = 0, self.lines, False  # insert_line: after line 0 (the top) .. the last line
            if self.key.startswith("array"):  # view_range: a start line, then an end at or after it
                start = int(items[0]) if items[0].lstrip("-").isdigit() else 1
                if k > 0:
                    lo, hi, minus_one = max(start, 1), max(start, 1) + MAX_VIEW_LINES - 1, True
                else:
                    lo = 1
            if not _line_ok(item, lo, hi, minus_one, growing=last_open and k == len(items) - 1):
                return False
        return True

    @property
    def alphabet(self) -> str:
        return _SHAPES[self.key][1]


def _line_ok(item: str, lo: int, hi: int, minus_one: bool, *, growing: bool) -> bool:
    """Is the number `item` in [lo, hi] (or -1 where allowed); `growing`: can it still get there
    with more digits?"""
    if item.startswith("-"):
        return minus_one and (item == "-1" or (growing and item == "-"))
    value = int(item)
    if not growing or value == 0:
        return lo <= value <= hi
    for k in range(len(str(hi)) + 1):
        first, last = value * 10**k, (value + 1) * 10**k - 1
        if first > hi:
            return False
        if last >= lo:
            return True
    return False


@functools.cache
def _compiled(key: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    prefix, done = _SHAPES[key][0]
    return re.compile(prefix), re.compile(done)


def value_shape(spec: Any) -> ValueShape | None:
    """The shape a parameter's schema asks for, or None: free text (strings, unions with string or
    null, objects, anything else)."""
    types = _types_of(spec)
    if len(types) != 1:
        return None
    kind, least, most = types[0], 0, None
    if kind == "array":
        kind = f"array/{(_types_of(spec.get('items')) or ['?'])[0]}"
        least, most = spec.get("minItems", 0), spec.get("maxItems")
        least = least if isinstance(least, int) else 0
        most = most if isinstance(most, int) and most >= max(least, 1) else None
    return ValueShape(kind, least, most, spec) if kind in _SHAPES else None


class TypedTokens:
    """A vocabulary seen as text, for typed values: which tokens may come next."""

    def __init__(self, tokenizer: Any, vocab_size: int, skip: set[int] = frozenset()) -> None:
        self.tok, self.vocab, self.skip = tokenizer, vocab_size, skip
        self._texts: dict[int, str] = {}
        self._spelt: dict[str, list[int]] = {}

    def text(self, t: int) -> str:
        if t not in self._texts:
            self._texts[t] = self.tok.decode([t])
        return self._texts[t]

    def allowed(self, shape: ValueShape, value: str) -> list[int]:
        """The tokens after which `value` is still a prefix of `shape`."""
        if shape.alphabet not in self._spelt:  # decode the vocabulary once per alphabet
            chars = set(shape.alphabet)
            self._spelt[shape.alphabet] = [
                t for t in range(self.vocab) if t not in self.skip and (s := self.text(t)) and set(s) <= chars
            ]
        return [t for t in self._spelt[shape.alphabet] if shape.prefix_ok(value + self.text(t))]


__all__ = ["TypedTokens", "ValueShape", "value_shape"]
