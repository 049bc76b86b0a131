"""`view` of a directory: a two-level listing with file counts, .gitignore honoured, the largest
top-level directories folded when the whole would not fit a screen.

Every entry is written as the path to pass back to a tool (`tests/test_calc.py`, not `test_calc.py`
indented under `tests/`) and starts its line: a model copies a path that starts a line as the tokens
it will write, while an indented name is other tokens (` calc` after a space, `calc` at a line's
start); the small embedded model copied the wrong entry from the indented tree."""

from __future__ import annotations

from clover.core.environment_protocol import Environment
from clover.core.tool_protocol import ToolResult
from clover.tools.listing import NOISE_DIRS
from clover.tools.textio import display_path, printable

MAX_LISTING = 300
LISTING_LINES = 80  # past this, the largest top-level directories are folded (see _folded)


def directory_view(env: Environment, directory: str) -> ToolResult:
    """`view` of a directory: its files two levels deep (ignored ones skipped), each directory with
    its file count; past LISTING_LINES the largest top-level directories are folded. Each entry's
    line names its path (`line_files`)."""
    rel = display_path(env, directory)
    lines, files = _listing(env, directory, rel)
    return ToolResult("\n".join(lines), data={"path": rel}, line_files=tuple(files))


def _listing(env: Environment, directory: str, rel: str) -> tuple[list[str], list[tuple[str, ...]]]:
    """The listing's lines, and the path each entry's line shows."""
    counts: dict[str, int] = {}
    for listed in env.list_files(directory):
        parts = listed.split("/")
        if any(p in NOISE_DIRS for p in parts[:-1]):
            continue
        for depth in range(1, min(len(parts), 2) + 1):
            key = "/".join(parts[:depth]) + ("/" if depth < len(parts) else "")
            counts[key] = counts.get(key, 0) + 1
    prefix = "" if rel == "." else rel.rstrip("/") + "/"
    if not counts:
        # Everything here is ignored (e.g. build/): the caller asked for it, so show one level anyway.
        try:
            entries = env.list(directory)
        except OSError as exc:
            return [f"{rel}/: cannot list: {exc.strerror or exc}"], []
        if not entries:
            return [f"{rel}/ is empty"], []
        shown = entries[:MAX_LISTING]
        return (
            [f"{rel}/ (ignored by .gitignore; one level):", *(printable(prefix + e) for e in shown)],
            [(), *((prefix + e,) for e in shown)],
        )
    folded = _folded(counts)
    keys = [k for k in sorted(counts) if k.split("/", 1)[0] + "/" not in folded or "/" not in k.rstrip("/")]
    out, files = [f"{rel}/ (two levels; ignored files skipped):"], [()]
    for key in keys[:MAX_LISTING]:
        n = counts[key]
        label = f"{key} ({n} file{'' if n == 1 else 's'})" if key.endswith("/") else key
        out.append(printable(prefix + label) + (" [not listed]" if key in folded else ""))
        files.append((prefix + key.rstrip("/"),))
    if len(keys) > MAX_LISTING:
        out.append(f"[{len(keys) - MAX_LISTING} more entries; view a subdirectory or use glob]")
    if folded:
        out.append(
            f"[{len(folded)} large director{'y' if len(folded) == 1 else 'ies'} not listed; view one to see it]"
        )
    return out, files


def _folded(counts: dict[str, int]) -> set[str]:
    """Top-level directories whose entries are left out, largest first, until the listing fits
    LISTING_LINES: a repository's overview should show its shape (README, packages, tests) in a screen,
    not three hundred test files."""
    children: dict[str, int] = {}
    for key in counts:
        top, sep, _ = key.rstrip("/").partition("/")
        if sep:
            children[top + "/"] = children.get(top + "/", 0) + 1
    lines, folded = len(counts), set()
    for top in sorted(children, key=lambda t: (-children[t], t)):
        if lines <= LISTING_LINES:
            break
        folded.add(top)
        lines -= children[top]
    return folded
