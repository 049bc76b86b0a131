"""Completion for the chat prompt: slash commands (and their arguments) at the start of the line,
`@path` mentions anywhere (attach.py attaches them when the message is sent)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

SKIP_DIRS = {".git", "__pycache__", ".venv", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache"}


class ChatCompleter(Completer):
    """`commands`: name -> one-line help; `arguments`: name -> callable returning argument choices."""

    def __init__(
        self,
        root: str | Path,
        commands: dict[str, str],
        arguments: dict[str, Callable[[], Iterable[str]]] | None = None,
    ) -> None:
        self.root = Path(root)
        self.commands = commands
        self.arguments = arguments or {}

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and "\n" not in before:
            name, space, arg = before.partition(" ")
            if not space:
                for cmd, help_text in sorted(self.commands.items()):
                    if cmd.startswith(name[1:]):
                        yield Completion("/" + cmd, start_position=-len(name), display_meta=help_text)
                return
            choices = self.arguments.get(name[1:])
            if choices is not None and " " not in arg:
                for choice in choices():
                    if choice.startswith(arg):
                        yield Completion(choice, start_position=-len(arg))
                return
        word = before.split()[-1] if before and not before[-1].isspace() else ""
        if word.startswith("@"):
            yield from self._paths(word[1:])

    def _paths(self, partial: str) -> Iterable[Completion]:
        head, _, prefix = partial.rpartition("/")
        directory = self.root / head if head else self.root
        try:
            base = directory.resolve()
            if base != self.root.resolve() and self.root.resolve() not in base.parents:
                return
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if not entry.name.startswith(prefix) or entry.name in SKIP_DIRS:
                continue
            if entry.name.startswith(".") and not prefix.startswith("."):
                continue
            is_dir = entry.is_dir()
            text = (head + "/" if head else "") + entry.name + ("/" if is_dir else "")
            yield Completion(text, start_position=-len(partial), display=entry.name + ("/" if is_dir else ""))
