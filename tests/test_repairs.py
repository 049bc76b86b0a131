"""One-site repairs (steering/repairs.py): the small fixes a one-line bug needs are among
the candidates, the snippet itself never is, and a repair never breaks a module that parses."""

from __future__ import annotations

import ast

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from clover.steering.repairs import lex, repairs  # noqa: E402

MODULE = '''"""Shop helpers: the words in this docstring are not variables."""


class Order:
    def __init__(self, qty, price, code):
        self.qty = qty
        self.price = price
        self.code = code


def total(order):
    return order.qty * order.price


def last_page(count, size):
    return count // size


def weekdays(days):
    return [d for d in days if d in WEEKEND]


def label(order):
    return f"order {order.qty}"


def kelvin(celsius):
    return celsius - 273


def tally(values):
    result = 0
    for value in values:
        result += value
    result = result
'''


@pytest.mark.parametrize(
    ("old", "new", "issue"),
    [
        ("    return order.qty * order.price", "    return order.qty + order.price", ""),  # operator
        ("    return count // size", "    return count / size", ""),
        ("    return count // size", "    return count // size + 1", ""),  # an end one short
        (
            "    return [d for d in days if d in WEEKEND]",
            "    return [d for d in days if d not in WEEKEND]",
            "",
        ),
        ("    return celsius - 273", "    return celsius + 273", ""),
        (
            "    return celsius - 273",
            "    return celsius - 273.15",
            "it should subtract 273.15",
        ),  # the issue's number
        (
            '    return f"order {order.qty}"',
            '    return f"order {order.code}"',
            "",
        ),  # another field, in an f-string
        ('    return f"order {order.qty}"', '    return f"Order {order.qty}"', "labels should read Order 7"),
        ("    result = result", "    return result", ""),  # a result computed, then dropped
        ("        result += value", "        result -= value", ""),
    ],
)
def test_the_fix_is_a_candidate(old, new, issue):
    assert old in MODULE
    assert new in repairs(old, issue=issue, file_text=MODULE, path="shop.py")


def test_names_swaps_misspellings_and_builtins():
    text = "def f(items, limit):\n    return min(len(itmes), limit)\n"
    cands = repairs("    return min(len(itmes), limit)", file_text=text, path="f.py")
    assert "    return max(len(itmes), limit)" in cands  # counterpart builtin
    assert "    return min(len(items), limit)" in cands  # the misspelt name the file uses
    assert "    return min(limit, len(itmes))" in cands  # arguments swapped
    assert "    return min(sum(itmes), limit)" in cands  # another builtin


def test_loop_in_is_not_negated_and_conditions_are():
    text = "def g(xs):\n    for x in xs:\n        if x:\n            return x\n"
    cands = repairs("    for x in xs:", file_text=text, path="g.py")
    assert "    for x not in xs:" not in cands
    assert "        if not x:" in repairs("        if x:", file_text=text, path="g.py")


def test_attribute_from_a_viewed_class():
    text = 'def mailto(user):\n    return f"mailto:{user.name}"\n'
    context = (
        "class User:\n    def __init__(self, name, email):\n        self.name = name\n        "
        "self.email = email\n"
    )
    cands = repairs('    return f"mailto:{user.name}"', file_text=text, path="m.py", context=context)
    assert '    return f"mailto:{user.email}"' in cands


def test_docstring_words_are_not_names():
    cands = repairs("    return order.qty * order.price", file_text=MODULE, path="shop.py")
    assert not any("docstring" in c or "words" in c for c in cands)


snippets = st.sampled_from([line for line in MODULE.splitlines() if line.strip() and '"""' not in line])


@settings(max_examples=40, deadline=None)
@given(snippets, st.text(alphabet="abcdefghij 0123456789`'\"", max_size=40))
def test_candidates_never_repeat_the_snippet_and_keep_the_module_parsing(line, issue):
    cands = repairs(line, issue=issue, file_text=MODULE, path="shop.py")
    assert line not in cands and len(cands) == len(set(cands))
    at = MODULE.index(line)
    for c in cands:
        ast.parse(MODULE[:at] + c + MODULE[at + len(line) :])


def test_lexer_skips_comments_and_keeps_offsets():
    text = 'x = a+1  # not code: b\ns = f"{y.z}"'
    toks = lex(text)
    assert all(text[t.start : t.end] == t.text for t in toks)
    assert "b" not in [t.text for t in toks] and "z" in [t.text for t in toks]


def test_outside_python_and_unparsable_files_still_get_candidates():
    assert "a <= b" in repairs("a < b", file_text="a < b\n", path="notes.txt")
    broken = "def f(:\n    return a < b\n"
    assert "    return a <= b" in repairs("    return a < b", file_text=broken, path="f.py")
