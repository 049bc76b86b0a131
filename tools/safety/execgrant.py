"""What an approval lets a command start: the grant the permission gate hands the exec check.

An approved line names programs with their arguments (`git status --short`, and under `timeout 60
pytest -q` both `timeout ...` and `pytest -q`). Each becomes a `Template`; a program start is
covered by one when its argv has the template's words: literal words equal, a word only known when
it runs (`$f`, `*.py`) standing for any number of words. The program itself must be the one the
template names as the command's PATH finds it (tools/safety/execpolicy.py checks that).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clover.tools.safety.shellcommand import ParsedShell
from clover.tools.safety.shellwrap import peel

# (argv, why it is asked) -> "yes" | "no" | "always"; called on the thread that runs the command
ExecAsk = Callable[[list[str], str], str]


@dataclass
class Template:
    words: list[str]
    dynamic: list[bool]

    def matches(self, argv: list[str]) -> bool:
        """argv[0] by program name (tools/safety/execpolicy.py checks the file), the rest word by word."""
        if not argv or not self.words:
            return False
        if not self.dynamic[0] and os.path.basename(argv[0]) != os.path.basename(self.words[0]):
            return False
        return _words_match(self.words[1:], self.dynamic[1:], argv[1:])


def _words_match(pattern: list[str], wild: list[bool], words: list[str]) -> bool:
    """Lists matched like a glob: a wild entry stands for any number of words."""
    reach = {0}  # how many words of `words` the prefix of `pattern` so far can consume
    for word, is_wild in zip(pattern, wild, strict=True):
        if is_wild:
            reach = set(range(min(reach), len(words) + 1)) if reach else set()
        else:
            reach = {n + 1 for n in reach if n < len(words) and words[n] == word}
        if not reach:
            return False
    return len(words) in reach


@dataclass
class Grant:
    """`everything`: any program but a denied one (yolo, or code that is not the model's).
    `templates`: the programs the approved line names. `read_only`: plan mode (the read-only
    sandbox, and a program not covered is refused, never asked about). `ask`: how to ask about a
    program not covered (None: refuse it). `policy`/`remembered`: the deny and allow rules and the
    session's approvals (a PermissionPolicy and the gate's live list)."""

    everything: bool = False
    templates: list[Template] = field(default_factory=list)
    read_only: bool = False
    label: str = ""
    ask: ExecAsk | None = None
    policy: Any = None
    remembered: list[Any] = field(default_factory=list)
    helpers: bool = True  # a program's own helpers (/usr/lib/git-core/...) count as covered
    writable: list[str] = field(
        default_factory=list
    )  # where the agent can write (its files are not "installed")


def templates_of(parsed: ParsedShell) -> list[Template]:
    """Every program the line names, at every level of its wrappers."""
    out: list[Template] = []
    for cmd in parsed.commands:
        words = list(cmd.words)
        dyn = list(cmd.word_dynamic) if len(cmd.word_dynamic) == len(words) else [False] * len(words)
        for _ in range(16):
            if not words:
                break
            out.append(Template(words, dyn))
            inner, inner_dyn, wrappers = peel(words, dyn, limit=1)
            if not wrappers or inner == words:
                break
            words, dyn = inner, inner_dyn
    return out


def argv_template(argv: list[str]) -> Template:
    return Template(list(argv), [False] * len(argv))
