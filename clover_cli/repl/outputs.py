"""Every tool result's whole output, kept for the chat so `/show N` can page through all of it and the
screen counts its real lines (`seq 1 5000` is 5000 lines). The model gets a head + tail cut of a long
output; the environment spills the whole of it to a file the agent's own commands can reach (and
remove), so the chat copies it, the moment it arrives, into a folder of its own that goes when the
chat ends (the results of a resumed session are not numbered again)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from clover.core.model_protocol import Message
from clover.core.tool_protocol import ToolResult
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
    """Small outputs stay in memory; spilled ones are copied into a temp folder made on the first."""

    def __init__(self) -> None:
        self.directory: Path | None = None
        self.kept = 0

    def _folder(self) -> Path:
        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="clover-chat-outputs-"))
            atexit.register(shutil.rmtree, self.directory, ignore_errors=True)
        return self.directory

    def keep(self, result: ToolResult) -> StoredOutput:
        body, code = split_exit(result)
        data = result.data if isinstance(result.data, dict) else {}
        spilled = data.get("full_output_path")
        if isinstance(spilled, str) and os.path.isfile(spilled):
            self.kept += 1
            path = self._folder() / f"{self.kept}.log"
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


class SeenLines:
    """How many lines each result shown in the chat really had, by its message (the message keeps
    the model's cut copy: a 10,000-line output is a 3,423-line message). Saved with the session by
    message index, so a resumed session's replay counts what ran, not the copy."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[Message, int]] = {}  # the message itself: ids are reused

    def note(self, message: Message, lines: int) -> None:
        self._by_id[id(message)] = (message, lines)

    def lines(self, message: Message) -> int | None:
        entry = self._by_id.get(id(message))
        return entry[1] if entry is not None and entry[0] is message else None

    def saved(self, messages: list[Message]) -> dict[str, int]:
        return {str(i): n for i, m in enumerate(messages) if (n := self.lines(m)) is not None}

    def load(self, messages: list[Message], saved: dict[str, int]) -> None:
        for key, lines in (saved or {}).items():
            if str(key).isdigit() and int(key) < len(messages) and isinstance(lines, int):
                self.note(messages[int(key)], lines)
