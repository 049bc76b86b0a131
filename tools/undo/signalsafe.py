"""Hold Ctrl-C, SIGTERM and SIGHUP while a record is half-written.

An undo writes several files and then the journal that says they were written; a step's record is
a scan, a diff and a journal write. A signal in between leaves the files and the record telling
different stories. `held_signals()` keeps the signals that end a run pending for the duration and
delivers them afterwards, to the handlers that were there before, so the program still stops, just
not in the middle. Only the main thread can change signal handlers; elsewhere (and for a signal
that was being ignored) nothing changes.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous: dict[int, object] = {}
    for signum in HELD:
        handler = signal.getsignal(signum)
        if handler is signal.SIG_IGN or handler is None:  # ignored (a background job), or not Python's
            continue
        previous[signum] = handler
        signal.signal(signum, lambda n, _frame: caught.append(n))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        for signum in sorted(set(caught), key=lambda n: n == signal.SIGINT):  # SIGTERM/SIGHUP first
            signal.raise_signal(signum)  # now: the handler it had runs (raises, or ends the process)
