"""One permission rule: `bash(git status*)`, `bash(python3 -m pytest:*)`, `edit(*.lock)`, `read(.env)`
or a bare tool name; the exact approvals an "always" answer remembers, and the prefix one offers;
the spellings of a command rules are matched against (wrappers peeled, flag clusters, pipelines).

How a shell rule matches a command's words:
- deny and ask rules (`matches_text`) match generously: every spelling tools/safety/shellparse.py and
  tools/safety/shellnorm.py produce (flag order, synonyms, abbreviations, wrappers peeled), words joined by
  single spaces — more spellings can only refuse more;
- allow rules and remembered approvals (`allows_words`) match exactly: the command's argv as
  bash will pass it, each word quoted as the shell would need it (`ssh devbox touch p` is not
  `ssh devbox\\ntouch p` and not `ssh 'devbox touch p'`). A prefix rule `bash(python3 -m pytest:*)`
  matches commands whose first words are exactly those (Claude Code's form); a glob rule's `*`
  matches any text, `/` and spaces included.
"""

from __future__ import annotations

import os
import re
import shlex
from fnmatch import fnmatchcase
from typing import Any

from clover.core.tool_protocol import ToolKind
from clover.tools.safety.shellcommand import ParsedShell, SimpleCommand
from clover.tools.safety.shellnorm import canonical_argv
from clover.tools.safety.shellparse import parse_shell
from clover.tools.safety.shellproof import literal_proof
from clover.tools.textio import escape_controls

# A rule names a tool, or a kind of them (`Tool.kind`): `bash(...)` (or `shell(...)`) every tool
# that runs commands, `edit(...)` every file edit, `read(...)` the path of every tool that reads
# (the git tool's too).
SHELL_RULES = {"bash", "shell"}
READ_KINDS = ("read", "git")


def kind_of(name: str) -> ToolKind:
    """The kind of the tool a call or rule names, for code that knows only the name."""
    from clover.tools.registry import kind_of as default_kind  # the tools import this module's users

    return default_kind(name)


# A reasonable starting deny list for settings files (the CLI decides whether to use it).
SUGGESTED_DENY = [
    "bash(rm -rf /)",
    "bash(rm -rf /*)",
    "bash(rm -rf ~*)",
    "bash(rm -rf $HOME*)",
    "bash(curl *|*sh)",
    "bash(wget *|*sh)",
    "bash(git push *--force*)",
    "bash(git push -f*)",
    "bash(git push * -f*)",
    "bash(mkfs*)",
    "bash(dd * of=/dev/*)",
    "bash(shutdown*)",
    "bash(reboot*)",
]

_RULE = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*(?:\((.*)\))?\s*$", re.S)
_PLAIN_WORD = re.compile(r"^[\w@%+=:,./*?\[\]{}^~!#-]+$")


def squash(text: str) -> str:
    return " ".join(text.split())


