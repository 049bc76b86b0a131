"""Checks read from an issue's text (steering/issue_checks.py): a `>>>` session, a script
and its output, a traceback, or a sentence; the expected outcome the report states."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from clover.steering.issue_checks import Check, Expect, definitions, extract_checks, module_of, probed_names

FILES = {
    "src/shop/prices.py": (
        "def net_price(gross, rate=0.2):\n    return gross / (1 + rate)\n\n\nclass Basket:\n    pass\n"
    ),
    "tests/test_prices.py": "def net_price_helper():\n    pass\n",
    "units.py": "def to_celsius(f):\n    return (f - 32) * 5 / 9\n",
    "pairs/load.py": "def load_pairs(text):\n    return dict(line.split('=') for line in text.split('\\n'))\n",
}


def checks(issue: str) -> list[Check]:
    return extract_checks(issue, list(FILES), FILES.get)


def test_a_repl_session_and_the_value_asked_for_after_it():
    issue = (
        "Wrong total\n\n```python\n>>> from shop.prices import net_price\n>>> net_price(120)\n100.5\n```\n\n"
        "It should return `100.0`.\n"
    )
    assert checks(issue) == [
        Check(("from shop.prices import net_price",), "net_price(120)", Expect("value", "100.0"))
    ]


def test_a_printed_none_and_a_script_with_its_output_in_a_comment():
    issue = (
        "```\n>>> from units import to_celsius\n>>> print(to_celsius(212))\nNone\n```\nI expected `100.0`."
    )
    assert checks(issue)[0].probe == "to_celsius(212)"
    script = (
        "```python\nfrom units import to_celsius\n\nvalue = to_celsius(50)\nprint(value)  # 9.0\n```\n\n"
        "The correct answer is `10.0`."
    )
    (check,) = checks(script)
    assert check.setup == ("from units import to_celsius",) and check.probe == "to_celsius(50)"
    assert check.expect == Expect("value", "10.0")


def test_a_crash_in_a_session_with_no_value_asked_for_means_it_should_not_crash():
    issue = (
        "```\n>>> from units import to_celsius\n>>> to_celsius('x')\nTraceback (most recent call last):\n"
        '  File "<stdin>", line 1, in <module>\nTypeError: bad operand\n```\n'
    )
    assert checks(issue)[0].expect == Expect("no_error")


def test_a_scripts_traceback_only_says_the_line_should_not_crash():
    issue = (
        '```\nTraceback (most recent call last):\n  File "app.py", line 3, in <module>\n'
        "    print(net_price(10).hex())\nAttributeError: x\n```\n\nnet_price(10) should give `8.0`."
    )
    got = checks(issue)
    assert got[0].probe == "net_price(10).hex()" and got[0].expect == Expect("no_error")
    assert got[1].probe == "net_price(10)" and got[1].expect == Expect("value", "8.0")
    assert got[1].setup == ("from shop.prices import net_price",)  # found in src/, not in tests/


def test_prose_reports_in_the_ways_people_write_them():
    cases = {
        "`to_celsius(212)` returns 90 but should be 100.": "100",
        "`to_celsius(212)` should give `100.0`, but it gives `90`.": "100.0",
        "Expected: `to_celsius(212)` -> `100.0`\nActual: `90`": "100.0",
        "to_celsius(212) returns 90 instead of 100.": "100",
        "I get `90` from `to_celsius(212)`; I expected `100.0`.": "100.0",
        "`to_celsius(212)` should add the offset and give 100, not 90.": "100",
        "`to_celsius(212)` returns [] but should be [[1, 2], [3]].": "[[1, 2], [3]]",
    }
    for issue, want in cases.items():
        (check,) = checks(issue)
        assert check.probe == "to_celsius(212)" and check.expect == Expect("value", want), issue
        assert check.setup == ("from units import to_celsius",)


TRACEBACK = """Importing a settings dump with an empty line in it crashes. `load_pairs('a=1')` is fine, but:

Traceback (most recent call last):
  File "import_settings.py", line 4, in <module>
    print(load_pairs("a=1\\n\\nb=2"))
  File "/srv/app/pairs/load.py", line 2, in load_pairs
    return dict(line.split('=') for line in text.split('\\n'))
ValueError: dictionary update sequence element #1 has length 1; 2 is required

