"""Signals of the batch runner's worker processes (runner.py): SIGTERM and Ctrl-C interrupt an
instance once, so it records "interrupted" and cleans up; a worker whose parent died stops; a pool
being stopped gets STOP_GRACE seconds before its workers are killed, so none outlives the run."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

# Seconds workers get to record "interrupted" and clean up after SIGTERM/Ctrl-C before SIGKILL.
STOP_GRACE = 30.0


def worker_signals() -> None:
    """In each worker: SIGTERM acts like Ctrl-C (the agent records "interrupted", finally blocks
    clean up) instead of killing the process mid-write; after the first of either signal both are
    ignored, so Ctrl-C followed by the parent's SIGTERM does not cut the clean-up short."""
    signal.signal(signal.SIGTERM, _interrupt_once)
    signal.signal(signal.SIGINT, _interrupt_once)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """A worker whose parent died (even by SIGKILL) interrupts its instance and exits: no orphan."""
    while os.getppid() == parent:
        time.sleep(1.0)
    with contextlib.suppress(OSError):
        os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(STOP_GRACE)
    os._exit(1)


def _interrupt_once(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def sigterm_interrupts() -> Callable[[], None]:
    """SIGTERM on the main process raises KeyboardInterrupt (so `kill PID` stops the workers too);
    returns the function that restores the previous handler. Only the main thread can do this."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    return lambda: signal.signal(signal.SIGTERM, previous)


def stop_workers(pool: ProcessPoolExecutor) -> None:
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for proc in processes:
        with contextlib.suppress(OSError, ValueError):
            proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)  # idle workers exit once their instance is recorded
    deadline = time.monotonic() + STOP_GRACE
    for proc in processes:
        with contextlib.suppress(OSError, ValueError):
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(5)
    pool.shutdown(wait=True, cancel_futures=True)