def glob_escape(text: str) -> str:
    """Glob-escape so a remembered exact value matches only itself."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def join_words(words: list[str]) -> str:
    """Words as one line, each quoted only where the shell would need it (a space, a newline, a
    quote or `;` inside a word stays visible as part of that word)."""
    return " ".join(w if w and _PLAIN_WORD.match(w) else shlex.quote(w) for w in words)


def _pattern_text(pattern: str) -> str:
    """A glob pattern in `join_words` form: `echo "a b"*` -> `echo 'a b'*`; glob characters kept."""
    try:
        words = shlex.split(pattern)
    except ValueError:
        return squash(pattern)
    return join_words(words) if words else squash(pattern)


class Rule:
    """One `tool(pattern)` rule; `pattern` None matches every call of the tool."""

    def __init__(self, text: str, literal: str | None = None):
        self.prefix: list[str] | None = None
        self.argv: list[str] | None = None
        self.line: str | None = None
        if literal is not None:  # an exact remembered value (a path, an argument): no glob
            self.text, self.tool, self.pipe, self.literal = text, text.lower(), False, True
            self.pattern = self.canonical = glob_escape(literal)
            return
        m = _RULE.match(text or "")
        if not m:
            raise ValueError(
                f"bad permission rule {text!r}: expected tool or tool(pattern), e.g. bash(git status*)"
            )
        self.text, self.literal = text.strip(), False
        self.tool = m.group(1).lower()
        pattern = m.group(2)
        self.pattern = None if pattern is None or pattern.strip() in ("", "*") else squash(pattern)
        shell = self.pattern is not None and self.tool in SHELL_RULES
        if shell and self.pattern.endswith(":*") and "|" not in self.pattern:  # Claude Code's prefix rule
            try:
                self.prefix = shlex.split(self.pattern[:-2])
            except ValueError:
                raise ValueError(f"bad permission rule {text!r}: unbalanced quotes in the prefix") from None
            if not self.prefix:
                raise ValueError(f"bad permission rule {text!r}: the prefix before :* is empty")
            self.pattern = join_words(self.prefix)
        # `curl *|sh` -> `curl * | sh`, matched against pipelines
        self.pipe = shell and "|" in self.pattern
        if self.pipe:
            self.pattern = re.sub(r"\s*\|\s*", " | ", self.pattern)
        self.exact = _pattern_text(self.pattern) if shell and not self.pipe and self.prefix is None else None
        self.canonical = " ".join(canonical_argv(self.pattern.split(" "))) if shell else self.pattern

    @classmethod
    def exact_argv(cls, tool: str, argv: list[str]) -> Rule:
        """An "always" approval of one command: exactly these words."""
        rule = cls(tool, literal=join_words(argv))
        rule.argv = list(argv)
        return rule

    @classmethod
    def exact_line(cls, tool: str, command: str) -> Rule:
        """An "always" approval of a whole command line, byte for byte (no whitespace folding)."""
        rule = cls(tool, literal=command)
        rule.line = command
        return rule

    @classmethod
    def prefix_rule(cls, tool: str, prefix: list[str]) -> Rule:
        return cls(f"{tool}({join_words(prefix)}:*)")

    def applies_to(self, tool_name: str, kind: ToolKind | None = None) -> bool:
        """Whether this rule covers a call of `tool_name`, a tool of `kind` (default: the kind of
        the default tool of that name)."""
        if self.tool == tool_name:
            return True
        kind = kind_of(tool_name) if kind is None else kind
        if self.tool == "edit":
            return kind == "edit"
        if self.tool == "read":
            return kind in READ_KINDS
        return self.tool in SHELL_RULES and kind == "run"

    def allows_words(self, words: list[str]) -> bool:
        """Allow-side match on a command's exact argv (see the module doc)."""
        if self.pattern is None:
            return True
        if self.line is not None:
            return False  # a whole-line approval matches lines, not commands
        if self.argv is not None:
            return words == self.argv
        if self.prefix is not None:
            return words[: len(self.prefix)] == self.prefix
        if self.pipe or self.exact is None:
            return False
        text = join_words(words)
        return fnmatchcase(text, self.exact) or fnmatchcase(text + " ", self.exact)

    def matches_text(self, text: str, path_like: bool = False, fold: bool = False) -> bool:
        """Generous match on one spelling (deny and ask rules, paths, other tools' arguments)."""
        if self.pattern is None:
            return True
        if self.prefix is not None:
            head = " ".join(self.prefix)
            return any(t == head or t.startswith(head + " ") for t in {text, squash(text)})
        candidates = [text, text + " "]  # `git status *` also covers bare `git status`
        pats = {self.pattern, self.canonical or self.pattern}
        if path_like and not self.literal:
            if "/" not in self.pattern:
                candidates.append(text.rsplit("/", 1)[-1])
            pats = {form for p in pats for form in _zero_dir_forms(p)}
        if fold:
            candidates, pats = [c.casefold() for c in candidates], {p.casefold() for p in pats}
        return any(fnmatchcase(c, p) for c in candidates for p in pats)

    def __repr__(self) -> str:
        return f"Rule({self.text!r})"


_ANY_DIRS = re.compile(r"(?:^|(?<=/))\*\*/")


def _zero_dir_forms(pattern: str) -> set[str]:
    """`pattern` and its forms with any of its `**/` standing for no directory at all, as in
    .gitignore: `**/.env` is also the top-level `.env`, `a/**/b` also `a/b` (fnmatch's `*` already
    stands for one directory or more)."""
    forms, todo = {pattern}, [pattern]
    while todo:
        form = todo.pop()
        for m in _ANY_DIRS.finditer(form):
            shorter = form[: m.start()] + form[m.end() :]
            if shorter not in forms:
                forms.add(shorter)
                todo.append(shorter)
    return forms


