"""`clover chat`: read a message, run the agent on it with streamed rendering and approvals, keep
the session saved, repeat. The session's state is state.py's, the screen and keys ui.py's; slash
commands live in slash.py, rendering in render.py, the observed model and gate in observed.py,
`!command` in bang.py, @mentions in attach.py, /model in model_switch.py, which session to continue
in resume.py, the headless one-shot in headless.py."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from rich.console import Console

from clover.agent_run import RunResult
from clover.cli_common import state_dir
from clover.core.model_protocol import Model, ToolCall, TurnOptions
from clover.core.stops import AgentStop, ModelError, Terminated
from clover.core.tool_protocol import ToolResult
from clover.loop_guard import LoopGuard
from clover.repl import compaction, context, resume, unanswered, undo_view
from clover.repl.bang import run_user_command
from clover.repl.model_switch import ClosedWhileLoading, load_model, switch_model
from clover.repl.observed import ObservedGate, ObservedModel
from clover.repl.slash import dispatch
from clover.repl.state import ChatState
from clover.repl.status import print_status, unknown_window_note
from clover.repl.ui import ChatUI, display_name
from clover.runner import build_agent, build_environment, build_gate
from clover.settings import MODES, Settings
from clover.terminal_text import visible
from clover.termination import STATUS_CODES, exit_code

if TYPE_CHECKING:
    from clover.tools.safety.permgate import PermissionGate

CYCLE = ("ask", "auto-edit", "plan")  # Shift+Tab, as Claude Code: default, accept edits, plan


class TurnStopped(AgentStop):
    """The user declined a call without saying what instead: the turn ends, the user says it next."""

    exit_status = "declined"


class ChatApp:
    def __init__(
        self,
        settings: Settings,
        root: str | Path,
        *,
        live: bool = True,
        tty: bool | None = None,
        stdin: IO[str] | None = None,
        console: Console | None = None,
        model: Model | None = None,
        input_kwargs: dict[str, Any] | None = None,
    ) -> None:
        root = Path(root).resolve()
        self.state = state = ChatState(settings, root, state_dir())
        self.cycle = CYCLE + (("yolo",) if settings.mode == "yolo" else ())
        completions = {"mode": lambda: MODES, "think": lambda: ("on", "off"), "resume": state.store.ids}
        self.ui = ui = ChatUI(
            settings,
            root,
            state.home,
            live=live,
            tty=tty,
            stdin=stdin,
            console=console,
            input_kwargs=input_kwargs,
            completions=completions,
            cycle_mode=self.cycle_mode,
        )
        ui.approver.on_all_edits = self._all_edits
        state.env = build_environment(settings, root, on_output=ui.renderer.tool_output)
        ui.approver.env = state.env  # edit previews are planned where the edits run
        self._build_agent(self._load(model))
        from clover import containment

        state.containment = containment.of(settings, state.env)
        for line in state.containment.warnings(settings.mode):
            ui.renderer.error(line)
        if settings.deny:  # what a deny rule is, and is not, said where the user set some
            ui.renderer.status(f"deny rules: {containment.DEFENCE_IN_DEPTH}")
        state.baseline = state.worktree()

    # ------------------------------------------------------------------ setup

    def _load(self, model: Model | None) -> Model:
        """The backend: given, or loaded (a local one under a spinner), with the banner."""
        settings, ui = self.state.settings, self.ui
        default_model = model is None and settings.model == "embedded" and not settings.base_url
        local = model is None and not settings.base_url and not settings.model.startswith("scripted:")
        if ui.tty and local:  # at once, before a local model's weights load (seconds of a blank screen)
            ui.banner(display_name(settings), settings, self.state.root, default_model)
        backend = model if model is not None else load_model(ui, settings)
        if ui.tty and not local:  # a server's model is named once it was asked which it serves
            ui.banner(str(backend.name), settings, self.state.root, default_model)
        if settings.base_url and (note := unknown_window_note(backend)):
            ui.renderer.info(note)
        return backend

    def _build_agent(self, backend: Model) -> None:
        state = self.state
        state.recorder = state.open_recorder(self.ui.renderer.error)
        state.agent = build_agent(
            state.settings,
            state.env,
            kind="chat",
            model=backend,
            wrap_model=self._observe_model,
            wrap_gate=self._observe_gate,
            ask_user=self.ui.approver,
            before_step=self._before_step,
            on_tool_result=self.keep_result,
            on_call_done=self._call_done,
            recorder=state.recorder,
        )

    def _observe_model(self, guarded: LoopGuard) -> ObservedModel:
        self.state.model = ObservedModel(guarded, self.ui.renderer, self.compact, self.state)
        return self.state.model

    def _observe_gate(self, gate: PermissionGate) -> ObservedGate:
        self.state.gate = ObservedGate(gate, self.ui, self.state)
        return self.state.gate

    # ------------------------------------------------------------------ the loop

    def run(self, resume: str | None = None) -> int:
        """The prompt loop. `resume`: an id (or prefix), 'last', 'continue' (this directory's
        latest) or 'pick' (a picker) continues a saved session first."""
        if resume is not None and not self.resume(resume):
            return 2
        armed = False  # a first Ctrl-C at an empty prompt arms the exit
        code: int | None = None
        while code is None and not self.ui.exit_requested():
            try:
                text = self.ui.input.read()
            except EOFError:
                break
            except Terminated as stop:  # SIGTERM / SIGHUP: leave (a Ctrl-C only clears the line)
                code = exit_code(stop)
                break
            except KeyboardInterrupt:
                if self.ui.input.interrupted_empty and armed:
                    break
                armed = self.ui.input.interrupted_empty
                if armed:
                    self.ui.renderer.info("(Ctrl-C again or Ctrl-D to exit)")
                continue
            armed = False
            code = self._take(text)
        self.farewell()
        return code or 0

    def _take(self, text: str) -> int | None:
        """One line typed at the prompt; an exit code when the chat is to end with it."""
        try:
            if not text.strip():
                return None
            if text.lstrip().startswith("/"):
                return 0 if dispatch(self, text) else None
            if text.lstrip().startswith("!"):
                run_user_command(self.state, self.ui, self.keep_result, text.lstrip()[1:].strip())
                self.save()
                return None
            result = self.ask(text)
            if result is not None and result.exit_status in STATUS_CODES:  # SIGTERM / SIGHUP mid-request
                return STATUS_CODES[result.exit_status]
        except Terminated as stop:
            self.ui.renderer.stop_live()
            return exit_code(stop)
        except KeyboardInterrupt:
            self.ui.renderer.stop_live()
            self.ui.renderer.note("interrupted")
        return None

    def farewell(self) -> None:
        path = self.save()
        if path is not None:
            sid = self.state.session.id
            self.ui.renderer.info(f"session {sid} saved · clover chat --resume {sid}")
        elif not self.state.started():
            self.ui.renderer.info("nothing to save: no request in this session")

    def ask(self, text: str) -> RunResult | None:
        state, ui = self.state, self.ui
        attached = context.attach(state, ui, text)
        if attached is None:
            return None
        ui.working = True
        state.turn_stopped = False
        ui.start_keys()  # from the start: keys typed from now on are not echoed mid-output
        if state.recorder is not None:  # this request's steps are one undo
            state.recorder.session = state.session.id
            state.recorder.start_request(text[:70])
        state.current_request = text
        try:
            result = self._run_agent(attached)
            state.totals.add(result)
            ui.report(result, declined=result.exit_status == TurnStopped.exit_status)
            self.print_status(result=result)
            unanswered.take_back(state.agent.messages, ui, text, result)
            ui.write_transcript(text, result)
        finally:  # only now: keys typed meanwhile are not echoed into the output above
            ui.working = False
            ui.stop_keys()
        self.save()
        return result

    def _run_agent(self, message: str) -> RunResult:
        try:
            self.maybe_compact()
            return self.state.agent.run(message)
        except Terminated as stop:  # landed outside the agent's own handler
            return RunResult(stop.exit_status, error=str(stop))
        except KeyboardInterrupt:
            return RunResult("interrupted", error="interrupted by the user")
        finally:
            self.ui.renderer.stop_live()
            unanswered.repair(self.state.agent.messages)
            self.save()

    def keep_result(self, call: ToolCall, result: ToolResult) -> None:
        """A tool ran: its whole output kept for /show, its head and tail on screen."""
        approver, state = self.ui.approver, self.state
        shown = call.id in approver.previewed
        approver.previewed.discard(call.id)
        kept = state.outputs.keep(result)
        state.pending_lines[call.id] = kept.lines
        self.ui.renderer.tool_result(call, result, diff_shown=shown, output=kept)

    def _call_done(self, call: ToolCall, result: ToolResult) -> None:
        """Every call the model made: those that neither ran nor met the gate are shown here; a
        result's real line count is noted on its message (now the conversation's last)."""
        state = self.state
        if call.id in state.pending_lines and state.agent.messages:
            state.outputs_seen.note(state.agent.messages[-1], state.pending_lines.pop(call.id))
        if any(result.data.get(k) for k in ("format_error", "held", "repeated", "stopped")):
            self.ui.renderer.call_not_run(call, result)

    def _before_step(self, step: int) -> None:
        if self.state.turn_stopped:
            raise TurnStopped("the user declined a call and will say what to do instead")
        self.save()
        self.maybe_compact()

    def _all_edits(self) -> None:
        self.set_mode("auto-edit", quiet=True)
        self.ui.renderer.note(
            "mode: auto-edit · edits are allowed for the rest of this session (Shift+Tab changes it)"
        )

    # ------------------------------------------------------------------ the session

    def save(self) -> Path | None:
        """Write the session; one with no request yet is not written (it would be `--resume last`)."""
        return resume.save(self.state, self.ui.renderer)

    def resume(self, ref: str | None) -> bool:
        """Continue the saved session `ref` names (resume.py); False when there is none such."""
        return resume.resume(self.state, self.ui, ref)

    def clear(self) -> None:
        self.save()
        resume.fresh(self.state)
        self.ui.renderer.note(f"new conversation (session {self.state.session.id})")

    # ------------------------------------------------------------------ settings

    def switch_model(self, name: str) -> bool:
        return switch_model(self.state, self.ui, name)

    def set_think(self, on: bool) -> None:
        self.state.settings = dataclasses.replace(self.state.settings, think=on)
        self.state.model.options = TurnOptions(think=on)  # every later turn asks the backend for it
        self.ui.renderer.note(f"thinking {'on' if on else 'off'}")

    def set_mode(self, mode: str, quiet: bool = False) -> None:
        state = self.state
        if mode not in MODES:
            self.ui.renderer.error(f"mode must be one of {', '.join(MODES)}")
            return
        state.settings = dataclasses.replace(state.settings, mode=mode)
        gate = build_gate(state.settings, state.root, self.ui.approver)
        gate.remembered = list(state.gate.inner.remembered)  # "always" answers last the whole session
        state.gate.inner = gate  # the agent's gate shows calls as before, under the new mode's rules
        self.ui.input.mode = mode
        if mode == "yolo" and "yolo" not in self.cycle:
            self.cycle += ("yolo",)
        if not quiet:
            self.ui.renderer.note(f"mode: {mode}")

    def cycle_mode(self) -> str:
        """Shift+Tab at the prompt: the next mode (the line under the prompt says which)."""
        mode = self.state.settings.mode
        at = self.cycle.index(mode) if mode in self.cycle else -1
        self.set_mode(self.cycle[(at + 1) % len(self.cycle)], quiet=True)
        return self.state.settings.mode

    # ------------------------------------------------------------------ context, files, status

    def maybe_compact(self) -> None:
        if compaction.should_compact(self.state.used_tokens(), self.state.model.context_window):
            self.compact(forced=False)

    def compact(self, forced: bool) -> bool:
        """Summarise the older turns; True when the conversation got smaller."""
        done = context.compact(self.state, self.ui.renderer, forced)
        if done:
            self.save()
        return done

    def undo(self, redo: bool, arg: str = "") -> None:
        """/undo, /redo (undo_view.py)."""
        undo_view.undo(self.state, self.ui, redo, arg)

    def show_diff(self) -> None:
        undo_view.show_diff(self.state, self.ui.renderer)

    def print_status(self, result: RunResult | None = None, full: bool = False) -> None:
        """One line that fits the terminal (the least needed parts go first); /status adds more."""
        print_status(self.state, self.ui.renderer, result, full)


def run_chat(settings: Settings, root: Path, resume: str | None = None, live: bool = True) -> int:
    """The `clover chat` entry: returns the exit code. `resume`: see ChatApp.run."""
    try:
        app = ChatApp(settings, root, live=live)
    except ClosedWhileLoading:
        print("clover: closed (Ctrl-D) before the model loaded", file=sys.stderr)
        return 0
    except (ModelError, ValueError, OSError) as exc:  # bad model, permission rule or directory
        print(f"clover: {visible(str(exc))}", file=sys.stderr)
        return 2
    return app.run(resume=resume)
