"""The gate the agent loop calls before every tool call: mode + allow/ask/deny rules -> decision.

Rules look like `bash(git status*)`, `edit(*.lock)`, `read(.env)` or a bare tool name (`bash`).
Patterns are shell-style globs (`*` also matches `/` and spaces). Deny beats ask beats allow.

- `bash(...)` is tried against every sub-command of the line (see tools/shellparse.py); a pattern
  containing `|` is tried against pipelines (`bash(curl *|*sh)`). Deny rules see every spelling
  (`/bin/rm`, `sudo rm`, `rm t -r -f` = `rm -fr t`, `-r{f,}`; tools/shellnorm.py); allow rules need
  every sub-command to match and never apply to a line that did not parse or runs code we cannot
  see (`$CMD`, `curl | sh`, an alias; `ParsedShell.undecidable`). Where deny rules exist and a line
  cannot be proven not to match one (`_undecided`), yolo refuses it and the other modes ask.
- Plan mode refuses everything but read-only tools; ask and allow rules do not change that.
- `edit(...)` matches the path of `create`, `str_replace` and `insert` (and a pattern without `/`
  also matches the file name at any depth, as in .gitignore); `read(...)` the path of `view`,
  `grep`, `glob`, `outline` and `git` (and `git show REV:PATH`), and lines from a denied file are
  left out of their results (a git diff loses that file's sections). Both
  see the path as given and resolved (a symlink to a protected file is protected). Read rules do
  not reach the shell (`cat .env`): deny that with a `bash(...)` rule or the sandbox.
- Any other tool matches `tool(...)` against its main argument (the first required string).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase
from typing import Any, Literal

from clover.core.protocols import MODES, Tool, ToolCall
from clover.tools.shellnorm import canonical_argv, glob_prefix_feasible
from clover.tools.shellparse import ParsedShell, parse_shell

Decision = Literal["allow", "ask", "deny"]
Answer = Literal["yes", "no", "always"]
AskUser = Callable[[ToolCall, Tool, str], Answer]

_MODE_ALIASES = {"auto_edit": "auto-edit", "autoedit": "auto-edit", "accept-edits": "auto-edit",
                 "default": "ask", "bypass": "yolo"}
SHELL_TOOLS = {"bash", "shell"}
EDIT_TOOLS = {"create", "str_replace", "insert"}
READ_TOOLS = {"view", "grep", "glob", "outline", "git"}  # what `read(...)` rules cover (their `path`)
_RULE = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*(?:\((.*)\))?\s*$", re.S)
_MAIN_ARG_KEYS = ("command", "subcommand", "pattern", "query", "url", "path", "file", "name")
_PATH_KEYS = ("path", "file", "file_path", "filename")

# A reasonable starting deny list for settings files (the CLI decides whether to use it).
SUGGESTED_DENY = [
    "bash(rm -rf /)", "bash(rm -rf /*)", "bash(rm -rf ~*)", "bash(rm -rf $HOME*)",
    "bash(curl *|*sh)", "bash(wget *|*sh)", "bash(git push *--force*)", "bash(git push -f*)",
    "bash(git push * -f*)", "bash(mkfs*)", "bash(dd * of=/dev/*)", "bash(shutdown*)", "bash(reboot*)",
]


class Rule:
    """One `tool(pattern)` rule; `pattern` None matches every call of the tool."""

    def __init__(self, text: str, literal: str | None = None):
        if literal is not None:  # an exact remembered value: no glob, no pipeline handling
            self.text, self.tool, self.pipe, self.literal = text, text.lower(), False, True
            self.pattern = self.canonical = _escape(literal)
            return
        m = _RULE.match(text or "")
        if not m:
            raise ValueError(f"bad permission rule {text!r}: expected tool or tool(pattern), e.g. bash(git status*)")
        self.text, self.literal = text.strip(), False
        self.tool = m.group(1).lower()
        pattern = m.group(2)
        self.pattern = None if pattern is None or pattern.strip() in ("", "*") else _squash(pattern)
        # `curl *|sh` -> `curl * | sh`, matched against pipelines
        self.pipe = self.pattern is not None and "|" in self.pattern and self.tool in SHELL_TOOLS
        if self.pipe:
            self.pattern = re.sub(r"\s*\|\s*", " | ", self.pattern)
        shell = self.pattern is not None and self.tool in SHELL_TOOLS
        self.canonical = " ".join(canonical_argv(self.pattern.split(" "))) if shell else self.pattern

    def applies_to(self, tool_name: str) -> bool:
        if self.tool == tool_name:
            return True
        if self.tool == "edit":
            return tool_name in EDIT_TOOLS
        if self.tool == "read":
            return tool_name in READ_TOOLS
        return self.tool in SHELL_TOOLS and tool_name in SHELL_TOOLS

    def matches_text(self, text: str, path_like: bool = False, fold: bool = False) -> bool:
        if self.pattern is None:
            return True
        candidates = [text, text + " "]  # `git status *` also covers bare `git status`
        if path_like and not self.literal and "/" not in self.pattern:
            candidates.append(text.rsplit("/", 1)[-1])
        pats = {self.pattern, self.canonical or self.pattern}
        if fold:
            candidates, pats = [c.casefold() for c in candidates], {p.casefold() for p in pats}
        return any(fnmatchcase(c, p) for c in candidates for p in pats)

    def __repr__(self) -> str:
        return f"Rule({self.text!r})"


def _squash(text: str) -> str:
    return " ".join(text.split())


def _escape(text: str) -> str:
    """Glob-escape so a remembered exact value matches only itself."""
    return re.sub(r"([*?\[])", r"[\1]", text)


def normalize_mode(mode: str) -> str:
    m = (mode or "ask").strip().lower()
    m = _MODE_ALIASES.get(m, m)
    if m not in MODES:
        raise ValueError(f"unknown permission mode {mode!r}; choose one of {', '.join(MODES)}")
    return m


class PermissionPolicy:
    """Pure: mode + rules -> (decision, reason). `root` lets rules see workspace-relative paths."""

    def __init__(self, mode: str = "ask", allow: Iterable[str] = (), ask: Iterable[str] = (),
                 deny: Iterable[str] = (), root: str | None = None):
        self.mode = normalize_mode(mode)
        self.allow = [Rule(r) for r in allow]
        self.ask = [Rule(r) for r in ask]
        self.deny = [Rule(r) for r in deny]
        self.root = os.path.realpath(root) if root else None

    def decide(self, tool_name: str, args: dict[str, Any], read_only: bool,
               extra_allow: Iterable[Rule] = (), main_key: str | None = None) -> tuple[Decision, str]:
        """`extra_allow`: approvals remembered this session; they beat ask rules, not deny.
        `main_key`: the argument `tool(...)` rules match (default: a guess from common names)."""
        name = (tool_name or "").lower()
        args = args if isinstance(args, dict) else {}
        remembered = list(extra_allow)
        if name in SHELL_TOOLS:
            return self._decide_shell(name, str(args.get("command", args.get("cmd", "")) or ""),
                                      remembered)
        key = self.main_key(name, args, main_key)
        subject = self.subject(name, args, key)
        label = f"{name}({subject})" if subject else name

        def hit(rules: list[Rule], every: bool = False) -> Rule | None:
            """A path rule sees the path as given and resolved (links followed): deny and ask rules
            need one to match, allow rules both, so an alias of a protected file stays protected."""
            for rule in rules:
                if not rule.applies_to(name):
                    continue
                subjects, path_like = self._subjects(rule, name, args, key)
                # deny rules on paths ignore case: `EDIT(.ENV)` is `.env` on macOS and Windows
                fold = path_like and rules is self.deny
                found = [rule.matches_text(sub, path_like, fold) for sub in subjects]
                if all(found) if every else any(found):
                    return rule
            return None

        if rule := hit(self.deny):
            return "deny", f"{label} is denied by rule {rule.text}"
        if self.mode == "plan" and not read_only:  # ask and allow rules never open plan mode
            return "deny", f"plan mode: {label} would change files or run commands; only read-only tools run"
        if hit(remembered, every=True):
            return "allow", f"{label} was approved earlier in this session"
        if rule := hit(self.ask):
            return "ask", f"{label} needs approval (rule {rule.text})"
        if read_only:
            return "allow", f"{label} is read-only"
        if rule := hit(self.allow, every=True):
            return "allow", f"{label} is allowed by rule {rule.text}"
        is_edit = name in EDIT_TOOLS or name == "git"
        return self._by_mode(label, "edit" if is_edit else "action")

    def _subjects(self, rule: Rule, name: str, args: dict[str, Any], key: str | None) -> tuple[list[str], bool]:
        """What `rule` is matched against: for `edit(...)`/`read(...)` rules and path arguments, the
        path as given and resolved; else the main argument."""
        if rule.tool in ("edit", "read") and rule.tool != name:
            raw = args.get("path")
            raw = raw if isinstance(raw, str) and raw else ("." if name in READ_TOOLS else "")
            forms = self._path_forms(raw)
            rev = args.get("rev")
            if name == "git" and isinstance(rev, str) and ":" in rev:  # `git show HEAD:.env`
                forms += self._path_forms(rev.split(":", 1)[1] or ".")
            return forms, True
        if key in _PATH_KEYS:
            return self._path_forms(str(args.get(key) or "")), True
        return [self.subject(name, args, key)], False

    def read_denied(self, path: str, rules: list[Rule] | None = None) -> bool:
        rules = [r for r in self.deny if r.tool == "read"] if rules is None else rules
        forms = self._path_forms(path)
        return any(r.matches_text(f, True, True) for r in rules for f in forms)

    def _path_forms(self, path: str) -> list[str]:
        forms = [self._norm_path(path)]
        if path and self.root:
            real = os.path.realpath(os.path.join(self.root, os.path.expanduser(path)))
            inside = real == self.root or real.startswith(self.root + os.sep)
            forms.append(os.path.relpath(real, self.root) if inside else real)
        return list(dict.fromkeys(forms))

    @staticmethod
    def main_key(name: str, args: dict[str, Any], hint: str | None = None) -> str | None:
        if name in EDIT_TOOLS:
            return "path"
        if hint and isinstance(args.get(hint), str):
            return hint
        key = next((k for k in _MAIN_ARG_KEYS if isinstance(args.get(k), str)), None)
        return key or next((k for k, v in args.items() if isinstance(v, str)), None)

    def subject(self, name: str, args: dict[str, Any], key: str | None = None) -> str:
        """The string a `tool(...)` rule is matched against (a path relative to the root if inside)."""
        key = key or self.main_key(name, args)
        text = str(args.get(key) or "") if key else ""
        return self._norm_path(text) if key in _PATH_KEYS else _squash(text)

    def _norm_path(self, path: str) -> str:
        if not path:
            return path
        p = os.path.normpath(os.path.expanduser(path))
        if self.root and os.path.isabs(p):
            real = os.path.realpath(p)
            for cand in (p, real):
                if cand == self.root or cand.startswith(self.root + os.sep):
                    return os.path.relpath(cand, self.root)
        return p

    def _by_mode(self, label: str, kind: str) -> tuple[Decision, str]:
        if self.mode == "yolo":
            return "allow", f"yolo mode allows {label}"
        if self.mode == "plan":
            return "deny", f"plan mode: {label} would change files or run commands; only read-only tools run"
        if kind == "edit" and self.mode == "auto-edit":
            return "allow", f"auto-edit mode allows {label}"
        what = "edit" if kind == "edit" else "command"
        return "ask", f"{label}: this {what} needs approval in {self.mode} mode"

    # ----------------------------------------------------------------------- shell

    def _decide_shell(self, name: str, command: str, remembered: list[Rule]) -> tuple[Decision, str]:
        """Deny rules first, on every spelling; then, where deny rules exist and the line cannot be
        proven not to match one (see `_undecided`), yolo refuses and the other modes ask."""
        parsed = parse_shell(command)
        shown = _squash(command)
        label = f"bash({shown[:200]})"
        if rule := self._shell_hit(self.deny, name, parsed, shown, "deny"):
            return "deny", f"{label} is denied by rule {rule.text}"
        if self.mode == "plan":  # ask and allow rules never open plan mode
            return "deny", f"plan mode: {label} would run a command; only read-only tools run"
        exact = any(r.applies_to(name) and r.matches_text(shown) for r in remembered if r.pattern)
        if exact:
            return "allow", f"{label} was approved earlier in this session"
        if why := self._undecided(self.deny, name, parsed):
            if self.mode == "yolo":
                return "deny", (f"{label} cannot be checked against the deny rules: {why}. Write the "
                                "command out literally (no variables or aliases as commands)")
            return "ask", f"{label} cannot be checked against the deny rules ({why}); needs approval"
        if parsed.ok and self._all_match(remembered, name, parsed):
            return "allow", f"{label} was approved earlier in this session"
        if rule := self._shell_hit(self.ask, name, parsed, shown, "ask"):
            return "ask", f"{label} needs approval (rule {rule.text})"
        if why := self._undecided(self.ask, name, parsed):
            return "ask", f"{label} may match an ask rule ({why}); needs approval"
        if why := parsed.undecidable():
            if self.mode == "yolo":
                return "allow", f"yolo mode allows {label} (not fully checked: {why})"
            return "ask", f"{label}: {why}; needs approval"
        if self._all_match(self.allow, name, parsed):
            return "allow", f"{label} is allowed by the allow rules"
        return self._by_mode(label, "action")

    def _undecided(self, rules: list[Rule], name: str, parsed: ParsedShell) -> str | None:
        """Why some rule in `rules` might match what the line runs although no spelling of it
        does: the line is unparsed or opaque, or a command's arguments are partly unknown and a
        rule names its program. None when every rule is proven not to match."""
        rules = [r for r in rules if r.applies_to(name)]
        if not rules:
            return None
        if why := parsed.undecidable():
            return why
        if code := next((c for c in parsed.commands if c.inline_code), None):
            return f"`{code.text[:80]}` {code.inline_code}"
        for cmd in parsed.commands:
            prog = cmd.program()
            if not cmd.open_tail or prog is None:
                continue
            for rule in rules:
                pats = [p for p in (rule.pattern, rule.canonical) if p]
                if rule.pattern is None or any(glob_prefix_feasible(prog + " ", p) for p in pats):
                    return f"`{cmd.text[:80]}` has arguments only known when it runs, and rule {rule.text} names {prog}"
        return None

    def _shell_hit(self, rules: list[Rule], name: str, parsed: ParsedShell, whole: str,
                   kind: str) -> Rule | None:
        for rule in rules:
            if not rule.applies_to(name):
                continue
            if rule.pattern is None:
                return rule
            if rule.pipe:
                if any(rule.matches_text(s) for s in _pipeline_texts(parsed)):
                    return rule
                continue
            forms = [f for c in parsed.commands for f in c.deny_forms()]
            if kind == "deny":  # more flags are no safer: `rm -frv x` is denied by `rm -fr *`
                forms += [n for f in forms if (n := _narrowed(f, rule))]
            if any(rule.matches_text(f) for f in forms):
                return rule
            if kind == "deny" and not parsed.ok and rule.matches_text(whole):
                return rule
        return None

    def _all_match(self, rules: list[Rule], name: str, parsed: ParsedShell) -> bool:
        rules = [r for r in rules if r.applies_to(name) and not r.pipe]
        if not rules:
            return False
        judged = [c for c in parsed.commands if not c.carrier]
        if not judged or parsed.opaque or any(c.dynamic or c.opaque for c in parsed.commands):
            return False
        if any(c.writes for c in parsed.commands):
            return False  # `cmd > file` writes a file: rules about `cmd` alone do not cover that
        return all(any(r.matches_text(f) for r in rules for f in c.allow_forms()) for c in judged)

    def remember_rules(self, tool_name: str, args: dict[str, Any], main_key: str | None = None) -> list[Rule]:
        """Exact-match rules for an "always" answer: the command(s), the file, or the argument."""
        name = (tool_name or "").lower()
        if name in SHELL_TOOLS:
            command = str(args.get("command", args.get("cmd", "")) or "")
            rules = [Rule(name, literal=_squash(command))] if command.strip() else []
            parsed = parse_shell(command)
            if parsed.ok:
                rules += [Rule(name, literal=c.text) for c in parsed.commands
                          if not c.carrier and not c.dynamic and c.text]
            return rules
        subject = self.subject(name, args, self.main_key(name, args, main_key))
        rule_name = "edit" if name in EDIT_TOOLS else name
        return [Rule(rule_name, literal=subject) if subject else Rule(rule_name)]


_SHORT_CLUSTER = re.compile(r"^-[A-Za-z]+$")
# `path:12:text` / `path-12-text` (grep), `path:3-9: def f` (outline); a glob result is the line
_DIFF_HEAD = re.compile(r"^diff --git a/(.+?) b/(.+)$")
_RESULT_PATH = re.compile(r"^(.+?)[:-]\d+(?:-\d+)?[:-]")


def _narrowed(form: str, rule: Rule) -> str | None:
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
    return " ".join([*have[:at], want[at], *have[at + 1:]])


def _pipeline_texts(parsed: ParsedShell) -> list[str]:
    """Every contiguous run of 2+ members of every pipeline, in each member's normalized spelling."""
    out = []
    for members in parsed.pipelines:
        spell = [" ".join([os.path.basename(c.argv[0]), *c.argv[1:]]) if c.argv else c.text for c in members]
        for i in range(len(spell)):
            for j in range(i + 2, len(spell) + 1):
                out.append(" | ".join(spell[i:j]))
                out.append(" | ".join(c.text for c in members[i:j]))
    return out


