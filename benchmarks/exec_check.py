"""What the exec check costs: per command and per program start, side by side with the same
environment without it, with and without the sandbox, in one process.

    python benchmarks/exec_check.py [--commands 20] [--execs 200] [--rounds 3]

Per command: `true` run through LocalEnvironment.execute (the bash session, the sandbox when on,
the launcher and supervisor when the check is on). Per exec: a command starting `--execs` programs
(`/bin/true` in a loop), minus the per-command time, divided by the number of starts. Deny rules
are set (`rm -rf *`, `git push*`), so every start is identified and matched. Medians of `--rounds`.
Also the supervisor's own time per decision (median), which a loaded machine inflates least.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from clover.tools.environment import LocalEnvironment
from clover.tools.safety.execguard import ExecGuard, ExecSession, unavailable_reason
from clover.tools.safety.permissions import PermissionPolicy
from clover.tools.safety.sandbox import Sandbox, bwrap_available

DENY = ["bash(rm -rf *)", "bash(git push*)"]


def environment(root: str, sandbox: bool, check: bool) -> LocalEnvironment:
    guard = ExecGuard(PermissionPolicy("yolo", deny=DENY), check=True) if check else None
    return LocalEnvironment(root, wrap_command=Sandbox(root) if sandbox else None, exec_guard=guard)


def timed(env: LocalEnvironment, command: str, n: int) -> float:
    env.execute("true")  # warm: the sandbox's session directories, caches
    start = time.perf_counter()
    for _ in range(n):
        result = env.execute(command)
        assert result.returncode == 0, result.output
    return (time.perf_counter() - start) / n


DECISIONS: list[float] = []


def _timed_decisions() -> None:
    """Record how long the supervisor thread spends on each program start (this script only)."""
    decide = ExecSession._decide

    def timed(self, *args):
        start = time.perf_counter()
        try:
            return decide(self, *args)
        finally:
            DECISIONS.append(time.perf_counter() - start)

    ExecSession._decide = timed  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commands", type=int, default=20, help="commands timed per round")
    ap.add_argument("--execs", type=int, default=200, help="program starts in the per-exec command")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if why := unavailable_reason():
        raise SystemExit(f"the exec check cannot run here: {why}")
    _timed_decisions()
    loop = f"for i in $(seq {args.execs}); do /bin/true; done"
    sandboxes = [False, True] if bwrap_available() else [False]
    print(f"{'setup':<26}{'per command':>14}{'per exec':>12}")
    rows: dict[tuple[bool, bool], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as root:
        for sandbox in sandboxes:
            for check in (False, True):
                env = environment(root, sandbox, check)
                per_command, per_loop = [], []
                for _ in range(args.rounds):
                    per_command.append(timed(env, "true", args.commands))
                    per_loop.append(timed(env, loop, max(2, args.commands // 10)))
                cmd = statistics.median(per_command)
                per_exec = (statistics.median(per_loop) - cmd) / args.execs
                rows[(sandbox, check)] = (cmd, per_exec)
                name = ("sandbox" if sandbox else "no sandbox") + (" + exec check" if check else "")
                print(f"{name:<26}{cmd * 1000:>11.1f} ms{per_exec * 1e6:>9.0f} us")
    print()
    if DECISIONS:
        print(
            f"supervisor time per program start: median {statistics.median(DECISIONS) * 1e6:.0f} us "
            f"over {len(DECISIONS)} starts"
        )
    for sandbox in sandboxes:
        (base_cmd, base_exec), (cmd, per_exec) = rows[(sandbox, False)], rows[(sandbox, True)]
        where = "in the sandbox" if sandbox else "without the sandbox"
        print(
            f"exec check {where}: {cmd / base_cmd:.2f}x per command (+{(cmd - base_cmd) * 1000:.1f} ms), "
            f"{per_exec / base_exec:.2f}x per exec (+{(per_exec - base_exec) * 1e6:.0f} us)"
        )


if __name__ == "__main__":
    main()
