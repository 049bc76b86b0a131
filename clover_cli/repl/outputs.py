"""Every tool result's whole output, kept for the session so `/show N` can page through all of it and
the screen counts its real lines (`seq 1 5000` is 5000 lines). The model gets a head + tail cut of a
long output; the environment spills the whole of it to a temp file that goes when the process ends,
so the chat copies it into the session's own folder (beside the session file) the moment it arrives."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from clover.core.protocols import ToolResult
from clover.repl.toolview import split_exit

TAIL_BYTES = 64 * 1024  # enough for the last lines of a spilled output


@dataclass
class StoredOutput:
    """`text` in memory, or `path` to the whole output on disk; `exit_code` from the tool's marker."""

    text: str | None
    path: Path | None
    lines: int
    exit_code: int | None
    spilled: bool = False

    def read(self) -> str:
        if self.path is None:
            return self.text or ""
        try:
            return self.path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return f"[the full output at {self.path} cannot be read: {exc.strerror or exc}]"

    def head_tail(self, head: int, tail: int) -> tuple[list[str], int, list[str]]:
        """(first lines, how many lines are left out, last lines), without reading a spilled file whole."""
        if self.path is None or self.lines <= head + tail + 1:
            lines = self.read().rstrip("\n").split("\n") if self.lines else []
            if len(lines) <= head + tail + 1:
                return lines, 0, []
            return lines[:head], len(lines) - head - tail, lines[-tail:]
        with open(self.path, "rb") as fh:
            first = [fh.readline().decode("utf-8", "replace").rstrip("\n") for _ in range(head)]
            fh.seek(max(0, os.path.getsize(self.path) - TAIL_BYTES))
            last = fh.read().decode("utf-8", "replace").rstrip("\n").split("\n")[-tail:]
        return first, self.lines - head - tail, last


def count_lines(text: str) -> int:
    body = text.rstrip("\n")
    return body.count("\n") + 1 if body else 0


class OutputStore:
    """Keeps outputs for one session in `directory` (created on the first spilled output)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.kept = 0

    def keep(self, result: ToolResult) -> StoredOutput:
        body, code = split_exit(result.output)
        data = result.data if isinstance(result.data, dict) else {}
        spilled = data.get("full_output_path")
        if isinstance(spilled, str) and os.path.isfile(spilled):
            self.kept += 1
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / f"{self.kept}.log"
            try:
                shutil.copyfile(spilled, path)
                return StoredOutput(None, path, _count_file_lines(path), code, spilled=True)
            except OSError:  # the cut output is still there: better than nothing
                pass
        if body.strip() == "(no output)" and code is not None:  # the bash tool's word for nothing
            body = ""
        return StoredOutput(body, None, count_lines(body), code)


def _count_file_lines(path: Path) -> int:
    newlines, last = 0, b"\n"
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            newlines += chunk.count(b"\n")
            last = chunk[-1:]
    return newlines + (last != b"\n")
