"""Esc interrupts, as in Claude Code and Codex. While the agent works the terminal is in cbreak mode
without echo (a typed ^C no longer lands in the output) and a thread watches stdin: a lone Esc byte
(not the start of an arrow key's sequence) sends SIGINT to this process, so Esc takes the same path
as Ctrl-C; Ctrl-D does too and asks the chat to exit (`exit_requested`), as it does at the prompt.
Paused around approval questions, which read the terminal themselves. Anything else typed meanwhile
is kept (`take_typed`) for the next prompt, and shown meanwhile (`preview`): type-ahead is not lost
and not invisible."""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import sys
import threading
from typing import Any

ESC = b"\x1b"
CTRL_D = b"\x04"
_SEQUENCE = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|O.|.)?", re.S)  # arrows, function keys, Alt-x


class EscWatch:
    def __init__(self, fd: int | None = None) -> None:
        self.fd = sys.stdin.fileno() if fd is None else fd
        self._saved: list[Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._typed = bytearray()
        self.exit_requested = False  # Ctrl-D while the agent worked

    @property
    def active(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        if self._thread is not None:
            return
        try:
            import termios

            if not os.isatty(self.fd):
                return
            self._saved = termios.tcgetattr(self.fd)
            mode = termios.tcgetattr(self.fd)
            mode[3] &= ~(termios.ICANON | termios.ECHO)  # lflag: keys one by one, not echoed; ISIG stays
            mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
            termios.tcsetattr(self.fd, termios.TCSANOW, mode)
        except (ImportError, OSError, ValueError):  # not a POSIX terminal: Ctrl-C still works
            self._saved = None
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="clover-esc", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join(timeout=1.0)
        if self._saved is not None:
            import termios

            with contextlib.suppress(OSError, ValueError):
                termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.05)
                if not ready:
                    continue
                data = os.read(self.fd, 64)
            except (OSError, ValueError):
                return
            if not data:
                return
            if data == ESC:  # Esc alone; an escape sequence (arrows, function keys) comes in one read
                _interrupt_main()
                return
            if CTRL_D in data:  # the chat's exit key: stop the step, then leave
                self._typed += _SEQUENCE.sub(b"", data[: data.index(CTRL_D)])
                self.exit_requested = True
                _interrupt_main()
                return
            self._typed += _SEQUENCE.sub(b"", data)

    def preview(self) -> str:
        """What has been typed so far (as take_typed returns it), left in place."""
        return _edited(bytes(self._typed))

    def take_typed(self) -> str:
        """What was typed while the agent worked (escape sequences dropped, backspaces applied)."""
        raw, self._typed = bytes(self._typed), bytearray()
        return _edited(raw)

    def __enter__(self) -> EscWatch:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _interrupt_main() -> None:
    """SIGINT to the main thread itself: sent to the process, the kernel may hand it to any thread,
    and a main thread blocked in a system call (opening a FIFO, reading a socket) would not wake."""
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


def _edited(raw: bytes) -> str:
    """Typed bytes as text: backspaces applied, other control bytes dropped, Enter as a newline."""
    out: list[str] = []
    for ch in raw.decode("utf-8", errors="ignore"):
        if ch in "\x7f\b":
            if out:
                out.pop()
        elif ch in "\r\n" or ch == "\t" or ch >= " ":
            out.append("\n" if ch == "\r" else ch)
    return "".join(out)
