"""`clover chat`: read a message, run the agent on it with streamed rendering and approvals, keep
the session saved, repeat. Slash commands live in slash.py, rendering in render.py, the observed
model and gate in observed.py, the headless one-shot in headless.py."""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from pathlib import Path
from typing import IO, Any

from rich.console import Console

from clover.agent import Agent, RunResult
from clover.cli_common import state_dir
from clover.core.protocols import Message, Model, ModelError, ToolCall, ToolResult, TurnOptions
from clover.prompts import project_instructions, system_prompt
from clover.repl import compaction
from clover.repl.approvals import Approver
from clover.repl.completion import ChatCompleter, expand_mentions
from clover.repl.input import ChatInput
from clover.repl.keys import EscWatch
from clover.repl.observed import ObservedGate, ObservedModel
from clover.repl.render import Renderer, make_console
from clover.repl.replay import is_request, replay
from clover.repl.sessions import Session, SessionError, SessionStore, new_session_id
from clover.repl.slash import dispatch, help_texts
from clover.repl.status import Totals, run_parts
from clover.runner import build_agent, build_environment, build_gate, build_model
from clover.settings import MODES, Settings


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
        self.tty = (sys.stdin.isatty() and sys.stdout.isatty()) if tty is None else tty
        self.console = console or make_console(self.tty)
        self.renderer = Renderer(self.console, live=live and settings.live and self.tty)
        self.home = state_dir()
        self.store = SessionStore(self.home / "sessions")
        self.session = Session(new_session_id(), str(self.root), settings.model, settings.mode)
        self.context_tokens = 0
        self.current_request = ""
        commands = help_texts()
        completer = ChatCompleter(
            self.root, commands,
            {"mode": lambda: MODES, "think": lambda: ("on", "off"), "resume": self.store.ids},
        )
        self.input = ChatInput(
            self.home / "history", completer, tty=self.tty, stdin=stdin,
            echo=None if self.tty else self.console.file, session_kwargs=input_kwargs,
        )
        self.approver = Approver(self.console, self.root, self.input.ask)
        self.approver.before_ask, self.approver.after_ask = self._before_question, self._after_question
        # Esc interrupts like Ctrl-C while the agent works (a real terminal only, not a test's pipe).
        self.keys = EscWatch() if self.tty and input_kwargs is None else None
        self._working = False
        self.env = build_environment(settings, self.root)
        self.approver.env = self.env  # edit previews are planned where the edits run
        if hasattr(self.env, "on_output"):
            self.env.on_output = self.renderer.tool_output  # a running command's tail under its spinner
        self.default_model = model is None and settings.model == "embedded" and not settings.base_url
        self.totals = Totals()
        if self.tty:  # at once, before a local model's weights load (seconds of a blank screen)
            self.banner(_display_name(settings) if model is None else str(getattr(model, "name", "")))
        self.model = ObservedModel(model if model is not None else self._load(settings), self)
        self.recorder = self._recorder()
        self.agent: Agent = build_agent(
            settings, self.env, kind="chat", model=self.model, ask_user=self.approver,
            before_step=self._before_step, on_tool_result=self._tool_result, recorder=self.recorder,
        )
        self.agent.gate = ObservedGate(self.agent.gate, self)
        self.baseline = self._worktree()

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

    def _worktree(self) -> str | None:
        from clover.gitdiff import is_git_repo, worktree_tree

        try:
            return worktree_tree(self.root) if is_git_repo(self.root) else None
        except RuntimeError:
            return None

    def model_name(self) -> str:
        return self.model.name

    def _load(self, settings: Settings) -> Model:
        """Build the model; a local one loads under a spinner that says so."""
        local = not settings.base_url and not settings.model.startswith("scripted:")
        if not (local and self.tty):
            return build_model(settings)
        started = time.monotonic()
        with self.console.status(f"loading {_display_name(settings)}…", spinner="dots"):
            model = build_model(settings)
        self.renderer.info(f"model loaded in {time.monotonic() - started:.1f}s")
        return model

    # ------------------------------------------------------------------ the loop

    def banner(self, name: str) -> None:
        if self.default_model:
            name += " (the built-in tiny Clover; --model / --base-url pick another)"
        self.renderer.note(f"Clover chat · model {name} · mode {self.settings.mode} · {self.root}")
        self.renderer.info("/help for commands · Enter sends · Alt-Enter adds a line · Ctrl-D exits")

    def run(self, resume: str | None = None) -> int:
        """The prompt loop; `resume` (an id, '' or 'last') continues a saved session first."""
        if resume is not None and not self.resume(resume):
            return 2
        armed = False  # a first Ctrl-C at an empty prompt arms the exit
        while True:
            try:
                text = self.input.read()
            except EOFError:
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
                self.ask(text)
            except KeyboardInterrupt:
                self.renderer.stop_live()
                self.renderer.note("interrupted")
        self.save()
        self.renderer.info(f"session {self.session.id} saved · clover chat --resume {self.session.id}")
        return 0

    def ask(self, text: str) -> RunResult | None:
        self._working = True
        if self.keys is not None:  # from the start: keys typed from now on are not echoed mid-output
            self.keys.start()
        message, added = expand_mentions(text, self.root)
        for rel in added:
            self.renderer.info(f"added @{rel} to the context")
        if self.recorder is not None:  # this request's steps are one undo
            self.recorder.session = self.session.id
            self.recorder.start_request(text[:70])
        self.current_request = text
        try:
            result = self._run_agent(message)
            self.totals.add(result)
            if result.exit_status == "interrupted":
                self.renderer.note("⏹ interrupted: back at the prompt, the conversation is kept")
            elif result.exit_status != "submitted":
                self.renderer.error(f"{result.exit_status}: {result.error}")
            self.print_status(result=result)
        finally:  # only now: keys typed meanwhile are not echoed into the output above
            self._working = False
            if self.keys is not None:
                self.keys.stop()
                self.input.type_ahead(self.keys.take_typed())
        return result

    def _run_agent(self, message: str) -> RunResult:
        try:
            self.maybe_compact()
            return self.agent.run(message)
        except KeyboardInterrupt:  # landed outside the agent's own handler
            return RunResult("interrupted", error="interrupted by the user")
        finally:
            self.renderer.stop_live()
            _repair(self.agent.messages)
            self.save()

    def _before_question(self) -> None:
        self.renderer.stop_live()
        if self.keys is not None:
            self.keys.stop()  # the question reads the terminal itself
            self.input.type_ahead(self.keys.take_typed())

    def _after_question(self) -> None:
        if self.keys is not None and self._working:
            self.keys.start()

    def _tool_result(self, call: ToolCall, result: ToolResult) -> None:
        shown = call.id in self.approver.previewed
        self.approver.previewed.discard(call.id)
        self.renderer.tool_result(call, result, diff_shown=shown)

    def _before_step(self, step: int) -> None:
        self.save()
        self.maybe_compact()

    # ------------------------------------------------------------------ state

    def save(self) -> Path:
        """Write the session; one with no request yet is not written (it would be `--resume last`)."""
        if not any(m.get("role") == "user" for m in self.agent.messages):
            return self.store.path(self.session.id)
        self.session.messages = self.agent.messages
        self.session.model, self.session.mode = self.model_name(), self.settings.mode
        try:
            return self.store.save(self.session)
        except OSError as exc:
            self.renderer.error(f"could not save the session: {exc}")
            return self.store.path(self.session.id)

    def resume(self, ref: str | None) -> bool:
        try:
            session = self.store.resolve(ref, str(self.root))
        except SessionError as exc:
            self.renderer.error(str(exc))
            return False
        messages = list(session.messages)
        if messages and messages[0].get("role") == "system":
            messages = messages[1:]  # the system prompt is rebuilt: AGENTS.md may have changed
        self.agent.messages[:] = [{"role": "system", "content": system_prompt(self.root, "chat")}, *messages]
        self.session = session
        requests = [m for m in messages if is_request(m)]
        self.renderer.note(f"resumed session {session.id} ({len(requests)} request{'s' if len(requests) != 1 else ''})")
        replay(self.renderer, messages)
        return True

    def clear(self) -> None:
        self.save()
        self.agent.messages[:] = [{"role": "system", "content": system_prompt(self.root, "chat")}]
        self.session = Session(new_session_id(), str(self.root), self.settings.model, self.settings.mode)
        self.context_tokens = 0
        self.renderer.note(f"new conversation (session {self.session.id})")

    # ------------------------------------------------------------------ settings

    def switch_model(self, name: str) -> None:
        settings = dataclasses.replace(self.settings, model=name)
        served = self._served_models(settings)
        if served and name not in served:
            shown = ", ".join(served[:8]) + (", …" if len(served) > 8 else "")
            self.renderer.error(f"cannot switch to {name}: the server at {settings.base_url} serves {shown}")
            return
        try:
            self.model.inner = build_model(settings)
        except (ModelError, Exception) as exc:  # a bad name must not end the chat
            self.renderer.error(f"cannot switch to {name}: {exc}")
            return
        self.settings = settings
        self.renderer.note(f"model: {self.model_name()}")

    def _served_models(self, settings: Settings) -> list[str] | None:
        """What the OpenAI-compatible server lists (None: no server, or it does not say)."""
        if not settings.base_url:
            return None
        lister = getattr(self.model.inner, "served_models", None)
        return (lister() or None) if lister is not None else None

    def set_think(self, on: bool) -> None:
        self.settings = dataclasses.replace(self.settings, think=on)
        self.model.options = TurnOptions(think=on)  # every later turn asks the backend for it
        self.renderer.note(f"thinking {'on' if on else 'off'}")

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            self.renderer.error(f"mode must be one of {', '.join(MODES)}")
            return
        self.settings = dataclasses.replace(self.settings, mode=mode)
        old = self.agent.gate.inner if isinstance(self.agent.gate, ObservedGate) else None
        gate = build_gate(self.settings, self.root, self.approver)
        if old is not None and hasattr(old, "remembered"):
            gate.remembered = list(old.remembered)  # "always" answers last the whole session
        self.agent.gate = ObservedGate(gate, self)
        self.renderer.note(f"mode: {mode}")

    # ------------------------------------------------------------------ context

    def used_tokens(self) -> int:
        return max(self.context_tokens, compaction.estimate_tokens(self.agent.messages))

    def maybe_compact(self) -> None:
        if compaction.should_compact(self.used_tokens(), self.model.context_window):
            self.compact(forced=False)

    def compact(self, forced: bool) -> bool:
        """Summarise the older turns; True when the conversation got smaller."""
        window = self.model.context_window
        changed = _git_status(self.root)
        state = compaction.task_state(self.current_request, changed)
        self.renderer.begin_progress("compacting: the model summarises the older turns")
        try:
            done = compaction.compact(
                self.agent.messages, self.model.inner, system_prompt=system_prompt(self.root, "chat"),
                task_state=state, window=window, keep_tokens=0 if forced else None,
                on_event=self.renderer.on_event,
            )
        except KeyboardInterrupt:
            self.renderer.stop_live()
            self.renderer.note("compaction interrupted; the conversation is unchanged")
            return False
        finally:
            self.renderer.stop_live()
        if done is None:
            self.renderer.info("nothing to compact yet")
            return False
        sizes = f"~{done.before_tokens:,} → ~{done.after_tokens:,} tokens"
        if not done.applied:
            self.renderer.warn(f"compaction would not shrink the conversation ({sizes}); it is unchanged")
            return False
        self.context_tokens = 0
        how = "a summary by the model" if done.by_model else "a list of the earlier requests"
        instructions = re.search(r"# Project instructions \((\S+)\)", project_instructions(self.root))
        kept = f"{instructions.group(1)} and the task" if instructions else "the task"
        self.renderer.note(f"⟳ context compacted: {done.removed} older messages → {how} ({sizes}; {kept} re-injected)")
        self.save()
        return True

    # ------------------------------------------------------------------ files

    def undo(self, redo: bool, arg: str = "") -> None:
        """/undo, /redo: this session's latest request, exactly what its steps changed; the plan is
        shown first and, on a terminal, confirmed. `arg`: `force` also overwrites paths changed
        since (the user's version saved first), `yes` does not ask."""
        from clover.tools import undoreport
        from clover.tools.checkpoints import SnapshotError

        if self.recorder is None:
            self.renderer.error("checkpoints are off or unavailable here")
            return
        words, store = set(arg.split()), self.recorder.checkpoints
        force = "force" in words
        try:
            group, plan = store.plan(redo=redo, session=self.session.id, force=force)
        except SnapshotError as exc:
            self.renderer.error(f"{exc} (clover undo --list shows every session's requests)"
                                if "nothing" in str(exc) else str(exc))
            return
        for line in undoreport.describe(store.repo, group, plan):
            self.renderer.info(line)
        if not (plan.actions or plan.moves or plan.settled):
            self.renderer.error("nothing can be done: every path conflicts")
            return
        if self.tty and "yes" not in words:
            try:
                answer = self.input.ask(f"{'Redo' if redo else 'Undo'} this? [y/N] ")
            except (EOFError, KeyboardInterrupt):
                answer = ""
            if answer.strip().lower() not in ("y", "yes"):
                self.renderer.info("nothing was done")
                return
        try:
            _group, outcome = store.apply(plan, session=self.session.id, force=force)
        except (SnapshotError, OSError) as exc:
            self.renderer.error(str(exc))
            return
        lines = undoreport.summary(outcome, redo)
        self.renderer.note(("↷ " if redo else "↶ ") + lines[0] + f" (request {group.request}: {group.label})")
        for line in lines[1:]:
            self.renderer.info(line)

    def show_diff(self) -> None:
        from clover.gitdiff import diff_trees

        if self.baseline is None:
            self.renderer.error("/diff needs a git repository")
            return
        now = self._worktree()
        diff = diff_trees(self.root, self.baseline, now) if now else ""
        if not diff.strip():
            self.renderer.info("no changes in this session")
            return
        self.renderer.diff(diff)

    # ------------------------------------------------------------------ status

    def print_status(self, result: RunResult | None = None, full: bool = False) -> None:
        parts = [self.model_name(), self.settings.mode]
        window = self.model.context_window
        if result is not None:
            parts += run_parts(result)
        if window:
            parts.append(f"ctx {self.used_tokens() / window:.0%} of {window:,}")
        if full:
            parts += [f"think {'on' if self.settings.think else 'off'}", f"session {self.session.id}"]
        self.renderer.status(" · ".join(parts))
        if full:
            self.renderer.status(self.totals.line())


