"""What the embedded model may edit (steering/edit_scope.py, grounding.py): no test file
and no docstring unless the request names them; the grammar leaves them out and a backstop holds
back whatever gets through (the model edited test files and docstring examples)."""

from __future__ import annotations

import pytest

from clover.core.model_protocol import ToolCall
from clover.steering.edit_scope import docstring_lines, is_test_file, names_file, out_of_scope

torch = pytest.importorskip("torch")

from clover.steering.grounding import Grounding, Workspace  # noqa: E402
from tests.test_grounding import _spell, workspace  # noqa: E402
from tests.test_grounding import vocab as vocab  # noqa: E402,F401 - the module fixture
from tests.test_tool_grammar import clover as clover  # noqa: E402,F401 - the module fixture

MOD = '''"""Searching sorted lists.

>>> find([1, 2, 3], 2)
1
"""


def find(items, x):
    """Index of x in items.

    >>> find([4, 5], 5)
    1
    """
    return items.index(x)
'''
TEST = "from mod import find\n\n\ndef test_find():\n    assert find([1, 2], 2) == 1\n"


def test_what_counts_as_a_test_file_and_what_names_one():
    for path in ("tests/test_a.py", "test_a.py", "pkg/a_test.py", "conftest.py", "tests/helpers.py"):
        assert is_test_file(path), path
    assert not is_test_file("pkg/testing_tools.py") and not is_test_file("src/contest.py")
    assert names_file("the assertion in tests/test_a.py is wrong, fix it", "tests/test_a.py")
    assert names_file("update test_a.py for the new API", "tests/test_a.py")
    # a failing test's node id reports the test; it does not ask to change it
    assert not names_file("CI red: tests/test_a.py::test_x fails", "tests/test_a.py")
    assert not names_file("see tests/test_a.pyc", "tests/test_a.py") and not names_file(
        "mytest_a.py", "test_a.py"
    )


def test_docstring_lines_are_module_class_and_function_docstrings():
    assert docstring_lines(MOD) == frozenset({0, 1, 2, 3, 4, 8, 9, 10, 11, 12})
    assert docstring_lines("def f(:\n") == frozenset()


def test_the_backstop_holds_test_file_and_docstring_edits_the_request_does_not_name():
    files = {"mod.py": MOD, "tests/test_mod.py": TEST}

    def held(call: ToolCall, request: str = "find([1, 2, 3], 2) returns 1 but should return 2") -> str | None:
        return out_of_scope(call, request, files.get)

    test_edit = ToolCall("str_replace", {"path": "tests/test_mod.py", "old_str": "== 1", "new_str": "== 2"})
    assert "is a test file" in held(test_edit)
    assert held(test_edit, "tests/test_mod.py expects the wrong index, fix the test") is None
    doc_edit = ToolCall(
        "str_replace",
        {
            "path": "mod.py",
            "old_str": "    >>> find([4, 5], 5)\n    1",
            "new_str": "    >>> find([4, 5], 5)\n    2",
        },
    )
    assert "changes a docstring" in held(doc_edit)
    assert held(doc_edit, "the docstring example of find is wrong") is None
    code_edit = ToolCall(
        "str_replace",
        {
            "path": "mod.py",
            "old_str": "    return items.index(x)",
            "new_str": "    return items.index(x) + 1",
        },
    )
    assert held(code_edit) is None
    inside = ToolCall("insert", {"path": "mod.py", "insert_line": 10, "text": "    extra words"})
    assert "changes a docstring" in held(inside)
    new_test = ToolCall("create", {"path": "tests/test_new.py", "file_text": "def test_x():\n    pass\n"})
    assert "is a test file" in held(new_test)


def test_grounded_edits_take_no_test_file_and_copy_no_docstring_line(clover, vocab, tmp_path):
    env = workspace(tmp_path, {"mod.py": MOD, "tests/test_mod.py": TEST})
    g = Grounding(Workspace(env), vocab, request="find is off by one")
    path = g.node("str_replace", "path", "")
    assert _spell(path, b"mod.py\n", vocab) is not None
    assert _spell(path, b"tests/test_mod.py\n", vocab) is None  # not a path str_replace may take
    assert (
        _spell(g.node("view", "path", ""), b"tests/test_mod.py\n", vocab) is not None
    )  # it may still read it
    old = g.node("str_replace", "old_str", "mod.py")
    assert _spell(old, b"    return items.index(x)\n", vocab) is not None
    assert _spell(old, b"    >>> find([4, 5], 5)\n", vocab) is None  # a docstring line
    assert _spell(old, b'def find(items, x):\n    """Index', vocab) is None  # not into one either
    # a request that names them
    named = Grounding(Workspace(env), vocab, request="the docstring of find in mod.py, and tests/test_mod.py")
    assert _spell(named.node("str_replace", "path", ""), b"tests/test_mod.py\n", vocab) is not None
    assert (
        _spell(named.node("str_replace", "old_str", "mod.py"), b"    >>> find([4, 5], 5)\n", vocab)
        is not None
    )
