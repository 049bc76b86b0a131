"""view / create / str_replace / insert on real files: diagnostics and byte-exact edits."""

from __future__ import annotations

from pathlib import Path

import pytest

from clover.tools.environment import LocalEnvironment
from clover.tools.files import CreateTool, InsertTool, StrReplaceTool, ViewTool

SOURCE = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(1, 11))


@pytest.fixture
def env(tmp_path: Path) -> LocalEnvironment:
    return LocalEnvironment(str(tmp_path))


def test_str_replace_edits_and_reports_diff(env: LocalEnvironment, tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SOURCE)
    result = StrReplaceTool().run({"path": "m.py", "old_str": "return x + 7", "new_str": "return x * 7"}, env)
    assert not result.is_error, result.output
    assert (tmp_path / "m.py").read_text() == SOURCE.replace("return x + 7", "return x * 7")
    assert "    20\t    return x * 7" in result.output  # snippet with line numbers
    assert result.data["path"] == "m.py"
    assert "-    return x + 7\n+    return x * 7" in result.data["diff"]
    assert result.data["diff"].startswith("--- a/m.py\n+++ b/m.py\n")


def test_str_replace_no_match_shows_closest_region(env: LocalEnvironment, tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SOURCE)
    before = (tmp_path / "m.py").read_bytes()
    result = StrReplaceTool().run(
        {"path": "m.py", "old_str": "def f5(y):\n    return y + 5", "new_str": "z"}, env
    )
    assert result.is_error
    assert "not found" in result.output and "closest region is lines 13-14" in result.output
    assert "    13\tdef f5(x):" in result.output and "    14\t    return x + 5" in result.output
    assert (tmp_path / "m.py").read_bytes() == before

    # Only indentation differs: say so.
    ws = StrReplaceTool().run({"path": "m.py", "old_str": "def f5(x):\n  return x + 5", "new_str": "z"}, env)
    assert ws.is_error and "lines 13-14" in ws.output and "whitespace" in ws.output


def test_str_replace_refuses_multiple_matches(env: LocalEnvironment, tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SOURCE)
    result = StrReplaceTool().run({"path": "m.py", "old_str": "(x):\n    return x + 1", "new_str": "q"}, env)
    assert result.is_error  # matches f1 and f10
    assert "2 times" in result.output and "lines 1, 28" in result.output
    assert (tmp_path / "m.py").read_text() == SOURCE


def test_crlf_and_non_ascii_kept_byte_exact(env: LocalEnvironment, tmp_path: Path) -> None:
    original = (
        "héllo wörld\r\nname = 'Ünïcode ✓'\r\nvalue = 1\r\nlast line\r\n".encode() + b"latin1: \xe9\r\n"
    )
    path = tmp_path / "crlf.txt"
    path.write_bytes(original)
    result = StrReplaceTool().run(
        {
            "path": "crlf.txt",
            "old_str": "name = 'Ünïcode ✓'\nvalue = 1",
            "new_str": "name = 'ñ'\nvalue = 2\nextra = 3",
        },
        env,
    )
    assert not result.is_error, result.output
    expected = original.replace(
        "name = 'Ünïcode ✓'\r\nvalue = 1".encode(), "name = 'ñ'\r\nvalue = 2\r\nextra = 3".encode()
    )
    assert path.read_bytes() == expected
    # insert keeps CRLF too, and the invalid UTF-8 byte survives untouched.
    assert not InsertTool().run({"path": "crlf.txt", "insert_line": 1, "text": "inserted"}, env).is_error
    lines = path.read_bytes().split(b"\r\n")
    assert (
        lines[1] == b"inserted"
        and lines[-2] == b"latin1: \xe9"
        and b"\n" not in path.read_bytes().replace(b"\r\n", b"")
    )


def test_binary_files_refused(env: LocalEnvironment, tmp_path: Path) -> None:
    data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    (tmp_path / "img.png").write_bytes(data)
    for tool, args in (
        (StrReplaceTool(), {"old_str": "PNG", "new_str": "JPG"}),
        (ViewTool(), {}),
        (InsertTool(), {"insert_line": 0, "text": "x"}),
    ):
        result = tool.run({"path": "img.png", **args}, env)
        assert result.is_error and "binary" in result.output
    assert (tmp_path / "img.png").read_bytes() == data


def test_view_ranges_and_long_files(env: LocalEnvironment, tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SOURCE)
    view = ViewTool()
    full = view.run({"path": "m.py"}, env)
    assert full.output.splitlines()[0] == "     1\tdef f1(x):" and len(full.output.splitlines()) == 30
    part = view.run({"path": "m.py", "view_range": [4, 5]}, env)
    assert part.output == "     4\tdef f2(x):\n     5\t    return x + 2"
    tail = view.run({"path": "m.py", "view_range": [29, -1]}, env)
    assert tail.output.splitlines() == ["    29\t    return x + 10", "    30\t"]
    assert view.run({"path": "m.py", "view_range": [40, 50]}, env).is_error
    assert view.run({"path": "m.py", "view_range": [5, 2]}, env).is_error
    (tmp_path / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 3001)))
    big = view.run({"path": "big.txt"}, env)
    assert "line 800" in big.output and "line 801" not in big.output
    assert "3000 lines" in big.output and "[801, 1600]" in big.output
    assert view.run({"path": "nope.txt"}, env).is_error


