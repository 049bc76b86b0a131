"""One-shot headless chat, in the Claude Code / Codex habit: `clover -p "question"`, or anything piped
into `clover chat`. All of stdin is one prompt, the agent runs once in the permission mode the user's
config and flags give (default `ask`, as in Claude Code's -p: a call that would need approval is
refused, since no one can answer, said on stderr at once and listed in json's `permission_denials`),
the answer goes to stdout as text, one JSON object, or a JSON line per event. Exit codes:
exit_codes.py (0 answered; 3 calls refused and nothing changed; 4 a limit; 5 the backend failed)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from clover.agent import Agent
from clover.agent_hooks import StepRecorder
from clover.agent_run import RunResult
from clover.call_log import CallLog
from clover.core.environment_protocol import Environment
from clover.core.model_protocol import AssistantTurn, EventHandler, Message, Model, ModelWrapper, StreamEvent
from clover.core.stops import ModelError
from clover.exit_codes import ExitCode, decide
from clover.fix_report import boundary_outcome
from clover.loop_guard import LoopGuard
from clover.repl.compaction import is_overflow
from clover.settings import Settings
from clover.terminal_text import visible

FORMATS = ("text", "json", "stream-json")


def read_prompt(prompt: str | None, stdin: IO[str]) -> str:
    """`prompt`, with piped stdin appended (`cat log | clover -p "why does this fail?"`); '-' or None:
    stdin alone."""
    piped = "" if stdin.isatty() else stdin.read()
    if prompt in (None, "-"):
        return piped.strip()
    return f"{prompt.strip()}\n\n{piped.strip()}" if piped.strip() else prompt.strip()


class RecordingModel(ModelWrapper):
    """The headless runs' layer around the guarded model (runner.build_agent's `wrap_model`; the loop
    guard under it remembers the last turn: was it cut short?). A request the server refuses as too
    long for its context is compacted (the older turns summarised, as the chat does) and asked once
    more; `notice` says so."""

    def __init__(self, inner: LoopGuard, notice: Callable[[str], None] | None = None) -> None:
        self.inner = inner
        self.notice = notice or (lambda line: None)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def context_window(self) -> int:  # read each time: a backend may learn it from a refusal
        return self.inner.context_window

    def complete(
        self, messages: list[Message], tools: list[Any], on_event: Any = None, options: Any = None
    ) -> AssistantTurn:
        try:
            return self.inner.complete(messages, tools, on_event, options)
        except ModelError as exc:
            if not is_overflow(exc) or not self._compact(messages):
                raise
            return self.inner.complete(messages, tools, on_event, options)

    def _compact(self, messages: list[Message]) -> bool:
        """The conversation, compacted in place (the agent's own list); False: nothing to gain."""
        from clover.repl import compaction

        first = messages[0] if messages else {}
        system = str(first.get("content") or "") if first.get("role") == "system" else ""
        request = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
        window = self.inner.context_window  # learnt from the refusal, maybe
        done = compaction.compact(
            messages,
            self.inner,
            system_prompt=system,
            task_state=compaction.task_state(request, ""),
            window=window,
            keep_tokens=0,
        )
        if done is None or not done.applied:
            return False
        context = f"{window:,}-token context" if window else "context"
        self.notice(
            f"the conversation was too long for {self.name}'s {context}: {done.removed} older messages "
            f"compacted (~{done.before_tokens:,} → ~{done.after_tokens:,} tokens), asking again"
        )
        return True

    def cut_reason(self) -> str:
        """The last reply's finish reason when it was incomplete (loop_guard.py), else ''."""
        return self.inner.cut_reason()

    def cut_note(self) -> str:
        """Why the last reply was incomplete, in words ('' when it was not)."""
        return self.inner.cut_note()


def headless_agent(
    settings: Settings,
    env: Environment,
    model: Model,
    log: CallLog,
    on_event: EventHandler,
    *,
    kind: str,
    notice: Callable[[str], None],
    trajectory: Path | None = None,
    recorder: StepRecorder | None = None,
) -> tuple[Agent, RecordingModel]:
    """A headless run's agent (`-p`, `clover fix`): every call ends in `log`, the guarded model
    compacts the conversation when the server refuses it as too long (said through `notice`), and
    the RecordingModel returned says whether the last reply was cut short."""
    from clover.runner import build_agent

    made: list[RecordingModel] = []

    def compacting(guarded: LoopGuard) -> RecordingModel:
        made.append(RecordingModel(guarded, notice=notice))
        return made[-1]

    agent = build_agent(
        settings,
        env,
        kind=kind,
        model=model,
        wrap_model=compacting,
        trajectory_path=trajectory,
        on_event=on_event,
        before_step=log.on_step,
        on_call_done=log,
        recorder=recorder,
    )
    log.bind(agent.tools)
    return agent, made[0]


def run_print(
    settings: Settings,
    root: Path,
    prompt: str,
    output_format: str = "text",
    *,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
    model: Model | None = None,
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    if output_format not in FORMATS:
        print(f"clover: --output-format must be one of {', '.join(FORMATS)}, not {output_format!r}", file=err)
        return ExitCode.USAGE
    if not prompt.strip():
        print('clover: no prompt: pass -p "QUESTION" or pipe it on stdin', file=err)
        return ExitCode.USAGE
    from clover.runner import build_environment, build_model, checkpointer
    from clover.tools.safety.sandbox import SandboxUnavailable

    try:
        inner = model if model is not None else build_model(settings)
        env = build_environment(settings, root)
    except (ModelError, SandboxUnavailable, ValueError, OSError) as exc:
        print(f"clover: {visible(str(exc))}", file=err)
        return ExitCode.USAGE
    from clover import containment

    bounds = containment.of(settings, env)
    for line in bounds.warnings(settings.mode):
        print(f"clover: {line}", file=err)

    def emit(record: dict[str, Any]) -> None:
        out.write(json.dumps(record, default=str) + "\n")
        out.flush()

    streaming = output_format == "stream-json"
    log = CallLog(err, emit=emit if streaming else None)
    recorder = checkpointer(
        settings,
        root,
        prompt.strip().splitlines()[0][:70],  # `clover undo` reverts a -p run
        session=f"p-{time.strftime('%Y%m%d-%H%M%S')}",
    )

    def on_event(event: StreamEvent) -> None:
        log.on_event(event)
        if streaming:
            emit({"type": event.kind, "text": event.text, "data": event.data})

    def notice(line: str) -> None:
        print(f"clover: {visible(line)}", file=err)

    try:
        agent, recording = headless_agent(
            settings, env, inner, log, on_event, kind="chat", notice=notice, recorder=recorder
        )
    except ValueError as exc:  # a bad permission rule
        print(f"clover: {visible(str(exc))}", file=err)
        return ExitCode.USAGE
    result = agent.run(prompt)
    log.done()
    summary = _summary(result, recording, log, settings, bounds.to_json())
    held, _ = boundary_outcome(agent.settled)  # a step's change no one could approve: said, not hidden
    summary["held_back"] = [{"path": path, "why": why} for path, why in held]
    for path, why in held:
        print(
            f"clover: not applied: {visible(path)}, {visible(why)} (held: no one could approve it)", file=err
        )
    _say(summary, result, log, settings.mode, output_format, out, err)
    return int(summary["exit_code"])


def _summary(
    result: RunResult, recording: RecordingModel, log: CallLog, settings: Settings, containment: Any
) -> dict[str, Any]:
    """The run as json reports it; the exit code decided as exit_codes.py says."""
    cut = recording.cut_reason() if result.exit_status == "submitted" else ""
    # A question needs no change: refusals decide only when nothing that can change files ran.
    outcome = decide(
        result.exit_status,
        refused=len(log.denials),
        changed=log.mutated,
        needs_change=False,
        cut=cut,
        outside_competence=bool(result.stats.get("outside_competence")),
    )
    return {
        "status": result.exit_status if not cut else "truncated",
        "outcome": outcome.label,
        "exit_code": int(outcome.code),
        "is_error": outcome.code != ExitCode.OK,
        "result": result.final_text,
        "truncated": recording.cut_note() if cut else None,
        "error": result.error.removeprefix("model error: ModelError: "),
        **log.record(),
        "steps": result.steps,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "seconds": round(result.seconds, 3),
        "model": recording.name,
        "mode": settings.mode,
        "containment": containment,
    }


def _say(
    summary: dict[str, Any],
    result: RunResult,
    log: CallLog,
    mode: str,
    output_format: str,
    out: IO[str],
    err: IO[str],
) -> None:
    """The answer on stdout in the format asked for; what went wrong on stderr."""
    code = summary["exit_code"]
    if output_format == "json":
        out.write(json.dumps(summary, indent=2) + "\n")
    elif output_format == "stream-json":
        out.write(json.dumps({"type": "result", **summary}) + "\n")
    else:
        if result.final_text:  # text output is for people: the model's words cannot act on the terminal
            out.write(visible(result.final_text.rstrip()) + "\n")
        if summary["truncated"]:
            print(f"clover: truncated: {summary['truncated']}", file=err)
        if result.exit_status != "submitted":
            print(f"clover: {result.exit_status}: {visible(summary['error'])}", file=err)
    if code == ExitCode.REFUSED:
        allows = "--yes or --mode auto-edit allow them" if mode in ("ask", "plan") else "--yes allows them"
        print(
            f"clover: {len(log.denials)} tool call(s) refused in {mode} mode and nothing changed "
            f"(exit {code}); {allows}, or allow rules in the config let chosen commands run",
            file=err,
        )
    elif summary["outcome"] == "outside_competence" and output_format == "text":
        print(f"clover: the model says this request is beyond it (exit {code})", file=err)
    out.flush()
