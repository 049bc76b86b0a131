"""Workspace containment: every path a file tool touches is resolved here first."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


class PathError(Exception):
    """A path the tools may not touch; the message is shown to the model as is."""


def resolve_path(root: str, path: str, extra_roots: Sequence[str] = ()) -> Path:
    """Resolve `path` (absolute or relative to `root`) and refuse it unless it lies inside `root`
    or one of `extra_roots` (after `..` and symlinks are resolved) and outside any `.git`."""
    if not path or "\x00" in path:
        raise PathError(f"invalid path: {path!r}")
    raw = Path(os.path.expanduser(path))
    candidate = raw if raw.is_absolute() else Path(root) / raw
    resolved = Path(os.path.realpath(candidate))
    roots = [Path(os.path.realpath(r)) for r in (root, *extra_roots)]
    inside = next((r for r in roots if resolved == r or r in resolved.parents), None)
    if inside is None:
        raise PathError(f"{path}: outside the workspace ({root}); use --add-dir to allow it")
    if ".git" in resolved.relative_to(inside).parts:
        raise PathError(f"{path}: the repository's .git directory is off limits to file tools")
    return resolved