def _display_name(settings: Settings) -> str:
    if settings.model.startswith("scripted:"):
        return "scripted:" + Path(settings.model[len("scripted:") :]).name
    return settings.model


def _repair(messages: list[Message]) -> None:
    """After an interruption every tool call of the last assistant turn must have its answer."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            wanted = [c.get("id") for c in messages[i].get("tool_calls") or []]
            have = {m.get("tool_call_id") for m in messages[i + 1 :] if m.get("role") == "tool"}
            for j, call in enumerate(messages[i].get("tool_calls") or []):
                if wanted[j] not in have:
                    messages.append({"role": "tool", "tool_call_id": wanted[j],
                                     "name": call.get("function", {}).get("name", ""),
                                     "content": "not run: interrupted by the user"})
            return


def _git_status(root: Path) -> str:
    from clover.tools.hostgit import HostGitError, status_short

    try:  # libgit2: nothing planted in .git/config runs
        return status_short(root).split("\n", 1)[1]
    except (HostGitError, OSError, IndexError):
        return ""


def run_chat(settings: Settings, root: Path, resume: str | None = None, live: bool = True) -> int:
    """The `clover chat` entry: returns the exit code. `resume`: a session id, '' or 'last'."""
    try:
        app = ChatApp(settings, root, live=live)
    except (ModelError, ValueError, OSError) as exc:  # bad model, permission rule or directory
        print(f"clover: {exc}", file=sys.stderr)
        return 2
    return app.run(resume=resume)