# Programs whose first operands name what they do (`git commit`, `npm run test`, `python3 -m pytest`).
_SUBCOMMANDS = {
    "git": 1,
    "npm": 2,
    "pnpm": 2,
    "yarn": 2,
    "cargo": 1,
    "go": 1,
    "docker": 1,
    "kubectl": 1,
    "uv": 2,
    "poetry": 2,
    "pip": 1,
    "pip3": 1,
    "make": 1,
    "dotnet": 1,
    "gradle": 1,
    "mvn": 1,
    "bundle": 2,
    "rake": 1,
    "mix": 1,
    "deno": 1,
    "bun": 2,
    "conda": 1,
    "tox": 0,
    "nox": 0,
}


def command_prefix(words: list[str]) -> list[str]:
    """The words a prefix approval keeps: the program and the words that name the action
    (`python3 -m pytest`, `npm run test`, `git log`, `cargo test`), never an option value or path."""
    if not words or "/" in words[0] and not words[0].startswith("./"):
        return words[:1]
    prog = os.path.basename(words[0])
    if re.fullmatch(r"python[0-9.]*|pypy[0-9.]*", prog) and words[1:2] == ["-m"] and len(words) > 2:
        return words[:3]
    keep = _SUBCOMMANDS.get(prog, 0)
    out = words[:1]
    for word in words[1 : 1 + keep]:
        if word.startswith("-") or "/" in word or "=" in word:
            break
        out.append(word)
    return out


def allow_argvs(cmd: SimpleCommand) -> list[list[str]]:
    """The words an allow rule may match: as written, or with harmless wrappers removed (`timeout
    60 pytest`); environment prefixes stay unless harmless (LANG, TZ, ...; tools/safety/shellnorm.py)."""
    out: list[list[str]] = []
    for words in cmd.allow_words():
        if words not in out:
            out.append(words)
    return out


_SHORT_CLUSTER = re.compile(r"^-[A-Za-z]+$")


def narrowed(form: str, rule: Rule) -> str | None:
    """`prog -abc rest` spelled with the rule's flag cluster when that cluster is a subset of it
    (the cluster follows the program: `rm -fr`, `git push -f`)."""
    if not rule.canonical:
        return None
    want, have = rule.canonical.split(" "), form.split(" ")
    at = next((i for i, w in enumerate(want) if _SHORT_CLUSTER.match(w)), None)
    if at is None or at == 0 or len(have) <= at or want[:at] != have[:at]:
        return None
    if not _SHORT_CLUSTER.match(have[at]) or want[at] == have[at]:
        return None
    if not set(want[at][1:]) <= set(have[at][1:]):
        return None
    return " ".join([*have[:at], want[at], *have[at + 1 :]])


def pipeline_texts(parsed: ParsedShell) -> list[str]:
    """Every contiguous run of 2+ members of every pipeline, in each member's normalized spelling."""
    out = []
    for members in parsed.pipelines:
        spell = [" ".join([os.path.basename(c.argv[0]), *c.argv[1:]]) if c.argv else c.text for c in members]
        for i in range(len(spell)):
            for j in range(i + 2, len(spell) + 1):
                out.append(" | ".join(spell[i:j]))
                out.append(" | ".join(c.text for c in members[i:j]))
    return out


def offered_prefix(tool_name: str, args: dict[str, Any], kind: ToolKind | None = None) -> list[str] | None:
    """The words an approval may offer to allow as a prefix rule ("always allow commands starting
    with `python3 -m pytest`"): only for a line that is one command the parser proves literal."""
    kind = kind_of(tool_name) if kind is None else kind
    if kind != "run" or not isinstance(args, dict):
        return None
    parsed = parse_shell(str(args.get("command", args.get("cmd", "")) or ""))
    if literal_proof(parsed) is not None or len(parsed.commands) != 1 or parsed.commands[0].wrappers:
        return None
    return command_prefix(parsed.commands[0].words) or None


def shell_label(command: str, limit: int = 200) -> str:
    """A command on one line as a terminal will show it: line breaks as `⏎`, controls escaped."""
    return squash(escape_controls(command).replace("\n", " ⏎ "))[:limit]
