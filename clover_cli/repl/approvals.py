"""Approvals: before an edit or a command runs (as the permission mode asks), show the diff or
the command and ask yes / no / always. Edit previews are computed here from the file's current
content and the call's arguments, so the user sees exactly what the tool is about to do."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.syntax import Syntax
from rich.text import Text

from clover.core.protocols import Tool, ToolCall

ANSWERS = {"y": "yes", "yes": "yes", "n": "no", "no": "no", "a": "always", "always": "always"}
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


def _read(root: Path, rel: str) -> str | None:
    try:
        path = (root / rel).resolve()
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
    except OSError:
        return None


def edit_preview(name: str, args: dict[str, Any], root: str | Path) -> str | None:
    """A unified diff of what str_replace / create / insert (or similar) would do, or None."""
    rel = _first(args, "path", "file_path", "file")
    if not isinstance(rel, str) or not rel:
        return None
    root = Path(root)
    old = _read(root, rel)
    new: str | None = None
    if name in ("str_replace", "edit", "replace"):
        old_str, new_str = _first(args, "old_str", "old"), _first(args, "new_str", "new")
        if old is None or not isinstance(old_str, str) or not isinstance(new_str, str) or old_str not in old:
            return None
        new = old.replace(old_str, new_str) if args.get("replace_all") else old.replace(old_str, new_str, 1)
    elif name in ("create", "write", "write_file"):
        content = _first(args, "file_text", "content", "text")
        if not isinstance(content, str):
            return None
        new = content
    elif name == "insert":
        text = _first(args, "new_str", "text", "insert_text", "content")
        line = _first(args, "insert_line", "line", "line_number")
        if old is None or not isinstance(text, str) or not isinstance(line, int):
            return None
        lines = old.splitlines(keepends=True)
        if not 0 <= line <= len(lines):
            return None
        if lines and not lines[-1].endswith("\n") and line == len(lines):
            lines[-1] += "\n"
        new = "".join(lines[:line]) + (text if text.endswith("\n") else text + "\n") + "".join(lines[line:])
    if new is None:
        return None
    diff = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{rel}" if old is not None else "/dev/null",
        tofile=f"b/{rel}",
    )
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff)
    return text or None


def command_of(args: dict[str, Any]) -> str | None:
    cmd = _first(args, "command", "cmd", "script")
    return cmd if isinstance(cmd, str) else None


class Approver:
    """The `ask_user(call, tool, preview) -> "yes" | "no" | "always"` callback of the permission gate.
    `ask(question)` reads one answer line (raises EOFError when input is gone)."""

    def __init__(self, console: Console, root: str | Path, ask: Callable[[str], str]) -> None:
        self.console, self.root, self.ask = console, Path(root), ask
        self.before_ask: Callable[[], None] | None = None  # e.g. stop a live display
        self.after_ask: Callable[[], None] | None = None
        self.previewed: set[str] = set()  # ids of calls whose diff the user already saw
        self.always_hint = ""  # what an "always" answer to the coming question would remember
        self.feedback: dict[str, str] = {}  # call id -> what the user said instead of yes

    def show(self, call: ToolCall, preview: str) -> None:
        diff = edit_preview(call.name, call.arguments, self.root)
        command = command_of(call.arguments)
        if diff:
            self.previewed.add(call.id)
            if self.console.is_terminal:
                self.console.print(Syntax(diff, "diff", theme="ansi_dark", background_color="default"))
            else:
                self.console.print(Text(diff.rstrip("\n")))
        elif command is not None:
            self.console.print(Syntax(command, "bash", theme="ansi_dark", background_color="default",
                                      word_wrap=True))
        elif preview:
            self.console.print(Text(preview))
        else:
            self.console.print(Text(str(call.arguments)))

    def __call__(self, call: ToolCall, tool: Tool, preview: str = "") -> str:
        if self.before_ask:
            self.before_ask()
        try:
            return self._ask(call, preview)
        finally:
            if self.after_ask:
                self.after_ask()

    def _ask(self, call: ToolCall, preview: str) -> str:
        self.show(call, preview)
        if self.always_hint:
            self.console.print(Text(f"  [a]lways allows {self.always_hint} for the rest of this session", style="dim"))
        while True:
            try:
                text = self.ask(QUESTION)
            except EOFError:
                self.console.print("no answer (input closed): refused", style="yellow")
                return "no"
            if not text.strip():
                continue
            parsed = parse_answer(text)
            if parsed is None:
                self.console.print("please answer y, n or a, or say what to do instead", style="yellow")
                continue
            answer, feedback = parsed
            if feedback:
                self.feedback[call.id] = feedback
            return answer
