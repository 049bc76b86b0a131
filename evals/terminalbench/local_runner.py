"""Run Terminal-Bench task directories on this machine, without Docker, as Harbor would.

Each task gets its own container (container.py): the root of its FROM image (images.py) under a
throwaway overlay, its own network namespace, the task's paths as they are (/app stays /app). The
Dockerfile's steps run inside it (launch.py, build.py), then the agent (or, with --oracle,
solution/solve.sh), whose every command and file access goes through the container. `tests/` and
`solution/` are not in it while the agent works: the solution is copied in only for the oracle, the
tests only for the verification, after the agent has finished. /logs/agent, /logs/verifier and
/logs/artifacts are the task's output folders mounted in (as Harbor mounts them). The container's
state lives in the task's output folder and is removed at the end (--keep leaves it).

Verdicts: passed, failed (with the cause); apart from them, never counted as either: error (the
environment could not be built, or the run broke), cannot-judge (a test could not run here to its
end: verdicts.py), needs-internet (it did not pass and looked up hosts this machine cannot resolve:
named), skipped (this machine cannot host it at all: no recipe for its image, no root, no bwrap).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from clover.core.model_protocol import Model
from clover.evals.terminalbench.build import tail
from clover.evals.terminalbench.container import TaskContainer, container_problem
from clover.evals.terminalbench.launch import CannotHost, Launch, LaunchError, before_phase, needed_hosts
from clover.evals.terminalbench.task_output import append, read_text
from clover.evals.terminalbench.tasks import Task, resolve_env
from clover.evals.terminalbench.verdicts import cannot_judge, summarize, writes_ctrf
from clover.settings import Settings

TASK_PROMPT = """You are Clover, solving a task in a Linux terminal. The working directory is {root}.
Use the tools to inspect files, run shell commands and edit files; check your work by running it.
Nothing is interactive: commands get no input. When the task is done, answer without a tool call,
in a line or two."""

ModelFactory = Callable[[Task], Model]


@dataclass
class TaskResult:
    id: str
    status: str  # passed | failed | error | cannot-judge | needs-internet | skipped
    reward: float | None = None
    reason: str = ""
    hosts: list[str] = field(default_factory=list)  # needs-internet: the hosts it could not reach
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


LOG_DIRS = ("agent", "verifier", "artifacts")  # /logs/<name>: mounted from the task's output folder


def start_task(
    task: Task, state: Path, log: Path, launch: Launch | None = None, logs: Path | None = None
) -> tuple[TaskContainer, dict[str, str]]:
    """A running container with the task's image built; returns it and its environment."""
    problem = container_problem()
    if problem:
        raise Skip(problem)
    if task.docker.unsupported:
        raise Skip("; ".join(dict.fromkeys(task.docker.unsupported)))
    writable = []
    if logs is not None:
        for name in LOG_DIRS:
            (logs / name).mkdir(parents=True, exist_ok=True)
            writable.append((logs / name, f"/logs/{name}"))
    task_env = resolve_env(task.env, f"{task.id}: [environment].env")
    try:
        box, env = (launch or Launch()).start(
            task.docker,
            task.context_dir,
            state=state,
            log=log,
            network=task.network,
            timeout=task.build_timeout,
            workdir=task.docker.workdir,
            hide=(task.path, state.parent.parent),
            writable=writable,
            uv_folders=(task.tests_dir, task.path / "solution"),
        )
    except CannotHost as exc:
        raise Skip(str(exc)) from None
    return box, {**env, **task_env}  # as a container's env: over the image's


def read_reward(task: Task, logs: Path, test_code: int) -> float | None:
    if task.format == "tb1":
        return 1.0 if test_code == 0 else 0.0
    text, data = read_text(logs / "verifier" / "reward.txt"), read_text(logs / "verifier" / "reward.json")
    try:
        if text is not None:
            return float(text.strip())
        if data is not None:
            parsed = json.loads(data)
            if not isinstance(parsed, dict):
                return float(parsed)
            if "reward" in parsed:
                return float(parsed["reward"])
            values = [float(v) for v in parsed.values()]
            return sum(values) / len(values)
    except (ValueError, TypeError, ZeroDivisionError, json.JSONDecodeError):
        return None
    return None