class PermissionGate:
    """What the agent loop calls: `authorize` returns None to go ahead or the refusal the model sees."""

    def __init__(self, policy: PermissionPolicy, ask_user: AskUser | None = None):
        self.policy = policy
        self.ask_user = ask_user
        self.remembered: list[Rule] = []

    def screen(self, call: ToolCall, output: str) -> str:
        """A search's output without the lines from files `read(...)` rules deny (`grep` over the
        whole tree must not show what `view` of the file may not); a git diff or show without the
        sections of those files."""
        name = (call.name or "").lower()
        if name not in READ_TOOLS or not output:
            return output
        rules = [r for r in self.policy.deny if r.tool == "read"]
        if not rules:
            return output
        if name == "git":
            return self._screen_diff(output, rules)
        kept, dropped = [], 0
        for line in output.split("\n"):
            m = _RESULT_PATH.match(line)
            path = m.group(1) if m else line.strip()
            if path and self.policy.read_denied(path, rules):
                dropped += 1
            else:
                kept.append(line)
        if dropped:
            kept.append(f"[{dropped} line(s) from files denied by read rules left out]")
        return "\n".join(kept)

    def _screen_diff(self, output: str, rules: list[Rule]) -> str:
        kept, dropped, skipping = [], 0, False
        for line in output.split("\n"):
            if m := _DIFF_HEAD.match(line):
                skipping = self.policy.read_denied(m.group(1), rules) or self.policy.read_denied(m.group(2), rules)
                dropped += skipping
            if not skipping:
                kept.append(line)
        if dropped:
            kept.append(f"[{dropped} file(s) denied by read rules left out of the diff]")
        return "\n".join(kept)

    def authorize(self, call: ToolCall, tool: Tool) -> str | None:
        args = call.arguments if isinstance(call.arguments, dict) else {}
        try:  # a tool that cannot say counts as one that writes
            read_only = bool(tool.is_read_only(args))
        except Exception:
            read_only = False
        required = (getattr(tool, "parameters", None) or {}).get("required") or []
        main_key = next((k for k in required if isinstance(args.get(k), str)), None)
        decision, reason = self.policy.decide(call.name, args, read_only, self.remembered, main_key)
        if decision == "allow":
            return None
        if decision == "deny":
            return f"Permission denied: {reason}. Do not retry this; choose another approach."
        if self.ask_user is None:
            return (f"Not run: {reason}, and no one can approve it in this non-interactive session. "
                    "Continue without it, or the user can allow it with a rule or a more permissive mode.")
        try:
            answer = self.ask_user(call, tool, reason)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            return f"Not run: asking the user for approval failed ({exc})."
        if answer == "always":
            self.remembered.extend(self.policy.remember_rules(call.name, args, main_key))
            return None
        if answer == "yes":
            return None
        return "The user declined this tool call. Ask what they want instead, or try another approach."
