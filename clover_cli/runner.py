"""Assemble an agent from settings: model, environment, tools, permission gate, checkpoints.
`clover fix`, `clover chat`, the SWE-bench runner and the Terminal-Bench adapters all come here."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from clover.agent import Agent
from clover.agent_hooks import Gate, StepRecorder
from clover.agent_run import Limits, RunResult
from clover.core.environment_protocol import Environment
from clover.core.model_protocol import EventHandler, Model, ToolCall
from clover.core.tool_protocol import Tool, ToolResult
from clover.loop_guard import LoopGuard
from clover.prompts import system_prompt
from clover.settings import Settings
from clover.trajectory import Trajectory

if TYPE_CHECKING:
    from clover.tools.environment import LocalEnvironment
    from clover.tools.safety.permgate import PermissionGate


def build_model(settings: Settings) -> Model:
    from clover.backends import make_model

    return make_model(settings)


def build_environment(
    settings: Settings, root: str | Path, on_output: Callable[[str], None] | None = None
) -> LocalEnvironment:
    """Raises SandboxUnavailable (one line) when `sandbox = true` or `exec_check = true` is asked
    for and cannot work here. Unset, each is on wherever it works; where the exec check cannot
    work, one line on stderr says so (commands are then judged by the parser alone). `on_output`:
    a running command's output as it comes (the chat's tail under its spinner)."""
    from clover.tools.environment import LocalEnvironment
    from clover.tools.safety.execguard import ExecCheckUnavailable, ExecGuard, unavailable_reason
    from clover.tools.safety.permissions import PermissionPolicy
    from clover.tools.safety.sandbox import make_wrapper

    wrap = None
    if sandbox_on(settings):
        wrap = make_wrapper(
            str(root), writable=settings.add_dirs, network=settings.network, home_paths=settings.sandbox_home
        )
    check = settings.exec_check is not False and unavailable_reason() is None
    if settings.exec_check and not check:
        raise ExecCheckUnavailable(f"exec_check = true, but {unavailable_reason()}")
    if settings.exec_check is None and not check:
        _say_once(
            f"clover: the exec check is off ({unavailable_reason()}); commands are judged by their "
            "text alone, and any the parser cannot prove simple are asked about"
        )
    # deny rules hold for every command, also those no gate authorized (a user's `!cmd`)
    fallback = PermissionPolicy("yolo", deny=settings.deny, root=str(root))
    env = LocalEnvironment(
        str(root),
        allowed_roots=list(settings.add_dirs),
        timeout=settings.command_timeout,
        output_limit=settings.output_limit,
        wrap_command=wrap,
        exec_guard=ExecGuard(fallback, check=check),
        pass_env=settings.pass_env,
        boundary=build_boundary(settings, root, sandboxed=wrap is not None),
    )
    env.on_output = on_output
    return env


def build_boundary(settings: Settings, root: str | Path, sandboxed: bool):
    """The step boundary (tools/safety/boundary.py) wherever it works, unless `boundary = false`;
    `boundary = true` where it cannot work is an error (one line). Without bubblewrap around the
    commands it brings its own PID namespace, so nothing a command starts outlives it."""
    import os

    from clover.tools.safety.boundary import StepBoundary, available
    from clover.tools.safety.sandbox import SandboxUnavailable
    from clover.tools.statehome import private_dir

    if settings.boundary is False:
        return None
    base = private_dir("steps")
    works, why = available(base, [str(root), *settings.add_dirs])
    if not works:
        if settings.boundary:
            raise SandboxUnavailable(f"boundary = true, but {why}")
        return None
    return StepBoundary(
        [str(root), *settings.add_dirs], base, pid_namespace=not sandboxed, home=os.path.expanduser("~")
    )


def sandbox_on(settings: Settings) -> bool:
    """The sandbox is used when asked for, and by default wherever bubblewrap works."""
    from clover.tools.safety.sandbox import bwrap_available

    return bool(settings.sandbox or (settings.sandbox is None and bwrap_available()))


_SAID: set[str] = set()


def _say_once(line: str) -> None:
    import sys

    if line not in _SAID:
        _SAID.add(line)
        print(line, file=sys.stderr)


def build_gate(
    settings: Settings, root: str | Path, ask_user: Callable[[ToolCall, Tool, str], str] | None = None
) -> PermissionGate:
    from clover.tools.safety.permissions import PermissionGate, PermissionPolicy

    # plan mode runs commands proven read-only, in the read-only sandbox (none without it)
    policy = PermissionPolicy(
        settings.mode,
        allow=settings.allow,
        ask=settings.ask,
        deny=settings.deny,
        root=str(root),
        plan_commands=sandbox_on(settings),
        sandboxed=sandbox_on(settings),
    )
    return PermissionGate(policy, ask_user=ask_user)


def limits_from(settings: Settings) -> Limits:
    return Limits(
        max_steps=settings.max_steps, time_limit=settings.time_limit, token_limit=settings.token_limit
    )


def build_agent(
    settings: Settings,
    env: Environment,
    *,
    kind: str = "chat",
    model: Model | None = None,
    wrap_model: Callable[[LoopGuard], Model] | None = None,
    wrap_gate: Callable[[PermissionGate], Gate] | None = None,
    tools: list[Tool] | None = None,
    trajectory_path: str | Path | None = None,
    on_event: EventHandler | None = None,
    ask_user: Callable[[ToolCall, Tool, str], str] | None = None,
    before_step: Callable[[int], None] | None = None,
    on_tool_result: Callable[[ToolCall, ToolResult], None] | None = None,
    on_call_done: Callable[[ToolCall, ToolResult], None] | None = None,
    prompt: str | None = None,
    recorder: StepRecorder | None = None,
) -> Agent:
    """The agent for one kind of run, its model behind the loop guard (loop_guard.py) in every run.
    `wrap_model` puts the caller's layer around the guarded model (the chat's rendering, the
    headless runs' compaction), `wrap_gate` around the permission gate (the chat shows each call):
    both are given the agent's own parts, so nothing is swapped in after it is built."""
    from clover.tools.registry import default_tools

    model = model if model is not None else build_model(settings)
    redos = model.early_answer_redos
    guarded = LoopGuard(model)
    gate = build_gate(settings, env.root, ask_user)
    agent = Agent(
        wrap_model(guarded) if wrap_model is not None else guarded,
        env,
        tools if tools is not None else default_tools(),
        system_prompt=prompt
        if prompt is not None
        else system_prompt(env.root, kind, offer_no_change=not redos),
        # a fix's answers before any edit are redone where the model asks for it (its config.json)
        limits=dataclasses.replace(limits_from(settings), early_answer_redos=redos if kind == "fix" else 0),
        trajectory=Trajectory(trajectory_path) if trajectory_path else None,
        gate=wrap_gate(gate) if wrap_gate is not None else gate,
        on_event=on_event,
        before_step=before_step,
        on_tool_result=on_tool_result,
        on_call_done=on_call_done,
        recorder=recorder,
    )
    model.bind_workspace(env)  # a local decoder grounds paths and edits in this workspace's files
    if env.exec_guard is not None:  # the exec check follows the agent's current gate (chat's /mode swaps it)
        env.exec_guard.gate_of = lambda: agent.gate
    bind_boundary(env, agent, recorder)
    return agent


