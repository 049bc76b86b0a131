"""Run Terminal-Bench task directories on this machine, without Docker, as Harbor would.

Each task gets its own container (container.py): the host's system under a throwaway overlay,
the task's paths as they are (/app stays /app), nothing of the host's own files. The Dockerfile's
steps run inside it (build.py), then the agent (or, with --oracle, solution/solve.sh), whose
every command and file access goes through the container. `tests/` and `solution/` are not in it
while the agent works: the solution is copied in only for the oracle, the tests only for the
verification, after the agent has finished. The container's state lives in the task's output
folder and is removed at the end (--keep leaves it). A task is skipped, with the reason, only
when its Dockerfile cannot be applied this way (multi-stage, ADD from a URL) or when this machine
cannot run containers (no root, no bwrap).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from clover.core.protocols import Model
from clover.evals.terminalbench.build import BuildError, build_image, tail
from clover.evals.terminalbench.container import TaskContainer, container_problem
from clover.evals.terminalbench.tasks import Task, resolve_env
from clover.evals.terminalbench.toolchain import PYTHON_DIR, install_uv, network_env, python_binds, uses_uv
from clover.settings import Settings

TASK_PROMPT = """You are Clover, solving a task in a Linux terminal. The working directory is {root}.
Use the tools to inspect files, run shell commands and edit files; check your work by running it.
Nothing is interactive: commands get no input. When the task is done, answer without a tool call,
in a line or two."""

ModelFactory = Callable[[Task], Model]


@dataclass
class TaskResult:
    id: str
    status: str  # passed | failed | skipped | error
    reward: float | None = None
    reason: str = ""
    seconds: float = 0.0
    agent_seconds: float = 0.0
    test_seconds: float = 0.0
    steps: int = 0
    tokens: int = 0
    exit_status: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


class Skip(Exception):
    """The task cannot run here; the message says why."""


def start_task(task: Task, state: Path, log: Path) -> tuple[TaskContainer, dict[str, str]]:
    """A running container with the task's image applied; returns it and its environment."""
    problem = container_problem()
    if problem:
        raise Skip(problem)
    if task.docker.unsupported:
        raise Skip("; ".join(dict.fromkeys(task.docker.unsupported)))
    binds = python_binds(state)
    box = TaskContainer(state, network=task.network, hide=(task.path, state.parent.parent), binds=binds)
    try:
        box.start()
        if uses_uv(task.tests_dir, task.context_dir, task.path / "solution"):
            install_uv(box.root)
        env = build_image(box, task.docker, task.context_dir, log=log, timeout=task.build_timeout,
                          workdir=task.docker.workdir, extra_path=f"{PYTHON_DIR}/bin" if binds else "",
                          base_env=network_env())
        env.update(resolve_env(task.env, f"{task.id}: [environment].env"))  # as a container's env: over the image's
        for path in ("/logs/agent", "/logs/verifier"):  # Harbor's output folders exist from the start
            box.host_path(path).mkdir(parents=True, exist_ok=True)
    except BaseException:
        box.remove()
        raise
    return box, env


def read_reward(task: Task, logs: Path, test_code: int) -> float | None:
    if task.format == "tb1":
        return 1.0 if test_code == 0 else 0.0
    text_path, json_path = logs / "verifier" / "reward.txt", logs / "verifier" / "reward.json"
    try:
        if text_path.is_file():
            return float(text_path.read_text().strip())
        if json_path.is_file():
            data = json.loads(json_path.read_text())
            if not isinstance(data, dict):
                return float(data)
            if "reward" in data:
                return float(data["reward"])
            values = [float(v) for v in data.values()]
            return sum(values) / len(values)
    except (ValueError, TypeError, ZeroDivisionError, json.JSONDecodeError):
        return None
    return None