def _run_solution(task: Task, box: TaskContainer, env: dict[str, str], task_out: Path) -> bool:
    """The task's own solution (--oracle) in place of the agent; returns whether it timed out."""
    if task.solution_script is None:
        raise Skip("no solution script for --oracle")
    solution = task.solution_script.parent if task.format == "harbor" else task.solution_script
    before_phase(box, solution)
    box.put(solution, "/solution" if task.format == "harbor" else f"/solution/{task.solution_script.name}")
    _, _, timed_out = box.exec(
        f"bash /solution/{task.solution_script.name}",
        cwd=task.docker.workdir,
        env={**env, **resolve_env(task.solution_env, f"{task.id}: [solution].env")},
        timeout=task.agent_timeout,
        log=task_out / "oracle.log",
    )
    return timed_out


def _judge(
    task: Task,
    box: TaskContainer,
    env: dict[str, str],
    task_out: Path,
    result: TaskResult,
    solution_timed_out: bool,
) -> None:
    """Run the tests and set the result's reward, status and reason from them."""
    logs = task_out / "logs"
    test_start = time.monotonic()
    code, timed_out = verify(task, box, env, task_out, logs)
    result.test_seconds = time.monotonic() - test_start
    result.reward = read_reward(task, logs, code)
    if result.reward is None:
        result.status, result.reason = (
            "failed",
            "the tests wrote no reward" + (" (timed out)" if timed_out else ""),
        )
    else:
        result.status = "passed" if result.reward >= 1.0 else "failed"
        if not result.passed:
            result.reason = _failure_cause(task_out)
    why = cannot_judge(
        passed=result.passed,
        read=lambda name: read_text(logs / "verifier" / name),
        writes_ctrf=writes_ctrf(task.test_script),
        tests_timed_out=timed_out,
        test_timeout=task.test_timeout,
        solution_timed_out=solution_timed_out,
        solution_timeout=task.agent_timeout,
    )
    if why:  # the verdict would rest on less than the whole test
        result.status, result.reason = "cannot-judge", why


def run_task(
    task: Task,
    *,
    settings: Settings,
    model_factory: ModelFactory | None,
    out_dir: Path,
    keep: bool = False,
    launch: Launch | None = None,
) -> TaskResult:
    """One task end to end: container, agent (or oracle when model_factory is None), tests, reward."""
    start = time.monotonic()
    result = TaskResult(task.id, "error")
    task_out = out_dir / task.id
    task_out.mkdir(parents=True, exist_ok=True)
    logs = task_out / "logs"
    box: TaskContainer | None = None
    solution_timed_out = False
    try:
        box, env = start_task(task, task_out / "container", task_out / "build.log", launch, logs)
        agent_start = time.monotonic()
        if model_factory is None:
            solution_timed_out = _run_solution(task, box, env, task_out)
            result.exit_status = "oracle"
        else:
            _run_agent(task, box, env, settings, model_factory(task), task_out, result)
        result.agent_seconds = time.monotonic() - agent_start
        _judge(task, box, env, task_out, result, solution_timed_out)
    except Skip as exc:
        result.status, result.reason = "skipped", str(exc)
    except LaunchError as exc:
        result.status, result.reason = "error", f"environment build failed: {exc}"
        result.hosts = exc.unreachable
    except Exception as exc:  # one task's failure must not stop the batch
        result.status, result.reason = "error", f"{type(exc).__name__}: {exc}"
    finally:
        if box is not None:
            result.hosts = result.hosts or needed_hosts(box)
            if box.network_note and result.hosts:  # it asked for the internet and got none here
                result.reason = f"{result.reason}; {box.network_note}"
            box.stop()
            if (box.state / "dns.log").is_file():  # every name it looked up, and the outcome
                shutil.copy2(box.state / "dns.log", task_out / "dns.log")
            if not keep:
                box.remove()
    if result.status in ("failed", "error") and not result.hosts:
        _archive_drift(task, task_out, result)
    if result.status in ("failed", "error", "cannot-judge") and result.hosts:
        result.reason = f"needs the internet: {', '.join(result.hosts)} ({result.reason})"
        result.status = "needs-internet"
    result.seconds = time.monotonic() - start
    return result


_MISSING_VERSION = re.compile(r"^E: Version '([^']+)' for '([^']+)' was not found", re.MULTILINE)
REGISTRY = "registry-1.docker.io"


