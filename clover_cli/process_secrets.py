"""Clover's own secrets (API keys) out of reach of the programs the agent runs, by any route.

Commands never get them in their environment (tools/safety/commandenv.py: an allowlist). But the
process that started Clover handed them over in its environment block or on its command line
(`--api-key`), and those stay in Clover's memory, where `/proc/<clover>/environ` and `cmdline`
show them to any process of the same user. So, once the settings are read:

- every occurrence of a secret in Clover's original environment block and argument area is
  overwritten in place (through /proc/self/mem), so those files no longer hold it;
- Clover makes itself non-dumpable: /proc/<clover>/environ, mem and the rest are then readable
  by root only, and no process of the user can attach to it (the commands it starts are
  dumpable again from their own exec on);
- behind the sandbox or the step boundary, the commands run in their own PID namespace: Clover's
  process is not in their /proc at all.

Elsewhere than Linux this does nothing (there is no /proc to read it from there either).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys

from clover.tools.safety.redact import is_secret_env

PR_SET_DUMPABLE = 4


def hide_from_children(secrets: list[str]) -> None:
    if sys.platform != "linux":
        return
    values = [s.encode() for s in secrets if s and len(s) >= 8]
    values += [v.encode() for k, v in os.environ.items() if is_secret_env(k) and len(v) >= 8]
    if values:
        with contextlib.suppress(OSError, ValueError):
            _scrub(values)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _areas() -> list[tuple[int, int]]:
    """(start, end) of the argument and environment areas (fields 48-51 of /proc/self/stat)."""
    with open("/proc/self/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    # fields after the command name start at field 3; arg_start is field 48
    numbers = [int(x) for x in fields[45:49]]
    return [(numbers[0], numbers[1]), (numbers[2], numbers[3])]


def _scrub(values: list[bytes]) -> None:
    with open("/proc/self/mem", "r+b", buffering=0) as mem:
        for start, end in _areas():
            if not 0 < start < end:
                continue
            mem.seek(start)
            block = mem.read(end - start)
            cleaned = block
            for value in values:
                cleaned = cleaned.replace(value, b"*" * len(value))
            if cleaned != block:
                mem.seek(start)
                mem.write(cleaned)


__all__ = ["hide_from_children"]
