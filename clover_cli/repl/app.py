"""`clover chat`: read a message, run the agent on it with streamed rendering and approvals, keep
the session saved, repeat. Slash commands live in slash.py, rendering in render.py, the observed
model and gate in observed.py, `!command` in bang.py, @mentions in attach.py, /model in
model_switch.py, which session to continue in resume.py, the headless one-shot in headless.py."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import IO, Any

from rich.console import Console

from clover.agent import Agent, RunResult
from clover.cli_common import state_dir
from clover.core.protocols import (
    AgentStop,
    Model,
    ModelError,
    Terminated,
    ToolCall,
    ToolResult,
    TurnOptions,
)
from clover.repl import compaction, context, resume, unanswered, undo_view
from clover.repl.approvals import Approver
from clover.repl.bang import run_user_command
from clover.repl.completion import ChatCompleter
from clover.repl.input import ChatInput
from clover.repl.keys import EscWatch
from clover.repl.model_switch import ClosedWhileLoading, load_model, switch_model
from clover.repl.observed import ObservedGate, ObservedModel
from clover.repl.outputs import OutputStore, SeenLines
from clover.repl.render import Renderer, make_console
from clover.repl.sessions import Session, SessionError, SessionStore, new_session_id
from clover.repl.slash import dispatch, help_texts
from clover.repl.status import Totals, print_status, unknown_window_note
from clover.runner import build_agent, build_environment, build_gate
from clover.settings import MODES, Settings
from clover.terminal_text import visible
from clover.termination import STATUS_CODES, exit_code

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
        self.settings = settings
        self.root = Path(root).resolve()
        terminal = _terminal()  # stdout, or stderr when stdout is redirected: the UI stays on screen
        self.tty = (sys.stdin.isatty() and terminal is not None) if tty is None else tty
        self.transcript = sys.stdout if tty is None and self.tty and terminal is not sys.stdout else None
        self.console = console or make_console(self.tty, terminal if self.tty else None)
        self.renderer = Renderer(self.console, live=live and settings.live and self.tty)
        self.home = state_dir()
        self.store = SessionStore(self.home / "sessions")
        self.session = Session(new_session_id(), str(self.root), settings.model, settings.mode)
        self.outputs = OutputStore()
        self.outputs_seen = SeenLines()  # each result's real line count, saved with the session
        self.pending_lines: dict[str, int] = {}  # a result kept, its message not yet added
        self.history_by = ""  # the backend that wrote this session's earlier turns, when not this one
        self.context_tokens = 0
        self.current_request = ""
        self.user_commands = 0
        self.turn_stopped = False
        self.server_url = settings.base_url  # /model NAME asks this server, even after /model embedded
        self.cycle = CYCLE + (("yolo",) if settings.mode == "yolo" else ())
        commands = help_texts()
        completer = ChatCompleter(
            self.root,
            commands,
            {"mode": lambda: MODES, "think": lambda: ("on", "off"), "resume": self.store.ids},
        )
        prompt_io = input_kwargs
        if prompt_io is None and self.tty and terminal is not sys.stdout:
            from prompt_toolkit.output import create_output

            prompt_io = {"output": create_output(stdout=terminal)}
        self.input = ChatInput(
            self.home / "history",
            completer,
            tty=self.tty,
            stdin=stdin,
            echo=None if self.tty else self.console.file,
            session_kwargs=prompt_io,
            cycle_mode=self.cycle_mode,
        )
        self.input.mode = settings.mode
        menu = self.input.approve if self.tty and self.input.session is not None else None
        self.approver = Approver(self.console, self.root, self.input.ask, menu=menu)
        self.approver.before_ask, self.approver.after_ask = self._before_question, self._after_question
        self.approver.on_all_edits = self._all_edits
        # Esc interrupts like Ctrl-C while the agent works (a real terminal only, not a test's pipe).
        self.keys = EscWatch() if self.tty and input_kwargs is None else None
        self.renderer.typed = self._typed
        self._working = False
        self.env = build_environment(settings, self.root)
        self.approver.env = self.env  # edit previews are planned where the edits run
        self.env.on_output = self.renderer.tool_output  # a running command's tail under its spinner
        self.default_model = model is None and settings.model == "embedded" and not settings.base_url
        self.totals = Totals()
        local = model is None and not settings.base_url and not settings.model.startswith("scripted:")
        if self.tty and local:  # at once, before a local model's weights load (seconds of a blank screen)
            self.banner(_display_name(settings))
        self.model = ObservedModel(model if model is not None else load_model(self, settings), self)
        if self.tty and not local:  # a server's model is named once it was asked which it serves
            self.banner(self.model.name if model is None else str(getattr(model, "name", "")))
        if settings.base_url and (note := unknown_window_note(self)):
            self.renderer.info(note)
        self.recorder = self._recorder()
        self.agent: Agent = build_agent(
            settings,
            self.env,
            kind="chat",
            model=self.model,
            ask_user=self.approver,
            before_step=self._before_step,
            on_tool_result=self.keep_result,
            recorder=self.recorder,
        )
        self.agent.on_call_done = self._call_done
        self.agent.gate = ObservedGate(self.agent.gate, self)
        from clover import containment

        self.containment = containment.of(settings, self.env)
        for line in self.containment.warnings(settings.mode):
            self.renderer.error(line)
        if settings.deny:  # what a deny rule is, and is not, said where the user set some
            self.renderer.status(f"deny rules: {containment.DEFENCE_IN_DEPTH}")
        self.baseline = self.worktree()

    # ------------------------------------------------------------------ setup helpers

    def _recorder(self) -> Any:
        """What each agent step changes, recorded for /undo (None: checkpoints off or unusable)."""
        if not self.settings.checkpoints:
            return None
        try:
            from clover.tools.checkpoints import Checkpoints, Recorder

            return Recorder(Checkpoints(str(self.root)), self.session.id)
        except Exception as exc:  # a store that cannot be used: /undo says so
            self.renderer.error(f"checkpoints unavailable ({exc}): /undo will not work in this session")
            return None

    def worktree(self) -> str | None:
        from clover.gitdiff import is_git_repo, worktree_tree

        try:
            return worktree_tree(self.root) if is_git_repo(self.root) else None
        except RuntimeError:
            return None

    def model_name(self) -> str:
        return self.model.name

    # ------------------------------------------------------------------ the loop

    def banner(self, name: str) -> None:
        if self.default_model:
            name += " (the built-in tiny Clover; --model / --base-url pick another)"
        self.renderer.note(f"Clover chat · model {name} · mode {self.settings.mode} · {self.root}")
        self.renderer.status(
            "/help · Alt-Enter: new line · !cmd runs it · Shift+Tab: mode · Esc stops · Ctrl-D exits"
        )

    def run(self, resume: str | None = None) -> int:
        """The prompt loop. `resume`: an id (or prefix), 'last', 'continue' (this directory's
        latest) or 'pick' (a picker) continues a saved session first."""
        if resume is not None and not self.resume(resume):
            return 2
        armed = False  # a first Ctrl-C at an empty prompt arms the exit
        code = 0
        while not self.exit_requested():
            try:
                text = self.input.read()
            except EOFError:
                break
            except Terminated as stop:  # SIGTERM / SIGHUP: leave (a Ctrl-C only clears the line)
                code = exit_code(stop)
                break
            except KeyboardInterrupt:
                if self.input.interrupted_empty and armed:
                    break
                armed = self.input.interrupted_empty
                if armed:
                    self.renderer.info("(Ctrl-C again or Ctrl-D to exit)")
                continue
            armed = False
            try:
                if not text.strip():
                    continue
                if text.lstrip().startswith("/"):
                    if dispatch(self, text):
                        break
                    continue
                if text.lstrip().startswith("!"):
                    run_user_command(self, text.lstrip()[1:].strip())
                    continue
                result = self.ask(text)
                if result is not None and result.exit_status in STATUS_CODES:  # SIGTERM / SIGHUP mid-request
                    code = STATUS_CODES[result.exit_status]
                    break
            except Terminated as stop:
                self.renderer.stop_live()
                code = exit_code(stop)
                break
            except KeyboardInterrupt:
                self.renderer.stop_live()
                self.renderer.note("interrupted")
        self.farewell()
        return code

    def farewell(self) -> None:
        path = self.save()
        if path is not None:
            self.renderer.info(f"session {self.session.id} saved · clover chat --resume {self.session.id}")
        elif not any(m.get("role") == "user" for m in self.agent.messages):
            self.renderer.info("nothing to save: no request in this session")

    def exit_requested(self) -> bool:
        """Ctrl-D while the agent worked, or at one of its questions."""
        return (self.keys is not None and self.keys.exit_requested) or self.approver.closed

    def ask(self, text: str) -> RunResult | None:
        attached = context.attach(self, text)
        if attached is None:
            return None
        self._working = True
        self.turn_stopped = False
        self.start_keys()  # from the start: keys typed from now on are not echoed mid-output
        if self.recorder is not None:  # this request's steps are one undo
            self.recorder.session = self.session.id
            self.recorder.start_request(text[:70])
        self.current_request = text
        try:
            result = self._run_agent(attached)
            self.totals.add(result)
            self._report(result)
            unanswered.take_back(self, text, result)
            self._write_transcript(text, result)
        finally:  # only now: keys typed meanwhile are not echoed into the output above
            self._working = False
            self.stop_keys()
        self.save()
        return result

    def _report(self, result: RunResult) -> None:
        if self.exit_requested():
            self.renderer.stop_live()
            self.renderer.note("⏹ Ctrl-D (input closed): leaving")
        elif result.exit_status == "interrupted":
            self.renderer.note("⏹ interrupted: back at the prompt, the conversation is kept")
        elif result.exit_status == TurnStopped.exit_status:
            self.renderer.note("⏹ declined: say what Clover should do instead")
            self.input.hint = "the call was declined: tell Clover what to do instead"
        elif result.exit_status != "submitted":
            self.renderer.error(f"{result.exit_status}: {result.error}")
        self.print_status(result=result)

    def _write_transcript(self, text: str, result: RunResult) -> None:
        """With stdout redirected (`clover chat > out.txt`) the file gets each request and answer."""
        if self.transcript is None:
            return
        answer = visible(result.final_text) or f"({result.exit_status})"
        self.transcript.write(f"› {text}\n\n{answer}\n\n")
        self.transcript.flush()

    def _run_agent(self, message: str) -> RunResult:
        try:
            self.maybe_compact()
            return self.agent.run(message)
        except Terminated as stop:  # landed outside the agent's own handler
            return RunResult(stop.exit_status, error=str(stop))
        except KeyboardInterrupt:
            return RunResult("interrupted", error="interrupted by the user")
        finally:
            self.renderer.stop_live()
            unanswered.repair(self.agent.messages)
            self.save()

    def start_keys(self) -> None:
        if self.keys is not None:
            self.keys.start()

    def stop_keys(self) -> None:
        if self.keys is not None:
            self.keys.stop()
            self.input.type_ahead(self.keys.take_typed())

    def _typed(self) -> str:
        return self.input.pending + (self.keys.preview() if self.keys is not None else "")

    def _before_question(self) -> None:
        self.renderer.stop_live()
        self.stop_keys()  # the question reads the terminal itself

    def _after_question(self) -> None:
        if self._working:
            self.start_keys()

    def keep_result(self, call: ToolCall, result: ToolResult) -> None:
        """A tool ran: its whole output kept for /show, its head and tail on screen."""
        shown = call.id in self.approver.previewed
        self.approver.previewed.discard(call.id)
        kept = self.outputs.keep(result)
        self.pending_lines[call.id] = kept.lines
        self.renderer.tool_result(call, result, diff_shown=shown, output=kept)

    def _call_done(self, call: ToolCall, result: ToolResult) -> None:
        """Every call the model made: those that neither ran nor met the gate are shown here; a
        result's real line count is noted on its message (now the conversation's last)."""
        if call.id in self.pending_lines and self.agent.messages:
            self.outputs_seen.note(self.agent.messages[-1], self.pending_lines.pop(call.id))
        if any(result.data.get(k) for k in ("format_error", "held", "repeated", "stopped")):
            self.renderer.call_not_run(call, result)

    def _before_step(self, step: int) -> None:
        if self.turn_stopped:
            raise TurnStopped("the user declined a call and will say what to do instead")
        self.save()
        self.maybe_compact()

    def _all_edits(self) -> None:
        self.set_mode("auto-edit", quiet=True)
        self.renderer.note(
            "mode: auto-edit · edits are allowed for the rest of this session (Shift+Tab changes it)"
        )

    # ------------------------------------------------------------------ state

    def save(self) -> Path | None:
        """Write the session; one with no request yet is not written (it would be `--resume last`)."""
        return resume.save(self)

    def resume(self, ref: str | None) -> bool:
        try:
            session = resume.find(self, ref)
        except SessionError as exc:
            self.renderer.error(str(exc))
            return False
        if session is None:
            started = any(m.get("role") == "user" for m in self.agent.messages)
            self.renderer.info("no session chosen" + ("" if started else f": a new one ({self.session.id})"))
            return True
        if not resume.confirm_backend(self, session):
            self.renderer.info(f"a new session ({self.session.id}); {session.id} stays saved")
            return True
        resume.restore(self, session)
        return True

    def clear(self) -> None:
        self.save()
        resume.fresh(self)
        self.renderer.note(f"new conversation (session {self.session.id})")

    # ------------------------------------------------------------------ settings

    def switch_model(self, name: str) -> bool:
        return switch_model(self, name)

    def set_think(self, on: bool) -> None:
        self.settings = dataclasses.replace(self.settings, think=on)
        self.model.options = TurnOptions(think=on)  # every later turn asks the backend for it
        self.renderer.note(f"thinking {'on' if on else 'off'}")

    def set_mode(self, mode: str, quiet: bool = False) -> None:
        if mode not in MODES:
            self.renderer.error(f"mode must be one of {', '.join(MODES)}")
            return
        self.settings = dataclasses.replace(self.settings, mode=mode)
        old = self.agent.gate.inner if isinstance(self.agent.gate, ObservedGate) else None
        gate = build_gate(self.settings, self.root, self.approver)
        if old is not None and hasattr(old, "remembered"):
            gate.remembered = list(old.remembered)  # "always" answers last the whole session
        self.agent.gate = ObservedGate(gate, self)
        self.input.mode = mode
        if mode == "yolo" and "yolo" not in self.cycle:
            self.cycle += ("yolo",)
        if not quiet:
            self.renderer.note(f"mode: {mode}")

    def cycle_mode(self) -> str:
        """Shift+Tab at the prompt: the next mode (the line under the prompt says which)."""
        at = self.cycle.index(self.settings.mode) if self.settings.mode in self.cycle else -1
        self.set_mode(self.cycle[(at + 1) % len(self.cycle)], quiet=True)
        return self.settings.mode

    # ------------------------------------------------------------------ context

    def used_tokens(self) -> int:
        return max(self.context_tokens, compaction.estimate_tokens(self.agent.messages))

    def maybe_compact(self) -> None:
        if compaction.should_compact(self.used_tokens(), self.model.context_window):
            self.compact(forced=False)

    def compact(self, forced: bool) -> bool:
        """Summarise the older turns; True when the conversation got smaller."""
        return context.compact(self, forced)

    # ------------------------------------------------------------------ files

    def undo(self, redo: bool, arg: str = "") -> None:
        """/undo, /redo (undo_view.py)."""
        undo_view.undo(self, redo, arg)

    def show_diff(self) -> None:
        undo_view.show_diff(self)

    # ------------------------------------------------------------------ status

    def print_status(self, result: RunResult | None = None, full: bool = False) -> None:
        """One line that fits the terminal (the least needed parts go first); /status adds more."""
        print_status(self, result, full)


def _terminal() -> IO[str] | None:
    """Where the chat draws: stdout, or stderr when stdout is redirected (`clover chat > out.txt`
    must not hide the questions in the file); None without a terminal."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and stream.isatty():
                return stream
        except (AttributeError, ValueError):
            continue
    return None


def _display_name(settings: Settings) -> str:
    if settings.model.startswith("scripted:"):
        return "scripted:" + Path(settings.model[len("scripted:") :]).name
    return settings.model


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
