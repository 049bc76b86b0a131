"""Approvals: before an edit or a command runs (as the permission mode asks), show the diff or the
command and ask. On a terminal one key answers, as in Claude Code: `y` yes, `a` yes and don't ask
again (for an edit: all edits this session, i.e. auto-edit), `n` or Esc no, and the turn stops so the
user can say what to do instead. A key answers only as the first key typed at the question; any
other text typed there (menu.approve) is the reply: a no that tells the model what to do, and the
turn goes on with it. Without a terminal an answer line is read the same way (`n, use pytest -x`).
Edit previews are the edit tool's own dry run (tools/files.py `plan`), so the user sees exactly what
the tool is about to do; they, and commands, are shown with their control characters as escapes and
long lines wrapped (toolview.diff_view)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.syntax import Syntax
from rich.text import Text

from clover.core.environment_protocol import Environment
from clover.core.model_protocol import ToolCall
from clover.core.tool_protocol import Tool
from clover.repl.menu import TYPED, Option
from clover.repl.toolview import diff_view
from clover.terminal_text import visible
from clover.tools.safety.permissions import offered_prefix
from clover.tools.safety.permrules import join_words

YES, ALWAYS, ALL_EDITS, PREFIX, NO = "yes", "always", "all-edits", "prefix", "no"
QUESTION = "Allow? [y]es / [n]o / [a]lways this session, or say what to do instead: "
WORDS = {"y": YES, "yes": YES, "n": NO, "no": NO, "a": ALWAYS, "always": ALWAYS, "p": PREFIX}
_NO_WITH_REASON = re.compile(r"^no?\b[\s,.:;!-]+(?P<rest>\S.*)$", re.I | re.S)
Menu = Callable[[str, Sequence[Option], str], tuple[str, str]]  # (value, "") or (TYPED, the reply)


def parse_answer(text: str) -> tuple[str, str] | None:
    """("yes" | "no" | "always" | "prefix", feedback): `n, use pytest -x` and `run only the fast tests` are a no
    with feedback for the model. None: not an answer (ask again)."""
    answer = text.strip()
    if answer.lower() in WORDS:
        return WORDS[answer.lower()], ""
    m = _NO_WITH_REASON.match(answer)
    if m:
        return NO, m.group("rest").strip()
    if len(answer.split()) >= 2:  # a sentence, not a mistyped letter
        return NO, answer
    return None


def typed_reply(text: str, options: Sequence[Option]) -> tuple[str, str]:
    """What a reply typed at the menu means: a word naming one of its answers (`yes`, `always`), or
    else a no with the user's words for the model (a single word too: it was typed, not a key)."""
    values = [o.value for o in options]
    parsed = parse_answer(text)
    if parsed is not None:
        answer, feedback = parsed
        answer = values[1] if answer == ALWAYS else answer
        if answer in values:
            return answer, feedback
    return NO, text.strip()


def _fit(text: str, room: int) -> str:
    return text if len(text) <= room else text[: room - 1] + "…"


def options_for(
    tool: Tool | None, always_hint: str, width: int = 100, all_edits: bool = True, prefix: str = ""
) -> list[Option]:
    """The menu. For a file edit "always" is every edit this session (Claude Code's choice: asking
    file by file is what the user wants to stop) where the mode is what asked (`all_edits`; an ask
    rule asks in auto-edit too); otherwise what `always_hint` names (cut to fit one line of `width`:
    /permissions lists it whole afterwards). `prefix`: the leading words of a command the parser
    proved literal, offered as a `bash(prefix:*)` rule."""
    if all_edits and tool is not None and tool.kind == "edit":
        always = Option(ALL_EDITS, "Yes, and allow all edits this session", ("a",))
    else:
        room = max(width - 60, 16)  # the rest of the row: its number, the words, the key
        hint = _fit(always_hint, room)
        what = f" for {hint}" if hint else ""
        always = Option(ALWAYS, f"Yes, and don't ask again{what} this session", ("a",))
    options = [Option(YES, "Yes", ("y",)), always]
    if prefix:
        shown = _fit(prefix, max(width - 70, 16))
        options.append(
            Option(PREFIX, f"Yes, and allow commands starting with `{shown}` this session", ("p",))
        )
    return options + [Option(NO, "No, and tell Clover what to do instead", ("n",))]


def _first(args: dict[str, Any], *names: str) -> Any:
    return next((args[n] for n in names if n in args), None)


def edit_preview(tool: Tool | None, args: dict[str, Any], env: Environment) -> str | None:
    """The diff of the edit `tool` would make: its own dry run (`Tool.preview`), so the preview is exactly
    what runs; None when the tool has no dry run or the edit cannot be made (the tool will say why)."""
    return tool.preview(args, env) if tool is not None else None


def command_of(args: dict[str, Any]) -> str | None:
    cmd = _first(args, "command", "cmd", "script")
    return cmd if isinstance(cmd, str) else None


