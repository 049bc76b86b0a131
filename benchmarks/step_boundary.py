"""Per-step cost of the step boundary beside the step as it was, side by side in one process.

Before: the command runs in the sandbox (bubblewrap, where installed) straight on the workspace,
and the undo recorder scans the whole tree before and after it. After: the command runs behind
the step boundary (an overlay over the workspace; its upper layer read, decided and applied
when it ends) and the recorder scans once before it, taking the step's changes exactly from the
boundary. Both on a copy of this repository's tracked files, with the exec check on as in a
chat; the two alternate step by step (ABAB... then BABA...), after a warm-up, and each step's
time is the wall time of recorder.begin + env.execute + recorder.end.

Commands: `true` (nothing changed), an edit of one file, a small build (10 new files in a new
directory), `git status` (reads the index, may rewrite it).

    python -m benchmarks.step_boundary [--repeats 12]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.undo_record import copy_of_this_repo
from clover.tools.environment import LocalEnvironment
from clover.tools.safety.boundary import StepBoundary
from clover.tools.safety.execguard import ExecGuard, exec_check_available
from clover.tools.safety.sandbox import Sandbox, bwrap_available
from clover.tools.undo.checkpoints import Checkpoints
from clover.tools.undo.undorecorder import Recorder

COMMANDS = {
    "true": "true",
    "edit one file": "echo '# edited' >> README.md",
    "make 10 files": "mkdir -p build/out && for i in 0 1 2 3 4 5 6 7 8 9; do echo $i > build/out/f$i.txt; done",
    "git status": "git status --short >/dev/null",
}


def _setup(tmp: Path, name: str, boundary: bool) -> tuple[LocalEnvironment, Recorder]:
    root = tmp / name / "ws"
    root.mkdir(parents=True)
    copy_of_this_repo(root)
    import subprocess

    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "i"],
    ):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    sandbox = Sandbox(str(root)) if bwrap_available() else None
    step = (
        StepBoundary([str(root)], str(tmp / name / "steps"), pid_namespace=sandbox is None)
        if boundary
        else None
    )
    env = LocalEnvironment(
        str(root), wrap_command=sandbox, exec_guard=ExecGuard(check=exec_check_available()), boundary=step
    )
    recorder = Recorder(Checkpoints(str(root), store=str(tmp / name / "store")), name, "bench")
    if step is not None:
        step.recorder = recorder
    return env, recorder


def _one(env: LocalEnvironment, recorder: Recorder, command: str, n: int) -> float:
    start = time.perf_counter()
    recorder.begin(n)
    result = env.execute(command)
    recorder.end(n)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{command}: exit {result.returncode}: {result.output[-300:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=12)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="clover-bench-boundary-") as tmp:
        before = _setup(Path(tmp), "before", boundary=False)
        after = _setup(Path(tmp), "after", boundary=True)
        print(
            f"sandbox: {'bubblewrap' if bwrap_available() else 'none'}; exec check: {exec_check_available()}"
        )
        print(f"{'command':16} {'before ms':>18} {'after ms':>18} {'after/before':>14}")
        n = 0
        for label, command in COMMANDS.items():
            times: dict[str, list[float]] = {"before": [], "after": []}
            for warm in (before, after):
                n += 1
                _one(*warm, command, n)
            for i in range(args.repeats):
                order = [("before", before), ("after", after)]
                for name, (env, rec) in order if i % 2 == 0 else reversed(order):
                    n += 1
                    times[name].append(_one(env, rec, command, n))
            b, a = (statistics.median(times[k]) * 1000 for k in ("before", "after"))
            spread = {k: (min(v) * 1000, max(v) * 1000) for k, v in times.items()}
            ratios = sorted(x / y for x, y in zip(times["after"], times["before"], strict=True))
            print(
                f"{label:16} {b:7.1f} ({spread['before'][0]:.0f}-{spread['before'][1]:.0f}) "
                f"{a:7.1f} ({spread['after'][0]:.0f}-{spread['after'][1]:.0f}) "
                f"{a / b:6.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f})"
            )


if __name__ == "__main__":
    main()
