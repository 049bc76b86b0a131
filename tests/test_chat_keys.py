"""The Esc watch on a real pseudo-terminal: a lone Esc raises SIGINT in this process (the same path
as Ctrl-C), other keys are kept as type-ahead (arrow keys dropped, backspace applied), echo is off
while it watches and back on after."""

from __future__ import annotations

import os
import signal
import time

import pytest

termios = pytest.importorskip("termios")

from clover.repl.keys import EscWatch  # noqa: E402


def _wait(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_esc_interrupts_and_typed_keys_are_kept() -> None:
    master, slave = os.openpty()
    hits: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: hits.append(signum))
    try:
        watch = EscWatch(slave)
        watch.start()
        assert watch.active and not termios.tcgetattr(slave)[3] & termios.ECHO
        os.write(master, b"ab\x7fc\x1b[Ad\r")
        time.sleep(0.3)  # separate reads: the Esc below arrives alone
        assert hits == []
        os.write(master, b"\x1b")
        assert _wait(lambda: hits == [signal.SIGINT])
        watch.stop()
        assert watch.take_typed() == "acd\n" and watch.take_typed() == ""
        assert termios.tcgetattr(slave)[3] & termios.ECHO  # the terminal is as it was
    finally:
        signal.signal(signal.SIGINT, previous)
        os.close(master)
        os.close(slave)


def test_not_a_terminal_is_a_no_op(tmp_path) -> None:
    with open(tmp_path / "f", "w") as fh:
        watch = EscWatch(fh.fileno())
        watch.start()
        assert not watch.active
        watch.stop()
