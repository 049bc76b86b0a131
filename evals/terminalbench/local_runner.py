"""Run Terminal-Bench task directories on this machine, without Docker.

Each task gets a temporary directory: `workdir/` stands for the Dockerfile's WORKDIR (the cwd of
every step, of the agent, of the solution and of the tests), `tests/`, `solution/` and `logs/`
for /tests, /solution and /logs. Those container paths are rewritten in the instruction and in
our copies of the Dockerfile's RUN steps and of the test and solution files; the scripts also see
TEST_DIR (Terminal-Bench 1's convention), TESTS_DIR, SOLUTION_DIR, LOGS_DIR and TASK_WORKDIR.
Tasks that need more than that are skipped with the reason (see tasks.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from clover.core.protocols import Model
from clover.evals.terminalbench.tasks import Task, map_paths, mapping_problem, sandbox_paths
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


@dataclass
class Workspace:
    base: Path
    workdir: Path
    mapping: dict[str, str]
    env: dict[str, str]
    instruction: str
    test_script: Path
    solution_script: Path | None


class Skip(Exception):
    """The task cannot run without its container; the message says why."""


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: float, log: Path) -> tuple[int, bool]:
    """Run in a new process group (a timeout kills every descendant); output goes to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            return proc.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return -9, True


def _map_tree(src: Path, dest: Path, mapping: dict[str, str], what: str) -> list[str]:
    """Copy `src` to `dest`, mapping container paths in text files; returns the problems found."""
    problems = []
    shutil.copytree(src, dest, dirs_exist_ok=True)
    for path in sorted(p for p in dest.rglob("*") if p.is_file() and not p.is_symlink()):
        if path.stat().st_size > 1_000_000:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        mapped = map_paths(text, mapping)
        if mapped != text:
            path.write_text(mapped, encoding="utf-8")
        problem = mapping_problem(mapped, mapping, f"{what}/{path.relative_to(dest)}")
        if problem and path.suffix in ("", ".sh", ".py", ".bash"):
            problems.append(problem)
    return problems


def prepare(task: Task, base: Path) -> Workspace:
    """Lay out and build the task's directory; raises Skip when it needs its container."""
    if task.docker.unsupported:
        raise Skip("; ".join(dict.fromkeys(task.docker.unsupported)))
    base = base.resolve()
    workdir = base / "workdir"
    host = {"/tests": base / "tests", "/solution": base / "solution", "/logs": base / "logs",
            "/logs/verifier": base / "logs" / "verifier", "/logs/agent": base / "logs" / "agent"}
    mapping = {p: str(host.get(p, workdir)) for p in sandbox_paths(task)}
    for path in (workdir, *host.values()):
        path.mkdir(parents=True, exist_ok=True)
    instruction = map_paths(task.instruction, mapping)
    problem = mapping_problem(instruction, mapping, "the instruction")
    if problem:
        raise Skip(problem)
    problems = _map_tree(task.tests_dir, host["/tests"], mapping, "tests") if task.tests_dir.is_dir() else []
    test_script = host["/tests"] / task.test_script.name
    if task.format == "tb1":  # run-tests.sh sits beside the tests directory
        text = map_paths(task.test_script.read_text(encoding="utf-8"), mapping)
        test_script.write_text(text, encoding="utf-8")
        problems += [p for p in [mapping_problem(text, mapping, "run-tests.sh")] if p]
    solution = None
    if task.solution_script is not None:
        if task.format == "harbor":
            problems += _map_tree(task.solution_script.parent, host["/solution"], mapping, "solution")
        else:
            text = map_paths(task.solution_script.read_text(encoding="utf-8"), mapping)
            (host["/solution"] / task.solution_script.name).write_text(text, encoding="utf-8")
        solution = host["/solution"] / task.solution_script.name
    if problems:
        raise Skip(problems[0])
    env = dict(os.environ)
    env.update({k: map_paths(v, mapping) for k, v in task.docker.env.items()})
    env.update(TEST_DIR=str(host["/tests"]), TESTS_DIR=str(host["/tests"]), SOLUTION_DIR=str(host["/solution"]),
               LOGS_DIR=str(host["/logs"]), TASK_WORKDIR=str(workdir))
    _build(task, workdir, mapping, env, base / "logs" / "build.log")
    return Workspace(base, workdir, mapping, env, instruction, test_script, solution)


