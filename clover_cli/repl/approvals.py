"""Approvals: before an edit or a command runs (as the permission mode asks), show the diff or
the command and ask yes / no / always. Edit previews are the edit tool's own dry run (tools/files.py
`plan`), so the user sees exactly what the tool is about to do."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.syntax import Syntax
from rich.text import Text

from clover.core.protocols import Environment, Tool, ToolCall
from clover.tools.permissions import offered_prefix
from clover.tools.permrules import join_words
from clover.tools.textio import escape_controls

ANSWERS = {"y": "yes", "yes": "yes", "n": "no", "no": "no", "a": "always", "always": "always", "p": "prefix"}
QUESTION = "Allow? [y]es / [n]o / [a]lways this session, or say what to do instead: "
_NO_WITH_REASON = re.compile(r"^no?\b[\s,.:;!-]+(?P<rest>\S.*)$", re.I | re.S)


def parse_answer(text: str) -> tuple[str, str] | None:
    """("yes" | "no" | "always", feedback): `n, use pytest -x` and `run only the fast tests` are a no
    with feedback for the model. None: not an answer (ask again)."""
    answer = text.strip()
    if answer.lower() in ANSWERS:
        return ANSWERS[answer.lower()], ""
    m = _NO_WITH_REASON.match(answer)
    if m:
        return "no", m.group("rest").strip()
    if len(answer.split()) >= 2:  # a sentence, not a mistyped letter
        return "no", answer
    return None


def _first(args: dict[str, Any], *names: str) -> Any:
    return next((args[n] for n in names if n in args), None)


def edit_preview(tool: Tool | None, args: dict[str, Any], env: Environment) -> str | None:
    """The diff of the edit `tool` would make: its own dry run (`plan`), so the preview is exactly
    what runs; None when the tool has no dry run or the edit cannot be made (the tool will say why)."""
    plan = getattr(tool, "plan", None)
    if plan is None:
        return None
    try:
        return plan(args, env).diff() or None
    except ValueError:  # EditError: e.g. old_str not found, or found twice
        return None


def command_of(args: dict[str, Any]) -> str | None:
    cmd = _first(args, "command", "cmd", "script")
    return cmd if isinstance(cmd, str) else None


class Approver:
    """The `ask_user(call, tool, preview) -> "yes" | "no" | "always"` callback of the permission gate.
    `ask(question)` reads one answer line (raises EOFError when input is gone)."""

    def __init__(self, console: Console, root: str | Path, ask: Callable[[str], str],
                 env: Environment | None = None) -> None:
        self.console, self.root, self.ask = console, Path(root), ask
        self.env = env  # where edits are planned for the preview (default: the files under root)
        self.before_ask: Callable[[], None] | None = None  # e.g. stop a live display
        self.after_ask: Callable[[], None] | None = None
        self.previewed: set[str] = set()  # ids of calls whose diff the user already saw
        self.always_hint = ""  # what an "always" answer to the coming question would remember
        self.feedback: dict[str, str] = {}  # call id -> what the user said instead of yes

    def _environment(self) -> Environment:
        if self.env is None:
            from clover.tools.environment import LocalEnvironment

            self.env = LocalEnvironment(str(self.root))
        return self.env

    def show(self, call: ToolCall, preview: str, tool: Tool | None = None) -> None:
        diff = edit_preview(tool, call.arguments, self._environment()) if tool is not None else None
        command = command_of(call.arguments)
        if diff:
            self.previewed.add(call.id)
            if self.console.is_terminal:
                self.console.print(Syntax(diff, "diff", theme="ansi_dark", background_color="default"))
            else:
                self.console.print(Text(diff.rstrip("\n")))
        elif command is not None:  # control characters shown as escapes: the preview is what runs
            self.console.print(Syntax(escape_controls(command), "bash", theme="ansi_dark",
                                      background_color="default", word_wrap=True))
        elif preview:
            self.console.print(Text(preview))
        else:
            self.console.print(Text(str(call.arguments)))

    def __call__(self, call: ToolCall, tool: Tool, preview: str = "") -> str:
        if self.before_ask:
            self.before_ask()
        try:
            return self._ask(call, preview, tool)
        finally:
            if self.after_ask:
                self.after_ask()

    def _ask(self, call: ToolCall, preview: str, tool: Tool | None = None) -> str:
        if call.name == "exec":  # a program a running command starts (the exec check asks)
            self.console.print(Text(escape_controls(preview), style="yellow"))
        self.show(call, preview, tool)
        always = "this exact program start" if call.name == "exec" else self.always_hint
        if always:
            self.console.print(Text(f"  [a]lways allows {escape_controls(always)} for the rest of this session",
                                    style="dim"))
        prefix = offered_prefix("bash" if call.name == "exec" else call.name, call.arguments or {})
        if prefix:
            shown = escape_controls(join_words(prefix))
            self.console.print(Text(f"  [p] always allows commands starting with `{shown}`", style="dim"))
        while True:
            try:
                text = self.ask(QUESTION)
            except EOFError:
                self.console.print("no answer (input closed): refused", style="yellow")
                return "no"
            if not text.strip():
                continue
            parsed = parse_answer(text)
            if parsed is not None and parsed[0] == "prefix" and not prefix:
                parsed = None
            if parsed is None:
                self.console.print("please answer y, n or a, or say what to do instead", style="yellow")
                continue
            answer, feedback = parsed
            if feedback:
                self.feedback[call.id] = feedback
            return answer
