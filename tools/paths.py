"""Workspace containment: every path a file tool touches is resolved here first.

A path is allowed when, after `~`, `..` and every symlink are resolved, it lies inside the root or
one of the extra roots (--add-dir), and no component of it spells `.git`. "Spells" is generous on
purpose: case-insensitive and Unicode-normalising file systems (macOS, Windows) treat `.GIT`,
`.git.`, `.g\u200cit` (ignorable code points), full-width `．ｇｉｔ` and `GIT~1` as the same
directory, so all of them are refused everywhere, as are look-alikes of `.` and `..`.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path


class PathError(Exception):
    """A path the tools may not touch; the message is shown to the model as is."""


# Code points HFS+/APFS and NTFS-aware tools ignore when comparing names (as git's own check does).
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]"
)
# Look-alikes NFKC leaves alone, mapped to the letters of `.git`.
_CONFUSABLE = str.maketrans(
    {
        "\u0261": "g",
        "\u0581": "g",
        "\u0456": "i",
        "\u0131": "i",
        "\u026a": "i",
        "\u0269": "i",
        "\u03b9": "i",
        "\u0442": "t",
        "\u03c4": "t",
        "\u3002": ".",
        "\u2024": ".",
        "\u00b7": ".",
        "\u2027": ".",
    }
)


def _skeleton(part: str) -> str:
    """What a name collapses to on a forgiving file system: case, width, marks, look-alikes gone."""
    s = unicodedata.normalize("NFKC", _IGNORABLE.sub("", part))
    s = "".join(c for c in unicodedata.normalize("NFD", s) if not unicodedata.combining(c))
    s = s.casefold().translate(_CONFUSABLE)
    s = s.split(":", 1)[0]  # NTFS streams: `.git::$INDEX_ALLOCATION`
    return s.rstrip(" ") if s.strip(".") == "" else s.rstrip(". ")


def _is_dotgit(part: str) -> bool:
    s = _skeleton(part)
    return s == ".git" or bool(re.fullmatch(r"git~\d+", s))


def _check_parts(path: str, shown: str) -> None:
    for part in re.split(r"[/\\]+", path):
        if not part:
            continue
        if _is_dotgit(part):
            raise PathError(f"{shown}: the repository's .git directory is off limits to file tools")
        if part not in (".", "..") and _skeleton(part) in (".", ".."):
            raise PathError(f"{shown}: refusing a name that imitates '.' or '..' ({part!r})")


def resolve_path(root: str, path: str, extra_roots: Sequence[str] = ()) -> Path:
    """Resolve `path` (absolute or relative to `root`) and refuse it unless it lies inside `root`
    or one of `extra_roots` (after `..` and symlinks are resolved) and outside any `.git`."""
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        raise PathError(f"invalid path: {path!r}")
    _check_parts(path, path)
    raw = Path(os.path.expanduser(path))
    candidate = raw if raw.is_absolute() else Path(root) / raw
    try:
        resolved = Path(os.path.realpath(candidate))
    except OSError as exc:  # a component changed while being resolved (a swap in progress)
        raise PathError(f"{path}: cannot resolve: {exc.strerror or exc}") from None
    if os.path.islink(resolved):  # realpath stops on a symlink loop
        raise PathError(f"{path}: symlink loop")
    roots = [Path(os.path.realpath(r)) for r in (root, *extra_roots)]
    inside = next((r for r in roots if resolved == r or r in resolved.parents), None)
    if inside is None:
        raise PathError(f"{path}: outside the workspace ({root}); use --add-dir to allow it")
    _check_parts(str(resolved.relative_to(inside)), path)
    main_git = roots[0] / ".git"
    if resolved == main_git or main_git in resolved.parents:
        raise PathError(f"{path}: the repository's .git directory is off limits to file tools")
    return resolved
