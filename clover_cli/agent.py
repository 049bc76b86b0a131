"""The agent loop: messages -> Model.complete -> run each tool call -> append results -> repeat,
until the model answers without a tool call or a limit ends the run. A reply with neither an answer
nor a call (thinking cut off by the token limit) is not an answer: the model is asked to go on."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from clover.agent_hooks import Gate, StepRecorder
from clover.agent_run import Limits, RunResult, StepLimit
from clover.call_checks import call_signature, format_problem, read_only
from clover.core.environment_protocol import Environment
from clover.core.model_protocol import (
    AssistantTurn,
    EventHandler,
    Message,
    Model,
    StreamEvent,
    ToolCall,
    TurnOptions,
)
from clover.core.stage_protocol import StageCheck, StageDecision
from clover.core.stops import (
    AgentStop,
    FormatError,
    Interrupted,
    LimitsExceeded,
    ModelError,
    RepeatedCalls,
    Submitted,
    Terminated,
)
from clover.core.tool_protocol import EDITED_KEY, Tool, ToolResult, tool_spec
from clover.stage_checks import StageRun, run_stage_check
from clover.tools.safety.redact import redact
from clover.trajectory import Trajectory

WRAP_UP = (
    "You have used all {steps} steps this request allows, so no tool will run now. Reply to the user "
    "in a few lines, without calling a tool: what you found, what you changed, and what is left to do."
)
EMPTY_REPLY = (
    "Your reply had neither an answer nor a tool call. Continue: call a tool, or answer in a few lines "
    "with what was wrong and what you changed."
)


class Agent:
    def __init__(
        self,
        model: Model,
        env: Environment,
        tools: list[Tool],
        *,
        system_prompt: str,
        limits: Limits | None = None,
        trajectory: Trajectory | None = None,
        gate: Gate | None = None,
        on_event: EventHandler | None = None,
        before_step: Callable[[int], None] | None = None,
        on_tool_result: Callable[[ToolCall, ToolResult], None] | None = None,
        on_call_done: Callable[[ToolCall, ToolResult], None] | None = None,
        recorder: StepRecorder | None = None,
    ) -> None:
        """`on_tool_result`: a tool ran (the chat renders it). `on_call_done`: every call, whatever
        became of it: run, refused by the gate (data "denied"), malformed ("format_error"), held by
        the model's turn stage ("held") or not run again ("repeated"); headless runs report
        refusals with it. A turn stage's checks are not the model's calls: they are recorded in the
        trajectory and shown through `on_tool_result`, never sent to the model."""
        self.model, self.env, self.limits = model, env, limits or Limits()
        self.tools = {t.name: t for t in tools}
        self.specs = [tool_spec(t) for t in tools]
        self.trajectory, self.gate, self.on_event = trajectory, gate, on_event
        self.before_step, self.on_tool_result, self.on_call_done = before_step, on_tool_result, on_call_done
        self.recorder = recorder
        self.messages: list[Message] = [{"role": "system", "content": system_prompt}]
        self.settled: list[dict[str, Any]] = []  # what the step boundary settled, every step
        self._reset_counters()

    def _reset_counters(self) -> None:
        self.steps = self.prompt_tokens = self.completion_tokens = 0
        self.model_seconds = 0.0
        self.format_errors = 0
        self.last_call: str | None = None
        self.repeats = 0
        self.edited = False  # a file-editing tool succeeded in this run
        self.redone = 0  # early answers redone as a required call
        self.checks = 0  # turn stage checks asked for
        self.stats: dict[str, float] = {}
        self.started = time.monotonic()

    def run(self, task: str) -> RunResult:
        """Add `task` as a user message and loop until the model answers or a limit stops it.
        May be called again with a follow-up (chat); limits count per run."""
        self._reset_counters()
        self.messages.append({"role": "user", "content": task})
        self._record({"type": "user", "content": task})
        final, exit_status, error = "", "submitted", ""
        try:
            while True:
                self.step()
        except Submitted as stop:
            final = str(stop)
        except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM / SIGHUP (core's Terminated)
            if isinstance(stop, Terminated):
                exit_status, error = stop.exit_status, str(stop)
            else:
                exit_status, error = Interrupted.exit_status, "interrupted by the user"
        except AgentStop as stop:
            exit_status, error = stop.exit_status, str(stop)
            if isinstance(stop, StepLimit) and self.limits.wrap_up and self.model.wrap_up:
                final = self._wrap_up()
        result = RunResult(
            exit_status=exit_status,
            final_text=final,
            steps=self.steps,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            seconds=time.monotonic() - self.started,
            model_seconds=self.model_seconds,
            error=error,
            stats=dict(self.stats),
        )
        self._record({"type": "summary", **result.__dict__})
        return result

    # ------------------------------------------------------------------ one step

    def step(self) -> None:
        self._check_limits()
        self.steps += 1
        if self.before_step:
            self._before_step()
        turn = self._query()
        if self._answers_too_early(turn):
            self.redone += 1
            self._record(
                {
                    "type": "redo",
                    "step": self.steps,
                    "reason": "an answer before any file was edited",
                    "text": turn.text,
                }
            )
            turn = self._query(TurnOptions(tool_choice="required"))
        decision = self._review(turn)
        self.messages.append(turn.to_message())
        self._record(
            {
                "type": "assistant",
                "step": self.steps,
                "thinking": turn.thinking,
                "text": turn.text,
                "tool_calls": [c.__dict__ for c in turn.tool_calls],
                "prompt_tokens": turn.prompt_tokens,
                "completion_tokens": turn.completion_tokens,
                "seconds": turn.seconds,
                "stats": turn.stats,
            }
        )
        if not turn.tool_calls:
            if turn.text.strip():
                raise Submitted(turn.text)
            self._count_format_error("replies in a row with neither an answer nor a tool call")
            # e.g. thinking cut off by the token limit: not an answer, so ask again
            self.messages.append({"role": "user", "content": EMPTY_REPLY})
            self._record({"type": "user", "content": EMPTY_REPLY})
            return
        results = [
            self._execute_guarded(c, why) for c, why in zip(turn.tool_calls, decision.held, strict=True)
        ]
        if all(r.is_error and r.data.get("format_error") for r in results):
            self._count_format_error(f"malformed tool calls in a row; last: {results[-1].output}")
        else:
            self.format_errors = 0

    def _review(self, turn: AssistantTurn) -> StageDecision:
        """The model's turn stage, where it offers one, settles the turn's calls (their checks run
        through `run_check`); the turn then carries the calls as they are to run."""
        stage = self.model.turn_stage()
        if stage is None or not turn.tool_calls:
            return StageDecision(list(turn.tool_calls), [None] * len(turn.tool_calls))
        decision = stage.review(turn, self.messages, self.run_check)
        turn.tool_calls = decision.calls
        for key, value in decision.stats.items():
            turn.stats[key] = turn.stats.get(key, 0.0) + value
            self.stats[key] = self.stats.get(key, 0.0) + value
        return decision

    def run_check(self, check: StageCheck) -> StageRun | None:
        """Run a turn stage's check as any command runs: the gate decides, the environment runs
        it as a check, the trajectory records it (stage_checks.py). None: it was refused."""
        self.checks += 1
        return run_stage_check(self, check, f"check_{self.steps}_{self.checks}")

    def _answers_too_early(self, turn: AssistantTurn) -> bool:
        """A fix's answer that comes before any edit (redos left, and a step left for the edit)."""
        return (
            self.redone < self.limits.early_answer_redos
            and not turn.tool_calls
            and bool(turn.text.strip())
            and not self.edited
            and self.steps < self.limits.max_steps
        )

    def _before_step(self) -> None:
        self._hook(self.before_step, "before step")

    def _hook(self, hook: Callable[[int], None] | None, what: str) -> None:
        """A hook (a checkpoint) failing must not end the run: the step goes ahead without it,
        recorded, and `on_event` gets one warning line (the hook itself says what it lost)."""
        if hook is None:
            return
        try:
            hook(self.steps)
        except (AgentStop, KeyboardInterrupt):
            raise
        except Exception as exc:
            message = f"{what} {self.steps}: {type(exc).__name__}: {exc}"
            self._record({"type": "warning", "step": self.steps, "message": message})
            if self.on_event is not None:
                self.on_event(StreamEvent("status", message, {"warning": message}))

    def _count_format_error(self, what: str) -> None:
        self.format_errors += 1
        if self.format_errors >= self.limits.max_format_errors:
            raise FormatError(f"{self.format_errors} {what}")

    def _query(self, options: TurnOptions | None = None) -> AssistantTurn:
        start = time.monotonic()
        try:
            turn = self.model.complete(self.messages, self.specs, self.on_event, options)
        except (AgentStop, KeyboardInterrupt):
            raise
        except Exception as exc:  # a backend bug or transport failure ends the run, cleanly
            raise ModelError(f"model error: {type(exc).__name__}: {exc}") from exc
        self.model_seconds += time.monotonic() - start
        self.prompt_tokens += turn.prompt_tokens
        self.completion_tokens += turn.completion_tokens
        for key, value in turn.stats.items():
            self.stats[key] = self.stats.get(key, 0.0) + value
        for i, call in enumerate(turn.tool_calls):
            call.id = call.id or f"call_{self.steps}_{i}"
        return turn

    def _execute_guarded(self, call: ToolCall, held: str | None = None) -> ToolResult:
        """Run one call, or answer why not (`held`: the turn stage's reason to hold it back); the
        result always goes back as a tool message."""
        try:
            result = self._execute(call, held)
        except KeyboardInterrupt as stop:  # answered like every call (stream-json, the json result)
            why = str(stop) if isinstance(stop, Terminated) else "interrupted by the user"
            result = ToolResult(why, is_error=True, data={"interrupted": True})
            self._add_tool_message(call, result)
            if self.on_call_done is not None:
                self.on_call_done(call, result)
            raise
        except AgentStop as stop:  # e.g. one repeat too many: the call is answered, then the run ends
            result = ToolResult(f"not run: {stop}", is_error=True, data={"stopped": True})
            self._add_tool_message(call, result)
            if self.on_call_done is not None:
                self.on_call_done(call, result)
            raise
        self._add_tool_message(call, result)
        if self.on_call_done is not None:
            self.on_call_done(call, result)
        return result

    def _execute(self, call: ToolCall, held: str | None = None) -> ToolResult:
        error = format_problem(call, self.tools)
        if error:
            return ToolResult(error, is_error=True, data={"format_error": True})
        if held:
            return ToolResult(held, is_error=True, data={"held": True})
        signature = call_signature(call)
        self.repeats = self.repeats + 1 if signature == self.last_call else 1
        self.last_call = signature
        if self.repeats > self.limits.max_repeats:
            raise RepeatedCalls(f"the same {call.name} call was repeated {self.repeats} times in a row")
        if self.repeats == self.limits.max_repeats:
            return ToolResult(
                f"You have made this exact {call.name} call {self.repeats} times in a row and it was not run "
                "again. Its result will not change: try a different approach. Repeating it stops the run.",
                is_error=True,
                data={"repeated": True},
            )
        tool = self.tools[call.name]
        if self.gate is not None:
            refusal = self.gate.authorize(call, tool)
            if refusal is not None:
                return ToolResult(refusal, is_error=True, data={"denied": True})
        # recorded after the approval (a user editing files while asked is not the agent)
        recording = self.recorder is not None and not read_only(tool, call.arguments)
        if recording:
            self._hook(self.recorder.begin, "recording the step")
        try:
            result = tool.run(call.arguments, self.env)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # tools return errors as results; this is the safety net
            result = ToolResult(f"{call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
        finally:
            if recording:
                self._hook(self.recorder.end, "recording the step")
        self.edited |= result.edited and not result.is_error
        if self.gate is not None:  # e.g. search results from files that read rules deny
            self.gate.screen(tool, result)
        if self.on_tool_result:
            self.on_tool_result(call, result)
        return result

    def _add_tool_message(self, call: ToolCall, result: ToolResult) -> None:
        # Secrets in tool output (a printed .env, `env`) never reach the model, not only the log.
        content = redact(result.output)
        message: Message = {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}
        if result.edited and not result.is_error:
            message[EDITED_KEY] = list(result.paths)
        self.messages.append(message)
        self._record(
            {
                "type": "tool",
                "step": self.steps,
                "tool_call_id": call.id,
                "name": call.name,
                "arguments": call.arguments,
                "output": content,
                "is_error": result.is_error,
            }
        )

    def _wrap_up(self) -> str:
        """The step limit ended the run: one more turn, with no tool allowed (TurnOptions
        tool_choice "none"), so the user is told where things stand instead of getting no reply.
        A failure or Ctrl-C here only loses the wrap-up."""
        note = WRAP_UP.format(steps=self.limits.max_steps)
        self.messages.append({"role": "user", "content": note})
        self._record({"type": "user", "content": note})
        try:
            turn = self._query(TurnOptions(tool_choice="none"))
        except (Exception, KeyboardInterrupt) as exc:
            self._record(
                {"type": "warning", "step": self.steps, "message": f"no wrap-up: {type(exc).__name__}: {exc}"}
            )
            return ""
        turn.tool_calls = []  # a backend that could not enforce "none": calls without results would break the chat
        self.messages.append(turn.to_message())
        self._record(
            {
                "type": "assistant",
                "step": self.steps,
                "thinking": turn.thinking,
                "text": turn.text,
                "tool_calls": [],
                "wrap_up": True,
                "prompt_tokens": turn.prompt_tokens,
                "completion_tokens": turn.completion_tokens,
                "seconds": turn.seconds,
                "stats": turn.stats,
            }
        )
        return turn.text.strip()

    def _check_limits(self) -> None:
        limits = self.limits
        if self.steps >= limits.max_steps:
            raise StepLimit(f"step limit reached ({limits.max_steps} steps)")
        if time.monotonic() - self.started > limits.time_limit:
            raise LimitsExceeded(f"time limit reached ({limits.time_limit:.0f} s)")
        if self.prompt_tokens + self.completion_tokens > limits.token_limit:
            raise LimitsExceeded(f"token limit reached ({limits.token_limit} tokens)")

    def record_step(self, report: dict[str, Any]) -> None:
        """What the step boundary settled for one command or check (tools/safety/boundary.py): in the
        trajectory, and in `settled` for the run's report."""
        self.settled.append({"step": self.steps, **report})
        self._record({"type": "step", "step": self.steps, **report})

    def record(self, record: dict[str, Any]) -> None:
        """One record in the trajectory (a turn stage's check: stage_checks.py)."""
        self._record(record)

    def _record(self, record: dict[str, Any]) -> None:
        if self.trajectory is not None:
            self.trajectory.append(record)
