"""glob and grep on real trees, inside and outside git, honouring .gitignore."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import clover.tools.search as search
from clover.tools.environment import LocalEnvironment
from clover.tools.search import GlobTool, GrepTool, glob_regex

FILES = {
    "src/app.py": "import os\n\ndef main():\n    return os.getcwd()  # TODO: tidy\n",
    "src/util/helpers.py": "def helper():\n    pass\n# todo lower\n",
    "src/web/app.ts": "export const todo = () => 1; // TODO\n",
    "README.md": "TODO: write docs\n",
    "build/gen.py": "# TODO generated\n",
    "debug.log": "TODO in a log\n",
    "data.bin": "TODO\x00binary",
}


def _tree(root: Path, git: bool) -> LocalEnvironment:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / ".gitignore").write_text("build/\n*.log\n")
    if git:
        subprocess.run(["git", "init", "-q", str(root)], check=True)
    return LocalEnvironment(str(root))


@pytest.fixture(params=["git", "plain"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> LocalEnvironment:
    return _tree(tmp_path, request.param == "git")


@pytest.fixture(params=["python", "git", "rg"])
def grep_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run grep tests with each backend alone: the Python scan, git grep, ripgrep (if installed)."""
    if request.param == "rg" and not shutil.which("rg"):
        pytest.skip("ripgrep not installed")
    monkeypatch.setattr(search, "BACKENDS", (request.param, "python"))
    return request.param


def test_glob_regex() -> None:
    assert glob_regex("**/*.py").match("a/b/c.py") and glob_regex("**/*.py").match("c.py")
    assert not glob_regex("*.py").match("a/c.py")
    assert glob_regex("src/*.{ts,tsx}").match("src/x.tsx") and not glob_regex("src/*.{ts,tsx}").match(
        "src/x.js"
    )
    assert glob_regex("[!a]?.md").match("bc.md") and not glob_regex("[!a]?.md").match("ac.md")


def test_glob_respects_gitignore(env: LocalEnvironment) -> None:
    result = GlobTool().run({"pattern": "**/*.py"}, env)
    assert result.output.splitlines() == ["src/app.py", "src/util/helpers.py"]
    assert GlobTool().run({"pattern": "*.log"}, env).output.startswith("no files match")
    # A pattern without '/' matches names at any depth; `path` narrows the search.
    assert GlobTool().run({"pattern": "app.*", "path": "src"}, env).output.splitlines() == [
        "src/app.py",
        "src/web/app.ts",
    ]
    assert GlobTool().run({"pattern": "*.py", "path": "../"}, env).is_error


def test_glob_caps_results(tmp_path: Path) -> None:
    for i in range(search.MAX_GLOB_RESULTS + 5):
        (tmp_path / f"f{i:03}.txt").write_text("")
    out = GlobTool().run({"pattern": "*.txt"}, LocalEnvironment(str(tmp_path))).output.splitlines()
    assert len(out) == search.MAX_GLOB_RESULTS + 1 and out[0] == "f000.txt"
    assert f"of {search.MAX_GLOB_RESULTS + 5} files" in out[-1]


def test_grep_respects_gitignore(env: LocalEnvironment, grep_backend: str) -> None:
    out = GrepTool().run({"pattern": "TODO"}, env).output.splitlines()
    assert sorted(out) == [
        "README.md:1:TODO: write docs",
        "src/app.py:4:    return os.getcwd()  # TODO: tidy",
        "src/web/app.ts:1:export const todo = () => 1; // TODO",
    ]


def test_grep_options(env: LocalEnvironment, grep_backend: str) -> None:
    grep = GrepTool()
    icase = grep.run({"pattern": "todo", "case_insensitive": True, "glob": "*.py"}, env).output.splitlines()
    assert sorted(icase) == [
        "src/app.py:4:    return os.getcwd()  # TODO: tidy",
        "src/util/helpers.py:3:# todo lower",
    ]
    ctx = grep.run({"pattern": r"def \w+\(\)", "path": "src/app.py", "context": 1}, env).output
    assert ctx.splitlines() == [
        "src/app.py-2-",
        "src/app.py:3:def main():",
        "src/app.py-4-    return os.getcwd()  # TODO: tidy",
    ]
    assert grep.run({"pattern": "nothing-like-this"}, env).output.startswith("no matches")
    bad = grep.run({"pattern": "("}, env)
    assert bad.is_error and "regular expression" in bad.output


def test_grep_caps_output(tmp_path: Path, grep_backend: str) -> None:
    (tmp_path / "many.txt").write_text("hit\n" * 1000)
    out = GrepTool().run({"pattern": "hit"}, LocalEnvironment(str(tmp_path))).output.splitlines()
    assert len(out) == search.MAX_GREP_MATCHES + 1 and "output cut" in out[-1]


def test_without_rg_git_grep_answers(tmp_path: Path) -> None:
    _tree(tmp_path, git=True)
    empty = tmp_path / "bin-none"
    empty.mkdir()
    git = shutil.which("git")
    assert git
    os.symlink(git, empty / "git")  # a PATH where only git exists: rg is "not installed"
    env = LocalEnvironment(str(tmp_path), env={"PATH": str(empty)})
    assert GlobTool().run({"pattern": "**/*.py"}, env).output.splitlines() == [
        "src/app.py",
        "src/util/helpers.py",
    ]
    out = GrepTool().run({"pattern": "TODO", "glob": "*.py"}, env).output.splitlines()
    assert out == ["src/app.py:4:    return os.getcwd()  # TODO: tidy"]
    assert sorted(GrepTool().run({"pattern": "TODO"}, env).output.splitlines()) == [
        "README.md:1:TODO: write docs",
        "src/app.py:4:    return os.getcwd()  # TODO: tidy",
        "src/web/app.ts:1:export const todo = () => 1; // TODO",
    ]


def test_glob_outside_git_skips_every_cache_undo_skips(tmp_path: Path) -> None:
    # One list of regenerable directories (tools/undo/treescan.py CACHE_DIRS): a `venv/` or `.nox/` the
    # undo scan never records is not listed either (the walk outside git used to list them).
    from clover.tools.undo.treescan import CACHE_DIRS

    for d in sorted(CACHE_DIRS):
        (tmp_path / d / "lib").mkdir(parents=True)
        (tmp_path / d / "lib" / "site.py").write_text("")
    (tmp_path / ".idea").mkdir()
    (tmp_path / ".idea" / "helper.py").write_text("")
    (tmp_path / "app.py").write_text("")
    out = GlobTool().run({"pattern": "**/*.py"}, LocalEnvironment(str(tmp_path))).output.splitlines()
    assert out == ["app.py"]
