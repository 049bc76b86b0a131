"""tools/paths.py: path-escape probes are refused, ordinary paths resolve."""

from __future__ import annotations

import os
import subprocess
import unicodedata
from pathlib import Path

import pytest

from clover.tools.paths import PathError, resolve_path


@pytest.fixture
def ws(tmp_path, monkeypatch):
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    (root / "sub" / "b.txt").write_text("b")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("s")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    os.symlink(outside / "secret.txt", root / "to_secret")
    os.symlink(outside, root / "to_outside_dir")
    os.symlink(tmp_path / "outside" / "not_yet", root / "dangling")
    os.symlink(root / ".git", root / "to_git")
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    os.symlink("sub/b.txt", root / "inner_link")
    return root


ESCAPES = [
    "../outside/secret.txt",
    "sub/../../outside/secret.txt",
    "sub/../../../etc/passwd",
    "/etc/passwd",
    "~/notes.txt",
    "~",
    "to_secret",
    "to_outside_dir/secret.txt",
    "to_outside_dir",
    "dangling",
    "loop_a",
    "/",
]

DOTGIT = [
    ".git",
    ".git/config",
    "./.git/HEAD",
    "sub/../.git/config",
    "./.GIT/config",
    ".Git",
    ".git.",
    ".git ",
    ".git./config",
    ".g\u200cit/config",  # zero-width non-joiner (ignored by HFS+)
    ".gi\ufefft",  # zero-width no-break space
    "\uff0e\uff47\uff49\uff54/config",  # full-width ．ｇｉｔ
    ".g\u0131t",  # dotless i
    ".\u0261it",  # script g
    "GIT~1",
    ".git::$INDEX_ALLOCATION",
    "to_git/config",
    "sub\\..\\.git\\config",
    ".gi\u0308t",  # combining diaeresis over i (NFD look-alike)
]

LOOKALIKE_DOTS = ["\u2025/outside", "\uff0e\uff0e/outside", "sub/\u2024\u2024/x"]


@pytest.mark.parametrize("path", ESCAPES)
def test_escapes_are_refused(ws, path):
    with pytest.raises(PathError, match="outside the workspace|symlink loop"):
        resolve_path(str(ws), path)


@pytest.mark.parametrize("path", DOTGIT)
def test_dotgit_spellings_are_refused(ws, path):
    with pytest.raises(PathError, match=r"\.git"):
        resolve_path(str(ws), path)


def test_absolute_path_into_dotgit_is_refused(ws):
    with pytest.raises(PathError, match=r"\.git"):
        resolve_path(str(ws), str(ws / ".git" / "index"))


@pytest.mark.parametrize("path", LOOKALIKE_DOTS)
def test_dot_lookalikes_are_refused(ws, path):
    with pytest.raises(PathError, match="imitates"):
        resolve_path(str(ws), path)


def test_case_and_normalisation_tricks_on_the_root(tmp_path):
    root = tmp_path / unicodedata.normalize("NFC", "caf\u00e9")
    root.mkdir()
    (root / "f.txt").write_text("x")
    nfd = str(tmp_path / unicodedata.normalize("NFD", "caf\u00e9") / "f.txt")
    upper = str(root).upper() + "/F.TXT"
    for probe in (nfd, upper):
        if os.path.exists(probe) and os.path.samefile(probe, root / "f.txt"):
            continue  # a normalising / case-insensitive file system: the same file, legitimately inside
        with pytest.raises(PathError, match="outside"):
            resolve_path(str(root), probe)


@pytest.mark.parametrize("bad", ["", "   ", "a\x00b"])
def test_invalid_paths(ws, bad):
    with pytest.raises(PathError, match="invalid path"):
        resolve_path(str(ws), bad)


@pytest.mark.parametrize(
    "path,expected",
    [
        ("a.txt", "a.txt"),
        ("./sub/../a.txt", "a.txt"),
        ("sub/b.txt", "sub/b.txt"),
        ("inner_link", "sub/b.txt"),
        ("new_dir/new_file.py", "new_dir/new_file.py"),
        (".gitignore", ".gitignore"),
        (".github/workflows/ci.yml", ".github/workflows/ci.yml"),
        ("my.git/x", "my.git/x"),
        ("gitdir/x", "gitdir/x"),
        ("...", "..."),
        ("caf\u0065\u0301.txt", "caf\u0065\u0301.txt"),
        (".", ""),
    ],
)
def test_ordinary_paths_resolve_inside(ws, path, expected):
    got = resolve_path(str(ws), path)
    assert got == Path(os.path.realpath(ws / expected)) if expected else got == Path(os.path.realpath(ws))


def test_absolute_inside_and_extra_roots(ws, tmp_path):
    assert resolve_path(str(ws), str(ws / "a.txt")) == Path(os.path.realpath(ws / "a.txt"))
    extra = tmp_path / "outside"
    assert resolve_path(str(ws), "../outside/secret.txt", [str(extra)]) == Path(
        os.path.realpath(extra / "secret.txt")
    )
    assert resolve_path(str(ws), "to_secret", [str(extra)]).name == "secret.txt"
    with pytest.raises(PathError):
        resolve_path(str(ws), "../other.txt", [str(extra)])


def test_symlinked_root_is_fine(ws, tmp_path):
    alias = tmp_path / "alias"
    os.symlink(ws, alias)
    assert resolve_path(str(alias), "a.txt") == Path(os.path.realpath(ws / "a.txt"))
    with pytest.raises(PathError, match=r"\.git"):
        resolve_path(str(alias), ".git/config")