def _archive_drift(task: Task, task_out: Path, result: TaskResult) -> None:
    """A pinned package version the archive no longer has (apt: "Version 'V' for 'P' was not
    found"): a fresh build cannot satisfy it. Where the task names a prebuilt image (which Harbor
    pulls instead of building, and which has it installed), it needs that image: Docker Hub."""
    logs = [
        task_out / "build.log",
        task_out / "oracle.log",
        task_out / "logs" / "verifier" / "test-stdout.txt",
    ]
    pins = list(
        dict.fromkeys(f"{p}={v}" for log in logs for v, p in _MISSING_VERSION.findall(read_text(log) or ""))
    )
    if not pins:
        return
    gone = f"the archive no longer has {', '.join(pins)}"
    if task.prebuilt_image:
        result.hosts = [REGISTRY]
        result.reason = f"{gone}; the task's prebuilt image {task.prebuilt_image} has it: {result.reason}"
    else:
        result.reason = f"{gone}: {result.reason}"


def _failure_cause(task_out: Path) -> str:
    """The tests' last lines that say what failed (pytest's short summary), for the verdict."""
    for name in ("test-stdout.txt",):
        text = read_text(task_out / "logs" / "verifier" / name) or ""
        lines = [line for line in text.splitlines() if line.startswith(("FAILED ", "ERROR "))]
        if lines:
            return "; ".join(line[:160] for line in lines[:3])
    return "the tests failed"


def verify(
    task: Task, box: TaskContainer, env: dict[str, str], task_out: Path, logs: Path
) -> tuple[int, bool]:
    """Copy the tests in (only now) and run them from the workdir; returns (status, timed out)."""
    if task.tests_dir.is_dir():
        box.put(task.tests_dir, "/tests")
    if task.format == "tb1":  # run-tests.sh sits beside the tests folder
        box.put(task.test_script, f"/tests/{task.test_script.name}")
    before_phase(box, task.tests_dir, task.test_script)
    log = logs / "verifier" / "test-stdout.txt"
    code, out, timed_out = box.exec(
        f"bash /tests/{task.test_script.name}",
        cwd=task.docker.workdir,
        env={**env, **resolve_env(task.verifier_env, f"{task.id}: [verifier].env"), "TEST_DIR": "/tests"},
        timeout=task.test_timeout,
    )
    append(log, out)
    if code != 0 and task.format == "harbor" and read_text(logs / "verifier" / "reward.txt") is None:
        (task_out / "verifier-error.txt").write_text(tail(out, 40) + "\n", encoding="utf-8")
    return code, timed_out


def _run_agent(
    task: Task,
    box: TaskContainer,
    env: dict[str, str],
    settings: Settings,
    model: Model,
    task_out: Path,
    result: TaskResult,
) -> None:
    from clover.evals.terminalbench.container_env import ContainerEnvironment
    from clover.runner import build_agent

    workdir = task.docker.workdir
    environment = ContainerEnvironment(
        box, root=workdir, env=env, timeout=settings.command_timeout, output_limit=settings.output_limit
    )
    settings = dataclasses.replace(settings, time_limit=min(settings.time_limit, task.agent_timeout))
    agent = build_agent(
        settings,
        environment,
        model=model,
        prompt=TASK_PROMPT.format(root=workdir),
        trajectory_path=task_out / "trajectory.jsonl",
    )
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
    launch: Launch | None = None,
    timeout_multiplier: float = 1.0,
    on_start: Callable[[Task], None] | None = None,
    on_done: Callable[[TaskResult], None] | None = None,
) -> list[TaskResult]:
    """Every task, `workers` at a time; results in the order of `tasks`, also in results.json.
    `timeout_multiplier` scales each task's build, agent and verifier timeouts (Harbor's
    --timeout-multiplier: for a slower or shared machine)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()

    def one(task: Task) -> TaskResult:
        if on_start:
            with lock:
                on_start(task)
        if timeout_multiplier != 1.0:
            task = dataclasses.replace(
                task,
                build_timeout=task.build_timeout * timeout_multiplier,
                agent_timeout=task.agent_timeout * timeout_multiplier,
                test_timeout=task.test_timeout * timeout_multiplier,
            )
        result = run_task(
            task, settings=settings, model_factory=model_factory, out_dir=out_dir, keep=keep, launch=launch
        )
        if on_done:
            with lock:
                on_done(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(one, tasks))
    summary = summarize(results)
    (out_dir / "results.json").write_text(
        json.dumps(
            {
                "summary": summary,
                "timeout_multiplier": timeout_multiplier,
                "tasks": [dataclasses.asdict(r) for r in results],
            },
            indent=2,
        )
    )
    return results
