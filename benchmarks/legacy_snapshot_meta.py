"""(Kept for benchmarks/legacy_checkpoints.py, as it was at debbb70.) What git cannot store but an undo must restore: exact permission bits and empty directories.

A checkpoint keeps, beside the work tree's git tree, a small JSON manifest: every file whose
permission bits differ from what git would recreate (0644, or 0755 for an executable), and every
empty directory. After git restores the tree, `apply` sets those bits and makes or removes
directories until the work tree's empty directories are exactly the manifest's.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterable


def _canonical(git_mode: str) -> int:
    return 0o755 if git_mode == "100755" else 0o644


def file_modes(root: str, entries: Iterable[tuple[str, str]]) -> dict[str, int]:
    """{path: bits} for regular files (git mode, path) whose bits git would not recreate."""
    modes = {}
    for git_mode, path in entries:
        if git_mode not in ("100644", "100755"):
            continue
        try:
            bits = stat.S_IMODE(os.lstat(os.path.join(root, path)).st_mode)
        except OSError:
            continue
        if bits != _canonical(git_mode):
            modes[path] = bits
    return modes


def empty_dirs(root: str, skip: set[str], skip_paths: set[str]) -> list[str]:
    """Empty directories under root (relative, sorted); directories named in `skip` (.git,
    caches) and paths in `skip_paths` (nested repositories) are not entered."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        rel = "" if rel == "." else rel
        dirnames[:] = [d for d in dirnames if d not in skip and os.path.join(rel, d) not in skip_paths
                       and not os.path.islink(os.path.join(dirpath, d))]
        if rel and not filenames and not os.listdir(dirpath):
            found.append(rel)
    return sorted(found)


def manifest(root: str, entries: Iterable[tuple[str, str]], skip: set[str], skip_paths: set[str]) -> str:
    return json.dumps({"modes": file_modes(root, entries), "dirs": empty_dirs(root, skip, skip_paths)},
                      sort_keys=True)


def apply(root: str, text: str, entries: Iterable[tuple[str, str]], skip: set[str], skip_paths: set[str]) -> None:
    """Bring bits and empty directories of the restored tree (git entries `entries`) to `text`."""
    data = json.loads(text) if text else {}
    modes, want_dirs = data.get("modes", {}), set(data.get("dirs", []))
    for git_mode, path in entries:
        if git_mode not in ("100644", "100755"):
            continue
        full = os.path.join(root, path)
        want = modes.get(path, _canonical(git_mode))
        with contextlib.suppress(OSError):
            if not os.path.islink(full) and stat.S_IMODE(os.lstat(full).st_mode) != want:
                os.chmod(full, want)
    for rel in sorted(want_dirs):
        with contextlib.suppress(OSError):
            os.makedirs(os.path.join(root, rel), exist_ok=True)
    for _ in range(64):  # removing a/b/c can leave a/b empty: repeat until nothing changes
        extra = [d for d in empty_dirs(root, skip, skip_paths) if d not in want_dirs]
        if not extra:
            break
        for rel in extra:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(root, rel))