class Approver:
    """The `ask_user(call, tool, preview) -> "yes" | "no" | "always"` callback of the permission gate.
    `ask(question)` reads one answer line (raises EOFError when input is gone); `menu`, on a terminal,
    asks with one key instead. After a plain no, `stopped` is set: the chat ends the turn there."""

    def __init__(
        self,
        console: Console,
        root: str | Path,
        ask: Callable[[str], str],
        env: Environment | None = None,
        menu: Menu | None = None,
    ) -> None:
        self.console, self.root, self.ask, self.menu = console, Path(root), ask, menu
        self.env = env  # where edits are planned for the preview (default: the files under root)
        self.before_ask: Callable[[], None] | None = None  # e.g. stop a live display
        self.after_ask: Callable[[], None] | None = None
        self.on_all_edits: Callable[[], None] | None = None  # "all edits this session": the chat's auto-edit
        self.previewed: set[str] = set()  # ids of calls whose diff the user already saw
        self.always_hint = ""  # what an "always" answer to the coming question would remember
        self.call_shown = ""  # the call as its ⏺ line showed it (a command shown whole is not repeated)
        self.feedback: dict[str, str] = {}  # call id -> what the user said instead of yes
        self.stopped = False  # a plain no: the turn stops and the user says what to do instead
        self.all_edits = True  # "always" on an edit may mean all edits (the mode asked, not a rule)
        self.closed = False  # Ctrl-D (or the end of input) at a question: the chat leaves after the turn

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
            self.console.print(
                diff_view(diff, self.console.is_terminal), soft_wrap=not self.console.is_terminal
            )
        elif command is not None:
            shown = visible(command)  # control characters as escapes: the preview is what runs
            if shown.strip() not in self.call_shown:  # the ⏺ line cut it: show it whole
                if self.console.is_terminal:
                    self.console.print(
                        Syntax(shown, "bash", theme="ansi_dark", background_color="default", word_wrap=True)
                    )
                else:
                    self.console.print(Text(shown), soft_wrap=True)
        elif preview:
            self.console.print(Text(visible(preview)))
        else:
            self.console.print(Text(visible(str(call.arguments))))

    def __call__(self, call: ToolCall, tool: Tool, preview: str = "") -> str:
        if self.before_ask:
            self.before_ask()
        try:
            return self._ask(call, preview, tool)
        finally:
            if self.after_ask:
                self.after_ask()

    def _ask(self, call: ToolCall, preview: str, tool: Tool | None = None) -> str:
        exec_start = call.name == "exec"  # a program a running command starts (the exec check asks)
        held = call.name == "apply_change"  # a change a command made, held by the step boundary
        if exec_start or held:
            self.console.print(Text(visible(preview), style="yellow"))
        if not held:  # the held change's line above is all there is to show
            self.show(call, preview, tool)
        words = offered_prefix("bash" if exec_start else call.name, call.arguments or {})
        prefix = visible(join_words(words)) if words else ""
        if exec_start:
            self.always_hint = "this exact program start"
        if held:
            self.always_hint = f"changes to {(call.arguments or {}).get('path', 'this path')}"
        try:
            answer, feedback = self._answer(tool, prefix)
        except EOFError:
            self.console.print("no answer (input closed): refused", style="yellow")
            self.stopped = self.closed = True
            return NO
        if feedback:
            self.feedback[call.id] = feedback
        elif answer == NO:
            self.stopped = True
        if answer == ALL_EDITS:
            if self.on_all_edits is not None:
                self.on_all_edits()
            return YES
        if answer == ALWAYS and self.menu is not None and self.always_hint:
            self.console.print(
                Text(f"  allowed for the rest of this session: {visible(self.always_hint)}", style="dim")
            )
        return answer

    def _answer(self, tool: Tool | None, prefix: str = "") -> tuple[str, str]:
        options = options_for(tool, self.always_hint, self.console.width, self.all_edits, prefix)
        if self.menu is not None:
            what = "edit" if tool is not None and tool.kind == "edit" else "call"
            title = (
                "Apply this change?"
                if tool is not None and tool.name == "apply_change"
                else f"Allow this {what}?"
            )
            value, text = self.menu(title, options, NO)
            return typed_reply(text, options) if value == TYPED else (value, "")
        if options[1].value == ALL_EDITS:
            self.console.print(
                Text("  [a]lways allows all edits for the rest of this session (auto-edit)", style="dim")
            )
        elif self.always_hint:
            self.console.print(
                Text(
                    f"  [a]lways allows {visible(self.always_hint)} for the rest of this session",
                    style="dim",
                )
            )
        if prefix:
            self.console.print(Text(f"  [p] always allows commands starting with `{prefix}`", style="dim"))
        while True:
            text = self.ask(QUESTION)
            if not text.strip():
                continue
            parsed = parse_answer(text)
            if parsed is not None and parsed[0] == PREFIX and not prefix:
                parsed = None
            if parsed is None:
                self.console.print("please answer y, n or a, or say what to do instead", style="yellow")
                continue
            answer, feedback = parsed
            return (options[1].value if answer == ALWAYS else answer), feedback