def bind_boundary(env: Environment, agent: Agent, recorder: StepRecorder | None) -> None:
    """The step boundary asks the agent's current gate about held changes (the user, or no one),
    records into the agent's recorder, and reports every settled step to the trajectory."""
    boundary = env.boundary
    if boundary is None:
        return
    boundary.approve = lambda held: agent.gate.approve_held(held) if agent.gate is not None else set()
    boundary.recorder = recorder

    def observe(report) -> None:
        agent.record_step(report.to_json())

    boundary.observe = observe


def checkpointer(settings: Settings, root: str | Path, label: str, session: str = "") -> StepRecorder | None:
    """The agent's recorder of what each step changes (for `clover undo`), in a session of its
    own (`fix-…`, `p-…`) unless one is named; None when checkpoints are off or unavailable."""
    if not settings.checkpoints:
        return None
    import sys

    from clover.tools.undo.checkpoints import Checkpoints, SnapshotError
    from clover.tools.undo.undorecorder import Recorder

    # A step that cannot be recorded does not stop the run: it goes ahead unprotected and one line
    # says so (the fault is in Clover's own store, e.g. a full disk; the user's files are
    # untouched, and refusing every step would end the run for it).
    try:
        recorder = Recorder(Checkpoints(str(root)), session or time.strftime("run-%Y%m%d-%H%M%S"), label)
    except (SnapshotError, OSError) as exc:
        print(f"clover: warning: checkpoints unavailable ({exc}); this run cannot be undone", file=sys.stderr)
        return None
    return _Warned(recorder)


class _Warned:
    """A recorder whose failures are one warning line on stderr each (the step goes ahead). What
    the step boundary hands over (`capture`, `commit`) goes to the recorder as it is."""

    def __init__(self, inner: StepRecorder) -> None:
        self.inner = inner
        self.capture, self.commit = inner.capture, inner.commit

    def begin(self, step: int) -> None:
        self._call(self.inner.begin, step)

    def end(self, step: int) -> None:
        self._call(self.inner.end, step)

    @staticmethod
    def _call(hook: Callable[[int], None], step: int) -> None:
        import sys

        from clover.tools.undo.checkpoints import SnapshotError

        try:
            hook(step)
        except (SnapshotError, OSError) as exc:
            print(
                f"clover: warning: recording step {step} failed ({exc}); that step cannot be undone",
                file=sys.stderr,
            )


def run_agent(
    task: str,
    *,
    settings: Settings,
    env: Environment,
    model: Model | None = None,
    kind: str = "fix",
    trajectory_path: str | Path | None = None,
    on_event: EventHandler | None = None,
    before_step: Callable[[int], None] | None = None,
    on_call_done: Callable[[ToolCall, ToolResult], None] | None = None,
    recorder: StepRecorder | None = None,
) -> RunResult:
    """Run the agent once, headless (permission prompts become refusals)."""
    agent = build_agent(
        settings,
        env,
        kind=kind,
        model=model,
        trajectory_path=trajectory_path,
        on_event=on_event,
        before_step=before_step,
        on_call_done=on_call_done,
        recorder=recorder,
    )
    try:
        return agent.run(task)
    finally:
        if agent.trajectory is not None:
            agent.trajectory.close()