def _build(task: Task, workdir: Path, mapping: dict[str, str], env: dict[str, str], log: Path) -> None:
    for kind, arg in task.docker.steps:
        if kind == "copy":
            src_name, dest_name = arg.split("\0")
            src = (task.context_dir / src_name).resolve()
            if not src.exists() or task.context_dir.resolve() not in (src, *src.parents):
                raise Skip(f"COPY source {src_name} is not in the build context")
            dest = Path(map_paths(dest_name, mapping)) if dest_name.startswith("/") else workdir / dest_name
            if not str(dest.resolve()).startswith(str(workdir.parent)):
                raise Skip(f"COPY to the root path {dest_name}")
            if src.is_dir():
                shutil.copytree(src, dest, dirs_exist_ok=True)
            else:
                if dest_name.endswith("/") or dest.is_dir():
                    dest = dest / src.name
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)
        else:
            command = map_paths(arg, mapping)
            problem = mapping_problem(command, mapping, "a Dockerfile RUN step")
            if problem:
                raise Skip(problem)
            code, timed_out = _run(["bash", "-c", command], workdir, env, 600, log)
            if code != 0:
                raise RuntimeError(f"environment build failed: RUN {arg[:80]} exited with {code}")


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
    """One task end to end: prepare, agent (or oracle when model_factory is None), tests, reward."""
    start = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix=f"clover-tb-{task.id}-"))
    result = TaskResult(task.id, "error")
    task_out = out_dir / task.id
    task_out.mkdir(parents=True, exist_ok=True)
    try:
        ws = prepare(task, base)
        agent_start = time.monotonic()
        if model_factory is None:
            if ws.solution_script is None:
                raise Skip("no solution script for --oracle")
            _run(["bash", str(ws.solution_script)], ws.workdir, ws.env, task.agent_timeout, task_out / "oracle.log")
            result.exit_status = "oracle"
        else:
            _run_agent(task, ws, settings, model_factory(task), task_out, result)
        result.agent_seconds = time.monotonic() - agent_start
        test_start = time.monotonic()
        code, timed_out = _run(["bash", str(ws.test_script)], ws.workdir, ws.env, task.test_timeout,
                               base / "logs" / "verifier" / "test-stdout.txt")
        result.test_seconds = time.monotonic() - test_start
        shutil.copytree(base / "logs", task_out / "logs", dirs_exist_ok=True)
        result.reward = read_reward(task, base / "logs", code)
        if result.reward is None:
            result.status, result.reason = "failed", "the tests wrote no reward" + (" (timed out)" if timed_out else "")
        else:
            result.status = "passed" if result.reward >= 1.0 else "failed"
    except Skip as exc:
        result.status, result.reason = "skipped", str(exc)
    except Exception as exc:  # one task's failure must not stop the batch
        result.status, result.reason = "error", f"{type(exc).__name__}: {exc}"
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    result.seconds = time.monotonic() - start
    return result


def _run_agent(task: Task, ws: Workspace, settings: Settings, model: Model, task_out: Path, result: TaskResult) -> None:
    from clover.runner import build_agent
    from clover.tools.environment import LocalEnvironment

    env = LocalEnvironment(str(ws.workdir), timeout=settings.command_timeout, output_limit=settings.output_limit,
                           env=ws.env)
    settings = dataclasses.replace(settings, time_limit=min(settings.time_limit, task.agent_timeout))
    agent = build_agent(settings, env, model=model, prompt=TASK_PROMPT.format(root=ws.workdir),
                        trajectory_path=task_out / "trajectory.jsonl")
    try:
        run = agent.run(ws.instruction)
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