def test_view_directory_listing(env: LocalEnvironment, tmp_path: Path) -> None:
    for rel in (
        "src/pkg/deep/x.py",
        "src/main.py",
        "README.md",
        "build/out.o",
        "node_modules/m/i.js",
        "logs/a.log",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    (tmp_path / ".gitignore").write_text("build/\n*.log\n")
    out = ViewTool().run({"path": "."}, env).output
    lines = out.splitlines()
    assert lines[1:] == [
        ".gitignore",
        "README.md",
        "src/ (2 files)",
        "src/main.py",
        "src/pkg/ (1 file)",
    ]  # paths to pass back
    assert "deep" not in out  # two levels only
    for hidden in ("build", "out.o", "node_modules", "a.log"):
        assert hidden not in out
    assert ViewTool().run({"path": "build"}, env).output.splitlines()[1:] == ["build/out.o"]
    assert ViewTool().run({"path": "./src/"}, env).output.splitlines()[1:] == [
        "src/main.py",
        "src/pkg/ (1 file)",
        "src/pkg/deep/ (1 file)",
    ]
    (tmp_path / "empty").mkdir()
    assert ViewTool().run({"path": "empty"}, env).output == "empty/ is empty"
    assert "'path' is required" in ViewTool().run({}, env).output


def test_a_big_directory_view_folds_its_largest_directories(env: LocalEnvironment, tmp_path: Path) -> None:
    files = [
        "README.md",
        "src/app/__init__.py",
        "src/app/core.py",
        *(f"docs/d{i}.md" for i in range(30)),
        *(f"tests/test_{i}.py" for i in range(120)),
    ]
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    lines = ViewTool().run({"path": "."}, env).output.splitlines()
    assert "tests/ (120 files) [not listed]" in lines and not any("test_7.py" in ln for ln in lines)
    assert "docs/d0.md" in lines and "src/app/ (2 files)" in lines  # what fits is still shown
    assert lines[-1] == "[1 large directory not listed; view one to see it]" and len(lines) <= 80
    inside = ViewTool().run({"path": "tests"}, env).output.splitlines()  # viewed itself: listed in full
    assert len(inside) == 121 and "tests/test_7.py" in inside


def test_create_and_insert(env: LocalEnvironment, tmp_path: Path) -> None:
    created = CreateTool().run({"path": "new/dir/f.txt", "file_text": "a\nc\n"}, env)
    assert not created.is_error and created.output.startswith("Created new/dir/f.txt")
    assert "+a\n+c" in created.data["diff"]
    assert not InsertTool().run({"path": "new/dir/f.txt", "insert_line": 1, "text": "b"}, env).is_error
    assert not InsertTool().run({"path": "new/dir/f.txt", "insert_line": 0, "text": "top\n"}, env).is_error
    assert (tmp_path / "new/dir/f.txt").read_text() == "top\na\nb\nc\n"
    bad = InsertTool().run({"path": "new/dir/f.txt", "insert_line": 9, "text": "x"}, env)
    assert bad.is_error and "between 0 and 4" in bad.output
    (tmp_path / "nonl.txt").write_text("one")
    InsertTool().run({"path": "nonl.txt", "insert_line": 1, "text": "two"}, env)
    assert (tmp_path / "nonl.txt").read_text() == "one\ntwo\n"
    over = CreateTool().run({"path": "new/dir/f.txt", "file_text": "z\n"}, env)
    assert over.output.startswith("Overwrote") and "-top" in over.data["diff"]


def test_paths_outside_workspace_refused(env: LocalEnvironment, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("secret\n")
    try:
        for tool, args in (
            (ViewTool(), {"path": str(outside)}),
            (ViewTool(), {"path": "../" + outside.name}),
            (CreateTool(), {"path": "../evil.txt", "file_text": "x"}),
            (StrReplaceTool(), {"path": str(outside), "old_str": "secret", "new_str": "x"}),
            (ViewTool(), {"path": ".git/config"}),
        ):
            result = tool.run(args, env)
            assert result.is_error and ("outside the workspace" in result.output or ".git" in result.output)
        assert outside.read_text() == "secret\n" and not (tmp_path.parent / "evil.txt").exists()
        # --add-dir style extra roots are allowed.
        extra = LocalEnvironment(str(tmp_path), allowed_roots=[str(tmp_path.parent)])
        assert "secret" in ViewTool().run({"path": str(outside)}, extra).output
    finally:
        outside.unlink()


# --------------------------------------------------------------------------- the syntax guard


def test_edit_that_breaks_python_syntax_is_refused_and_writes_nothing(
    env: LocalEnvironment, tmp_path: Path
) -> None:
    (tmp_path / "m.py").write_text(SOURCE)
    before = (tmp_path / "m.py").read_bytes()
    garbled = StrReplaceTool().run(
        {"path": "m.py", "old_str": "def f3(x):", "new_str": "def f 3 rest(x):"}, env
    )
    assert garbled.is_error
    assert "not applied" in garbled.output and "syntax error (line 7:" in garbled.output
    inserted = InsertTool().run({"path": "m.py", "insert_line": 2, "text": "    return (x"}, env)
    assert inserted.is_error and "syntax error" in inserted.output
    assert (tmp_path / "m.py").read_bytes() == before
    # A valid edit of the same line goes through.
    ok = StrReplaceTool().run({"path": "m.py", "old_str": "def f3(x):", "new_str": "def f3(x, y=0):"}, env)
    assert not ok.is_error, ok.output


# --------------------------------------------------------------------------- the name guard (pyflakes)

MERGE = """def middle(arr):
    lo, hi = 0, len(arr) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        lo = mid + 1
    return arr[lo]
"""


def test_an_edit_that_introduces_an_undefined_name_is_refused_with_the_reason(
    env: LocalEnvironment, tmp_path: Path
) -> None:
    # The hidden public set's damage: a variable renamed into a NameError (`arr` -> `the`).
    (tmp_path / "search.py").write_text(MERGE)
    before = (tmp_path / "search.py").read_bytes()
    renamed = StrReplaceTool().run(
        {"path": "search.py", "old_str": "    return arr[lo]", "new_str": "    return the[lo]"}, env
    )
    assert renamed.is_error and "not applied" in renamed.output
    assert "neither defines nor imports: `the` (line 6)" in renamed.output
    inserted = InsertTool().run({"path": "search.py", "insert_line": 1, "text": "    log(arr)"}, env)
    assert inserted.is_error and "`log` (line 2)" in inserted.output
    overwritten = CreateTool().run(
        {"path": "search.py", "file_text": MERGE.replace("len(arr)", "size(arr)")}, env
    )
    assert overwritten.is_error and "`size`" in overwritten.output
    assert (tmp_path / "search.py").read_bytes() == before  # nothing was written
    # the module's own names, builtins and a newly imported module are fine
    ok = StrReplaceTool().run(
        {
            "path": "search.py",
            "old_str": "    return arr[lo]",
            "new_str": "    return sorted(arr)[min(lo, hi)]",
        },
        env,
    )
    assert not ok.is_error, ok.output
    imported = InsertTool().run(
        {"path": "search.py", "insert_line": 0, "text": "import math\nLIMIT = math.inf"}, env
    )
    assert not imported.is_error, imported.output


def test_the_name_guard_judges_only_what_the_edit_adds(env: LocalEnvironment, tmp_path: Path) -> None:
    # A name the module already lacked (a missing import the issue is about) does not block other edits,
    # and the edit that adds the import goes through.
    (tmp_path / "store.py").write_text("import os\n\n\ndef save(p, s):\n    return json.dumps(s), os.sep\n")
    assert (
        not StrReplaceTool()
        .run({"path": "store.py", "old_str": "def save(p, s):", "new_str": "def save(p, s=None):"}, env)
        .is_error
    )
    assert (
        not StrReplaceTool()
        .run({"path": "store.py", "old_str": "import os\n", "new_str": "import json\nimport os\n"}, env)
        .is_error
    )
    # star imports may define anything: not refused; other languages are not checked
    (tmp_path / "star.py").write_text("from os.path import *\n\nX = 1\n")
    assert (
        not StrReplaceTool()
        .run({"path": "star.py", "old_str": "X = 1", "new_str": "X = join('a', 'b')"}, env)
        .is_error
    )
    (tmp_path / "a.js").write_text("let x = 1;\n")
    assert (
        not StrReplaceTool()
        .run({"path": "a.js", "old_str": "let x = 1;", "new_str": "let x = y;"}, env)
        .is_error
    )


def test_syntax_guard_leaves_other_files_and_broken_modules_alone(
    env: LocalEnvironment, tmp_path: Path
) -> None:
    # Not Python: any text may go in.
    (tmp_path / "notes.txt").write_text("a = 1\n")
    assert (
        not StrReplaceTool().run({"path": "notes.txt", "old_str": "a = 1", "new_str": "a = ("}, env).is_error
    )
    # A module that does not parse now (another Python's syntax, or half-written): edits are the repair.
    (tmp_path / "broken.py").write_text("def f(:\n    return 1\n")
    fixed = StrReplaceTool().run({"path": "broken.py", "old_str": "def f(:", "new_str": "def f(x:"}, env)
    assert not fixed.is_error, fixed.output
    assert (tmp_path / "broken.py").read_text() == "def f(x:\n    return 1\n"
    # Warnings from parsing (an invalid escape) are not printed, and do not count as errors.
    (tmp_path / "w.py").write_text('P = "\\d+"\n')
    assert not StrReplaceTool().run({"path": "w.py", "old_str": "P =", "new_str": "Q ="}, env).is_error