def run_task(
    task: Task,
    *,
    settings: Settings,
    model_factory: ModelFactory | None,
    out_dir: Path,
    keep: bool = False,
) -> TaskResult:
    """One task end to end: container, agent (or oracle when model_factory is None), tests, reward."""
    start = time.monotonic()
    result = TaskResult(task.id, "error")
    task_out = out_dir / task.id
    task_out.mkdir(parents=True, exist_ok=True)
    box: TaskContainer | None = None
    try:
        box, env = start_task(task, task_out / "container", task_out / "build.log")
        workdir = task.docker.workdir
        agent_start = time.monotonic()
        if model_factory is None:
            if task.solution_script is None:
                raise Skip("no solution script for --oracle")
            box.put(task.solution_script.parent if task.format == "harbor" else task.solution_script,
                    "/solution" if task.format == "harbor" else f"/solution/{task.solution_script.name}")
            box.exec(f"bash /solution/{task.solution_script.name}", cwd=workdir,
                     env={**env, **resolve_env(task.solution_env, f"{task.id}: [solution].env")},
                     timeout=task.agent_timeout, log=task_out / "oracle.log")
            result.exit_status = "oracle"
        else:
            _run_agent(task, box, env, settings, model_factory(task), task_out, result)
        result.agent_seconds = time.monotonic() - agent_start
        test_start = time.monotonic()
        code, timed_out = verify(task, box, env, task_out)
        result.test_seconds = time.monotonic() - test_start
        logs = box.host_path("/logs")
        shutil.copytree(logs, task_out / "logs", dirs_exist_ok=True)
        result.reward = read_reward(task, logs, code)
        if result.reward is None:
            result.status, result.reason = "failed", "the tests wrote no reward" + (" (timed out)" if timed_out else "")
        else:
            result.status = "passed" if result.reward >= 1.0 else "failed"
    except Skip as exc:
        result.status, result.reason = "skipped", str(exc)
    except BuildError as exc:
        result.status, result.reason = "error", f"environment build failed: {exc}"
    except Exception as exc:  # one task's failure must not stop the batch
        result.status, result.reason = "error", f"{type(exc).__name__}: {exc}"
    finally:
        if box is not None:
            box.stop()
            if not keep:
                shutil.rmtree(box.state, ignore_errors=True)
    result.seconds = time.monotonic() - start
    return result


def verify(task: Task, box: TaskContainer, env: dict[str, str], task_out: Path) -> tuple[int, bool]:
    """Copy the tests in (only now) and run them from the workdir; returns (status, timed out)."""
    if task.tests_dir.is_dir():
        box.put(task.tests_dir, "/tests")
    if task.format == "tb1":  # run-tests.sh sits beside the tests folder
        box.put(task.test_script, f"/tests/{task.test_script.name}")
    log = box.host_path("/logs/verifier/test-stdout.txt")
    code, out, timed_out = box.exec(f"bash /tests/{task.test_script.name}", cwd=task.docker.workdir,
                                    env={**env, **resolve_env(task.verifier_env, f"{task.id}: [verifier].env"),
                                         "TEST_DIR": "/tests"}, timeout=task.test_timeout, log=log)
    if code != 0 and task.format == "harbor" and not (box.host_path("/logs/verifier") / "reward.txt").exists():
        (task_out / "verifier-error.txt").write_text(tail(out, 40) + "\n", encoding="utf-8")
    return code, timed_out


def _run_agent(task: Task, box: TaskContainer, env: dict[str, str], settings: Settings, model: Model,
               task_out: Path, result: TaskResult) -> None:
    from clover.evals.terminalbench.container_env import ContainerEnvironment
    from clover.runner import build_agent

    workdir = task.docker.workdir
    environment = ContainerEnvironment(box, root=workdir, env=env, timeout=settings.command_timeout,
                                       output_limit=settings.output_limit)
    settings = dataclasses.replace(settings, time_limit=min(settings.time_limit, task.agent_timeout))
    agent = build_agent(settings, environment, model=model, prompt=TASK_PROMPT.format(root=workdir),
                        trajectory_path=task_out / "trajectory.jsonl")
    try:
        run = agent.run(task.instruction)
    finally:
        if agent.trajectory is not None:
            agent.trajectory.close()
    result.steps, result.tokens, result.exit_status = run.steps, run.tokens, run.exit_status
    if run.error:
        result.reason = run.error


def run_tasks(
    tasks: list[Task],
    *,
    settings: Settings,
    model_factory: ModelFactory | None,
    out_dir: Path,
    workers: int = 1,
    keep: bool = False,
    on_start: Callable[[Task], None] | None = None,
    on_done: Callable[[TaskResult], None] | None = None,
) -> list[TaskResult]:
    """Every task, `workers` at a time; results in the order of `tasks`, also in results.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()

    def one(task: Task) -> TaskResult:
        if on_start:
            with lock:
                on_start(task)
        result = run_task(task, settings=settings, model_factory=model_factory, out_dir=out_dir, keep=keep)
        if on_done:
            with lock:
                on_done(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(one, tasks))
    summary = summarize(results)
    (out_dir / "results.json").write_text(
        json.dumps({"summary": summary, "tasks": [dataclasses.asdict(r) for r in results]}, indent=2)
    )
    return results


def summarize(results: list[TaskResult]) -> dict[str, float | int]:
    ran = [r for r in results if r.status != "skipped"]
    passed = sum(r.passed for r in ran)
    return {
        "tasks": len(results),
        "ran": len(ran),
        "passed": passed,
        "skipped": len(results) - len(ran),
        "errors": sum(r.status == "error" for r in ran),
        "pass_rate": passed / len(ran) if ran else 0.0,
        "seconds": round(sum(r.seconds for r in results), 3),
        "steps": sum(r.steps for r in results),
        "tokens": sum(r.tokens for r in results),
    }