Empty lines should just be ignored.
"""


def test_what_python_printed_is_not_what_the_user_expects():
    # `ValueError: ... (expected 2, got 1)` must not become the expected value `2`
    issue = (
        "`load_pairs('x=1')` crashes with `ValueError: not enough values to unpack (expected 2, got 1)` "
        "when the file has a blank line."
    )
    got = checks(issue)
    assert all(c.expect != Expect("value", "2") for c in got)
    assert [(c.probe, c.expect) for c in got] == [("load_pairs('x=1')", Expect("no_error"))]
    # a pasted traceback, outside any code fence: its line should not crash; its message says nothing
    got = checks(TRACEBACK)
    assert [(c.probe, c.expect) for c in got] == [("load_pairs('a=1\\n\\nb=2')", Expect("no_error"))]
    assert got[0].setup == ("from pairs.load import load_pairs",)


def test_sessions_pasted_into_the_prose_are_read_too():
    issue = (
        "Celsius conversion is off since 2.3. In a shell:\n\n"
        "    >>> from units import to_celsius\n    >>> to_celsius(212)\n    90.0\n\n"
        "Water boils at 100, so it should be `100.0`."
    )
    assert checks(issue) == [
        Check(("from units import to_celsius",), "to_celsius(212)", Expect("value", "100.0"))
    ]
    plain = ">>> to_celsius(32)\n-1.0\n\nthat should be 0"
    assert checks(plain) == [Check(("from units import to_celsius",), "to_celsius(32)", Expect("value", "0"))]


def test_raises_asked_for_and_crashes_reported():
    (check,) = checks("`to_celsius(None)` returns `0` instead of raising `TypeError`.")
    assert check.expect == Expect("raises", "TypeError")
    (check,) = checks("`to_celsius(-500)` raises `ValueError: too cold`, but that is a valid input.")
    assert check.expect == Expect("no_error")


def test_no_check_without_a_call_an_outcome_or_a_known_name():
    assert checks("The total ignores the last line: 10, 20 and 30 total 30 instead of 60.") == []
    assert checks("`to_celsius(212)` is wrong somehow.") == []
    assert checks("`player.volume(40)` returns 100 but should be 40.") == []  # `player`: defined nowhere
    assert checks("`fahrenheit(1)` returns 2 but should be 3.") == []  # no module defines it


def test_a_titles_bare_call_gives_way_to_the_call_with_arguments():
    issue = "to_celsius() gives the wrong answer\n\n`to_celsius(212)` returns 90 but should be 100."
    assert [c.probe for c in checks(issue)] == ["to_celsius(212)"]


def test_the_sentences_full_stop_is_not_part_of_the_value():
    (check,) = checks("`to_celsius(212)` returns 99.0 instead of 100.0.")
    assert check.expect.text == "100.0"


def test_an_issue_cannot_make_a_check_run_code_of_its_own():
    """A check runs without the model choosing to: only the workspace's functions, called with
    values, and a few pure builtins and modules."""
    head = "```\n>>> from units import to_celsius\n"
    tail = "\n100\n```\nI expected `0`."
    assert checks(head + ">>> to_celsius(212)" + tail)  # the plain case is kept
    for evil in [
        ">>> import os\n>>> to_celsius(os.system('rm -rf ~'))",
        ">>> to_celsius(__import__('os').getcwd())",
        ">>> to_celsius(open('/etc/passwd').read())",
        ">>> to_celsius(eval('1'))",
        ">>> to_celsius.__globals__",
        ">>> from subprocess import run\n>>> to_celsius(run(['id']))",
        ">>> from . import units\n>>> units.to_celsius(1)",
        ">>> import units\n>>> units.__builtins__",
        ">>> import units\n>>> units.os.system('id')",  # a module the workspace module imported
        ">>> from units import os\n>>> os.system('id')",
        ">>> from units import *\n>>> to_celsius(1)",
        ">>> from shop import prices\n>>> prices.os",
    ]:
        assert checks(head + evil + tail) == [], evil
    assert checks(
        "```\n>>> from datetime import date\n>>> from units import to_celsius\n"
        ">>> to_celsius(date(2024, 1, 1).day)\n1\n```\nI expected `0`."
    )


def test_modules_definitions_and_probed_names():
    assert module_of("src/shop/prices.py") == "shop.prices" and module_of("units.py") == "units"
    assert module_of("pkg/__init__.py") == "pkg" and module_of("my-dir/x.py") is None
    defs = definitions(list(FILES), FILES.get)
    assert defs["net_price"] == ["shop.prices"] and defs["Basket"] == ["shop.prices"]
    assert defs["net_price_helper"] == ["tests.test_prices"]
    check = Check((), "Basket(3).total(net_price(2))", Expect("no_error"))
    assert set(probed_names([check])) == {"total", "Basket", "net_price"}


PIECES = [*"`()[]>.:=,'\"\n abc12_", "should be ", ">>> ", "```", "returns ", "to_celsius(", "Traceback"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40).map("".join))
def test_any_text_gives_checks_or_nothing_never_an_error(text):
    for check in checks(text):
        assert check.probe and check.expect.kind in ("value", "raises", "no_error")
