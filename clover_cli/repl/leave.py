"""Ending the chat's process. With a local model loaded, the interpreter's own teardown is what made
Ctrl-D slow (1-3 s): its final garbage collections walk the ~300,000 objects torch and its imports
(dynamo, sympy, triton) leave tracked, only to hand memory back that the OS takes back anyway. So
once the chat is done (session written, output flushed) the exit handlers run and the process ends
without that teardown; without torch loaded the exit is the ordinary one."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from typing import NoReturn


def leave(code: int) -> NoReturn:
    if "torch" not in sys.modules:
        raise SystemExit(code)
    atexit._run_exitfuncs()  # e.g. the environment's spill folder is removed, as at a normal exit
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say there
            stream.flush()
    os._exit(code)
