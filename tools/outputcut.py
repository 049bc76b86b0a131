"""The one head + tail cutter for command output: errors usually sit at the end, so a long output
keeps its start and its end around a one-line marker saying what was cut; and the sink a running
command's output goes into (the head and the tail in memory, all of it in a spill file)."""

from __future__ import annotations

import codecs
import contextlib
import os
import tempfile
import threading
from collections.abc import Callable


def join_head_tail(head: str, tail: str, total: int, newlines: int, limit: int, where: str = "") -> str:
    """About `limit` characters: the first half of `head` and the last half of `tail` (the start and
    the end of an output of `total` characters and `newlines` lines), cut on line boundaries when one
    is near, joined by a marker; `where` tells where the full output is."""
    half = max(limit // 2, 100)
    head, tail = head[:half], tail[-half:]
    nl = head.rfind("\n")
    if nl >= half * 0.8:  # no half lines shown
        head = head[: nl + 1]
    nl = tail.find("\n")
    if 0 <= nl <= half * 0.2:
        tail = tail[nl + 1 :]
    cut = total - len(head) - len(tail)
    cut_lines = max(newlines - head.count("\n") - tail.count("\n"), 0)
    return f"{head}\n[... {cut} characters ({cut_lines} lines) cut{where} ...]\n{tail}"


def cut_output(text: str, limit: int, where: str = "") -> tuple[str, bool]:
    """(text, False) when it fits in `limit` characters, else (head + marker + tail, True)."""
    if len(text) <= limit:
        return text, False
    return join_head_tail(text, text, len(text), text.count("\n"), limit, where), True


SPILL_CAP = 64 * 1024 * 1024  # characters written to a spill file at most


class OutputSink:
    """Collects a command's output: the head and the tail in memory, everything in a spill file
    once it grows past `limit` characters."""

    def __init__(self, limit: int, spill_dir: str) -> None:
        self.limit = max(limit, 200)
        self.spill_dir = spill_dir
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.head = ""
        self.tail = ""
        self.total = 0
        self.newlines = 0
        self.spill: object | None = None
        self.spill_path: str | None = None
        self.spilled_chars = 0
        self.closed = False
        self.lock = threading.Lock()
        self.listener: Callable[[str], None] | None = None  # sees the text as it arrives

    def feed(self, data: bytes, final: bool = False) -> None:
        text = self.decoder.decode(data, final)
        if not text:
            return
        if self.listener is not None:
            with contextlib.suppress(Exception):  # a display problem must not lose output
                self.listener(text)
        with self.lock:
            if self.closed:
                return
            self.total += len(text)
            self.newlines += text.count("\n")
            if self.spill is None:
                self.head += text
                if len(self.head) > self.limit:
                    self._open_spill(self.head)
                    self.tail = self.head[-self.limit :]
                    self.head = self.head[: self.limit]
            else:
                self._write_spill(text)
                self.tail = (self.tail + text)[-self.limit :]

    def _open_spill(self, text: str) -> None:
        os.makedirs(self.spill_dir, exist_ok=True)
        fd, self.spill_path = tempfile.mkstemp(prefix="exec-", suffix=".log", dir=self.spill_dir)
        self.spill = open(fd, "w", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed in render
        self._write_spill(text)

    def _write_spill(self, text: str) -> None:
        room = SPILL_CAP - self.spilled_chars
        if room <= 0:
            return
        self.spill.write(text[:room])  # type: ignore[attr-defined]
        self.spilled_chars += min(len(text), room)
        if self.spilled_chars >= SPILL_CAP:
            self.spill.write("\n[spill file capped here]\n")  # type: ignore[attr-defined]

    def render(self) -> tuple[str, bool, str | None]:
        """(output, truncated, spill path); stops collecting."""
        with self.lock:
            self.closed = True
            if self.spill is None:
                return self.head, False, None
            self.spill.close()  # type: ignore[attr-defined]
            where = (
                f"; the full output ({self.total} characters) is in {self.spill_path}; "
                "view it with view_range or grep"
            )
            return (
                join_head_tail(self.head, self.tail, self.total, self.newlines, self.limit, where),
                True,
                self.spill_path,
            )


def pump(fd: int, sink: OutputSink) -> None:
    """Read `fd` into `sink` until its writers are gone; closes it."""
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            sink.feed(chunk)
        sink.feed(b"", final=True)
    except OSError:
        pass
    finally:
        os.close(fd)
