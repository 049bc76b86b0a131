"""SIGTERM and SIGHUP stop Clover the way Ctrl-C does.

Left to their default action they killed the process at once: no json result, no record of the
step under way (so `clover undo` could not revert it), and the agent's command, in a process group
of its own, went on running. `stop_on_termination()` makes them raise core's `Terminated`, a
KeyboardInterrupt, so every place that cleans up after Ctrl-C does the same for them; the exit
code is then 128 + the signal (143, 129). A signal the caller set to be ignored (`nohup`) stays
ignored.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

from clover.core.stops import Terminated

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
# a run's exit status (core's Terminated.exit_status) -> the process's exit code
STATUS_CODES = {"terminated": 128 + signal.SIGTERM, "hung_up": 128 + signal.SIGHUP}


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Terminated(signum)


def stop_on_termination() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _raise)


def exit_code(exc: KeyboardInterrupt) -> int:
    """130 for Ctrl-C, 128 + the signal for SIGTERM / SIGHUP."""
    return 128 + exc.signum if isinstance(exc, Terminated) else 130
