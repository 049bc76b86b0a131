"""Clover as a Harbor agent: the agent loop runs on the host, its tools inside the task's sandbox.

    harbor run -d terminal-bench@2.0 -a clover.evals.terminalbench.harbor_agent:CloverAgent \\
        -m openai/<served-model> --ak api_base=http://127.0.0.1:8000/v1 -e docker -n 4

`-m` names the model: `scripted:FILE` replays a script, `openai/NAME` or `hosted_vllm/NAME` asks
an OpenAI-compatible server for NAME (the prefix is dropped), anything else goes to the server
verbatim, or, with no server configured, is a local checkpoint directory (needs torch). The server
is `--ak api_base=URL` or OPENAI_BASE_URL; the key `--ak api_key=...` or OPENAI_API_KEY. Other
`--ak` options: max_steps, temperature, think, tool_format, max_tokens, command_timeout.

The loop runs in a worker thread (`asyncio.to_thread`); its tools reach the sandbox through
HarborEnvironment, which submits Harbor's coroutines back to this event loop. The trajectory goes
to `<agent logs>/clover-trajectory.jsonl`; tokens, steps and timings go into Harbor's context.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

from clover import __version__
from clover.core.stops import Interrupted
from clover.evals.terminalbench.harbor_env import HarborEnvironment
from clover.evals.terminalbench.local_runner import TASK_PROMPT

_SERVER_PREFIXES = ("openai/", "hosted_vllm/", "openai_compatible/")
_OPTIONS = (
    "max_steps",
    "temperature",
    "think",
    "tool_format",
    "max_tokens",
    "command_timeout",
    "time_limit",
    "token_limit",
    "request_timeout",
    "api_key",
)

try:  # Harbor's options model: `--ak` values typed and checked, a mistyped name is an error
    from harbor.agents.options import AgentOptions
except ImportError:  # pragma: no cover - older Harbor: checked by hand in CloverAgent.__init__
    AgentOptions = None  # type: ignore[assignment,misc]

if AgentOptions is not None:
    from pydantic import Field

    class CloverOptions(AgentOptions):  # type: ignore[misc,valid-type]
        """`--ak key=value` options of CloverAgent (unknown keys are refused: extra="forbid")."""

        api_base: str | None = Field(default=None, description="OpenAI-compatible server URL.")
        api_key: str | None = Field(default=None, description="API key (else OPENAI_API_KEY).")
        max_steps: int | None = Field(default=None, description="Agent steps before it stops.")
        max_tokens: int | None = Field(default=None, description="Tokens per model reply.")
        temperature: float | None = None
        think: bool | None = None
        tool_format: str | None = None
        command_timeout: float | None = Field(default=None, description="Seconds per shell command.")
        time_limit: float | None = Field(default=None, description="Seconds for the whole run.")
        token_limit: int | None = None
        request_timeout: float | None = None
else:  # pragma: no cover
    CloverOptions = None  # type: ignore[assignment,misc]


def server_model_name(name: str | None) -> str | None:
    if name is None:
        return None
    for prefix in _SERVER_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


class CloverAgent(BaseAgent):
    TRAJECTORY = "clover-trajectory.jsonl"
    options_model = CloverOptions

    def __init__(self, logs_dir: Path, model_name: str | None = None, *args: Any, **kwargs: Any) -> None:
        if CloverOptions is None:  # pragma: no cover - older Harbor without options models
            options = {k: kwargs.pop(k) for k in _OPTIONS if k in kwargs}
            api_base = kwargs.pop("api_base", None)
            super().__init__(logs_dir, model_name, *args, **kwargs)
        else:
            super().__init__(logs_dir, model_name, *args, **kwargs)  # Harbor validates into self.options
            values = self.options.model_dump() if self.options is not None else {}
            options = {k: values[k] for k in _OPTIONS if values.get(k) is not None}
            api_base = values.get("api_base")
        self._options = options
        self._api_base = api_base
        self._workdir = "/"

    @staticmethod
    def name() -> str:
        return "clover"

    def version(self) -> str | None:
        return __version__

    def _settings(self):
        from clover.settings import load_settings

        flags: dict[str, Any] = dict(self._options)
        model = server_model_name(self.model_name)
        if model:
            flags["model"] = model
        base_url = self._api_base or self._extra_env.get("OPENAI_BASE_URL")
        if base_url:
            flags["base_url"] = base_url
        if "api_key" not in flags and self._extra_env.get("OPENAI_API_KEY"):
            flags["api_key"] = self._extra_env["OPENAI_API_KEY"]
        settings = load_settings(None, flags, mode="yolo")
        # The sandbox is the boundary: no permission prompts, no host sandbox, no checkpoints.
        return dataclasses.replace(settings, mode="yolo", sandbox=False, checkpoints=False, live=False)

    async def setup(self, environment: BaseEnvironment) -> None:
        result = await environment.exec("pwd", timeout_sec=60)
        if result.return_code == 0 and (result.stdout or "").strip().startswith("/"):
            self._workdir = (result.stdout or "").strip().splitlines()[-1]

    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        from clover.runner import build_agent, build_model

        settings = self._settings()
        model = build_model(settings)  # a ModelError (bad model/server) fails the trial with its message
        env = HarborEnvironment(
            environment,
            asyncio.get_running_loop(),
            root=self._workdir,
            timeout=settings.command_timeout,
            output_limit=settings.output_limit,
        )
        stop = env.stop
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        trajectory = self.logs_dir / self.TRAJECTORY
        agent = None

        def before_step(step: int) -> None:
            if stop.is_set():
                raise Interrupted("Harbor cancelled the run (agent timeout)")
            self._report(context, agent, None, trajectory)

        agent = build_agent(
            settings,
            env,
            model=model,
            prompt=TASK_PROMPT.format(root=self._workdir),
            trajectory_path=trajectory,
            before_step=before_step,
        )
        context.metadata = {"model": model.name, "trajectory": str(trajectory), "workdir": self._workdir}
        try:
            result = await asyncio.to_thread(agent.run, instruction)
        except asyncio.CancelledError:
            env.cancel()  # Harbor's timeout: the command in flight is killed, the worker thread ends
            self._report(context, agent, None, trajectory)
            raise
        if agent.trajectory is not None:
            agent.trajectory.close()
        self._report(context, agent, result, trajectory)
        if result.exit_status == "model_error":
            raise RuntimeError(result.error)

    def _report(self, context: AgentContext, agent: Any, result: Any, trajectory: Path) -> None:
        """Tokens, steps and timings into Harbor's context (also mid-run, for timeouts)."""
        if agent is None:
            return
        context.n_input_tokens = agent.prompt_tokens
        context.n_output_tokens = agent.completion_tokens
        context.n_cache_tokens = 0
        meta = dict(context.metadata or {})
        meta.update(
            steps=agent.steps, model_seconds=round(agent.model_seconds, 3), trajectory=str(trajectory)
        )
        if agent.stats:
            meta["stats"] = dict(agent.stats)
        if result is not None:
            meta.update(
                exit_status=result.exit_status,
                seconds=round(result.seconds, 3),
                final_text=result.final_text[:2000],
                error=result.error,
            )
        context.metadata = meta
