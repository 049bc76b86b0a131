"""Leaving the chat with the embedded model loaded: the seconds from "the chat is done" to the process
being gone, for the ordinary interpreter exit (what Ctrl-D did before: 2.9 s in one run) next to the
chat's `leave()` (exit handlers, then no teardown), each in a fresh process that loaded the model
and decoded one reply, as the chat has by then.

    python benchmarks/chat_exit.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CHILD = """
import sys, time
from clover.runner import build_model
from clover.settings import Settings
model = build_model(Settings(model="embedded"))
model.complete([{"role": "user", "content": "hi"}], [], None)
print(time.time(), flush=True)
if sys.argv[1] == "leave":
    from clover.repl.leave import leave
    leave(0)
raise SystemExit(0)
"""


def exit_seconds(how: str) -> float:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, how], stdout=subprocess.PIPE, text=True)
    done = float(proc.stdout.readline())
    proc.wait()
    return time.time() - done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results = {how: [exit_seconds(how) for _ in range(args.runs)] for how in ("interpreter", "leave")}
    for how, seconds in results.items():
        print(
            f"{how:>12}: median {statistics.median(seconds):.3f} s  ({', '.join(f'{s:.3f}' for s in seconds)})"
        )
    ratio = statistics.median(results["interpreter"]) / max(statistics.median(results["leave"]), 1e-6)
    print(f"leave() exits {ratio:.1f}x faster than the interpreter's own teardown")


if __name__ == "__main__":
    main()
