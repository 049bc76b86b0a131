"""Harness overhead: median time per agent step with the model's time excluded (scripted model,
real repository, real tools), and `clover --help` wall time next to `python -c pass`.

    python benchmarks/agent_overhead.py [--steps 200]

Goals: <= 5 ms per step; `clover --help` <= 0.3 s over bare Python."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clover.agent import Agent
from clover.agent_run import Limits
from clover.backends.scripted import ScriptedModel
from clover.runner import build_gate
from clover.settings import Settings
from clover.tools.environment import LocalEnvironment
from clover.tools.registry import default_tools
from clover.trajectory import Trajectory


def make_repo(root: Path) -> None:
    for i in range(30):
        (root / f"mod{i}.py").write_text("".join(f"def f{j}(x):\n    return x + {j}\n\n" for j in range(40)))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init"], cwd=root, check=True
    )


def script(steps: int) -> list[dict]:
    """Alternate file-tool calls that do not spawn processes: view, str_replace back and forth."""
    turns = []
    for i in range(steps):
        mod = f"mod{i % 30}.py"
        if i % 3 == 0:
            call = {"name": "view", "arguments": {"path": mod, "view_range": [1, 40]}}
        elif i % 3 == 1:
            call = {
                "name": "str_replace",
                "arguments": {"path": mod, "old_str": "return x + 7\n", "new_str": "return x + 7  # seen\n"},
            }
        else:
            call = {
                "name": "str_replace",
                "arguments": {"path": mod, "old_str": "return x + 7  # seen\n", "new_str": "return x + 7\n"},
            }
        turns.append({"text": "", "tool_calls": [call]})
    turns.append({"text": "done"})
    return turns


def per_step_overhead(steps: int, checkpoints: bool) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        make_repo(root)
        settings = Settings(mode="yolo")
        env = LocalEnvironment(str(root))
        model = ScriptedModel(script(steps))
        durations: list[float] = []
        recorder = None
        if checkpoints:
            from clover.tools.undo.checkpoints import Checkpoints
            from clover.tools.undo.undorecorder import Recorder

            recorder = Recorder(Checkpoints(str(root), store=str(Path(tmp) / "ckpt")), "bench", "bench")
        agent = Agent(
            model,
            env,
            default_tools(),
            system_prompt="bench",
            limits=Limits(max_steps=steps + 5, token_limit=10**12),
            trajectory=Trajectory(Path(tmp) / "t.jsonl"),
            gate=build_gate(settings, root),
            recorder=recorder,
        )
        agent.messages.append({"role": "user", "content": "bench"})
        agent._reset_counters()
        for _ in range(steps):
            model_before = agent.model_seconds
            start = time.perf_counter()
            agent.step()
            durations.append(time.perf_counter() - start - (agent.model_seconds - model_before))
        return durations


def wall(cmd: list[str], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    for checkpoints in (False, True):
        d = per_step_overhead(args.steps, checkpoints)
        label = "with checkpoints" if checkpoints else "no checkpoints"
        print(
            f"harness per step ({label}): median {statistics.median(d) * 1e3:.2f} ms, "
            f"p90 {sorted(d)[int(0.9 * len(d))] * 1e3:.2f} ms over {len(d)} steps"
        )
    bare = wall([sys.executable, "-c", "pass"])
    helped = wall([sys.executable, "-m", "clover_cli", "--help"])
    print(f"python -c pass: {bare:.3f} s; clover --help: {helped:.3f} s; difference {helped - bare:.3f} s")


if __name__ == "__main__":
    main()
