"""Mode + allow/ask/deny rules -> decision, for every tool call (tools/safety/permgate.py asks the user).

Rules look like `bash(git status*)`, `bash(python3 -m pytest:*)` (a prefix rule), `edit(*.lock)`,
`read(.env)` or a bare tool name (`bash`); tools/safety/permrules.py. Deny beats ask beats allow.

- `bash(...)` deny and ask rules are tried against every sub-command of the line, in every
  spelling (tools/safety/shellparse.py, tools/safety/shellnorm.py: `/bin/rm`, `sudo rm`, `rm t -r -f` = `rm -fr
  t`, `-r{f,}`, `rm --rec`); a pattern containing `|` against pipelines (`bash(curl *|*sh)`). Where
  deny rules exist and a line cannot be proven not to match one (`_undecided`), yolo refuses it and
  the other modes ask. The exec check (tools/safety/execguard.py) holds deny rules again at every program
  start, whatever the line looked like.
- Allow rules and remembered approvals apply only to a line the parser proves literal
  (tools/safety/shellproof.py: no loops, expansions, substitutions, write redirects, inline code,
  dangerous options or their abbreviations), every command matching on its exact argv. What an
  allowed line may then start is its `exec_grant`.
- Plan mode refuses everything but read-only tools and, where the sandbox runs them read-only
  (`plan_commands`), shell lines proven read-only; ask and allow rules do not change that.
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
from collections.abc import Callable, Iterable
from typing import Any, Literal

from clover.core.model_protocol import ToolCall
from clover.core.tool_protocol import MODES, Tool, ToolKind
from clover.tools.safety.execgrant import Grant, templates_of
from clover.tools.safety.permrules import (
    READ_KINDS,
    SUGGESTED_DENY,
    Rule,
    allow_argvs,
    command_prefix,
    kind_of,
    narrowed,
    offered_prefix,
    pipeline_texts,
    shell_label,
    squash,
)
from clover.tools.safety.shellcommand import ParsedShell, SimpleCommand
from clover.tools.safety.shellnorm import glob_prefix_feasible
from clover.tools.safety.shellparse import parse_shell
from clover.tools.safety.shellproof import literal_proof, read_only_proof

Decision = Literal["allow", "ask", "deny"]
Answer = Literal["yes", "no", "always", "prefix"]
AskUser = Callable[[ToolCall, Tool, str], Answer]

_MODE_ALIASES = {
    "auto_edit": "auto-edit",
    "autoedit": "auto-edit",
    "accept-edits": "auto-edit",
    "default": "ask",
    "bypass": "yolo",
}
_MAIN_ARG_KEYS = ("command", "subcommand", "pattern", "query", "url", "path", "file", "name")
_PATH_KEYS = ("path", "file", "file_path", "filename")


def normalize_mode(mode: str) -> str:
    m = (mode or "ask").strip().lower()
    m = _MODE_ALIASES.get(m, m)
    if m not in MODES:
        raise ValueError(f"unknown permission mode {mode!r}; choose one of {', '.join(MODES)}")
    return m


class PermissionPolicy:
    """Pure: mode + rules -> (decision, reason). `root` lets rules see workspace-relative paths."""

    def __init__(
        self,
        mode: str = "ask",
        allow: Iterable[str] = (),
        ask: Iterable[str] = (),
        deny: Iterable[str] = (),
        root: str | None = None,
        plan_commands: bool = False,
        sandboxed: bool = True,
    ):
        self.mode = normalize_mode(mode)
        # plan mode: commands proven read-only run (only where the environment runs them read-only)
        self.plan_commands = plan_commands
        # without the sandbox a command can reach anything the user can: allow rules run none
        # unasked (the user's own answers this session still count); yolo runs them all
        self.sandboxed = sandboxed
        self.allow = [Rule(r) for r in allow]
        self.ask = [Rule(r) for r in ask]
        self.deny = [Rule(r) for r in deny]
        self.root = os.path.realpath(root) if root else None

    def decide(
        self,
        tool_name: str,
        args: dict[str, Any],
        read_only: bool,
        extra_allow: Iterable[Rule] = (),
        main_key: str | None = None,
        kind: ToolKind | None = None,
    ) -> tuple[Decision, str]:
        """`extra_allow`: approvals remembered this session; they beat ask rules, not deny.
        `main_key`: the argument `tool(...)` rules match (default: a guess from common names).
        `kind`: the tool's `Tool.kind` (default: that of the default tool of this name)."""
        name = (tool_name or "").lower()
        kind = kind_of(name) if kind is None else kind
        args = args if isinstance(args, dict) else {}
        remembered = list(extra_allow)
        if kind == "run":
            return self._decide_shell(name, str(args.get("command", args.get("cmd", "")) or ""), remembered)
        key = self.main_key(name, args, main_key, kind)
        subject = self.subject(name, args, key)
        label = f"{name}({subject})" if subject else name

        def hit(rules: list[Rule], every: bool = False) -> Rule | None:
            """A path rule sees the path as given and resolved (links followed): deny and ask rules
            need one to match, allow rules both, so an alias of a protected file stays protected."""
            for rule in rules:
                if not rule.applies_to(name, kind):
                    continue
                subjects, path_like = self._subjects(rule, name, kind, args, key)
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
        # git writes (the git tool's commit) are their own class: asked in auto-edit too, as commands
        return self._by_mode(label, "edit" if kind == "edit" else "git write" if kind == "git" else "action")

    def _subjects(
        self, rule: Rule, name: str, kind: ToolKind, args: dict[str, Any], key: str | None
    ) -> tuple[list[str], bool]:
        """What `rule` is matched against: for `edit(...)`/`read(...)` rules and path arguments, the
        path as given and resolved; else the main argument."""
        if rule.tool in ("edit", "read") and rule.tool != name:
            raw = args.get("path")
            raw = raw if isinstance(raw, str) and raw else ("." if kind in READ_KINDS else "")
            forms = self._path_forms(raw)
            rev = args.get("rev")
            if kind == "git" and isinstance(rev, str) and ":" in rev:  # `git show HEAD:.env`
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
    def main_key(
        name: str, args: dict[str, Any], hint: str | None = None, kind: ToolKind | None = None
    ) -> str | None:
        if (kind_of(name) if kind is None else kind) == "edit":
            return "path"
        if hint and isinstance(args.get(hint), str):
            return hint
        key = next((k for k in _MAIN_ARG_KEYS if isinstance(args.get(k), str)), None)
        return key or next((k for k, v in args.items() if isinstance(v, str)), None)

    def subject(self, name: str, args: dict[str, Any], key: str | None = None) -> str:
        """The string a `tool(...)` rule is matched against (a path relative to the root if inside)."""
        key = key or self.main_key(name, args)
        text = str(args.get(key) or "") if key else ""
        return self._norm_path(text) if key in _PATH_KEYS else squash(text)

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
        what = {"edit": "edit", "git write": "git write"}.get(kind, "command")
        return "ask", f"{label}: this {what} needs approval in {self.mode} mode"

    # ----------------------------------------------------------------------- shell

    def _decide_shell(self, name: str, command: str, remembered: list[Rule]) -> tuple[Decision, str]:
        """Deny rules first, on every spelling; then, where deny rules exist and the line cannot be
        proven not to match one (see `_undecided`), yolo refuses and the other modes ask. Allow
        rules and remembered approvals need the line proven literal (tools/safety/shellproof.py)."""
        parsed = parse_shell(command)
        shown = squash(command)
        label = f"bash({shell_label(command)})"
        if rule := self._shell_hit(self.deny, name, parsed, shown, "deny"):
            return "deny", f"{label} is denied by rule {rule.text}"
        if self.mode == "plan":  # ask and allow rules never open plan mode
            return self._plan_shell(label, parsed)
        if any(r.line == command for r in remembered if r.applies_to(name, "run")):
            return "allow", f"{label} was approved earlier in this session"
        if why := self._undecided(self.deny, name, parsed):
            if self.mode == "yolo":
                return "deny", (
                    f"{label} cannot be checked against the deny rules: {why}. Write the "
                    "command out literally (no variables or aliases as commands)"
                )
            return "ask", f"{label} cannot be checked against the deny rules ({why}); needs approval"
        proof = literal_proof(parsed)
        if proof is None and self._all_allowed(remembered, name, parsed):
            return "allow", f"{label} was approved earlier in this session"
        if rule := self._shell_hit(self.ask, name, parsed, shown, "ask"):
            return "ask", f"{label} needs approval (rule {rule.text})"
        if why := self._undecided(self.ask, name, parsed):
            return "ask", f"{label} may match an ask rule ({why}); needs approval"
        if why := parsed.undecidable():
            if self.mode == "yolo":
                return "allow", f"yolo mode allows {label} (not fully checked: {why})"
            return "ask", f"{label}: {why}; needs approval"
        if proof is None and self._all_allowed(self.allow, name, parsed):
            if not self.sandboxed and self.mode != "yolo":
                return (
                    "ask",
                    f"{label}: there is no sandbox, so every command is asked (allow rules wait for it)",
                )
            return "allow", f"{label} is allowed by the allow rules"
        if (
            proof is not None
            and self.mode != "yolo"
            and self._all_allowed(self.allow, name, parsed, proven=False)
        ):
            return "ask", f"{label} looks like the allow rules, but {proof}; needs approval"
        return self._by_mode(label, "action")

    def _plan_shell(self, label: str, parsed: ParsedShell) -> tuple[Decision, str]:
        refusal = f"plan mode: {label} would run a command; only read-only tools and commands run"
        if not self.plan_commands:
            return (
                "deny",
                f"{refusal} (read-only commands run only in the read-only sandbox, which is off here)",
            )
        if why := read_only_proof(parsed):
            return "deny", f"{refusal}, and this one is not proven read-only: {why}"
        return "allow", f"plan mode: {label} only reads (it runs in the read-only sandbox)"

    def exec_grant(self, name: str, command: str) -> Grant:
        """What the exec check lets this command start, once the gate allowed it without asking:
        anything but denied programs in yolo; in plan mode only the programs it names, read-only;
        else the programs it names, and anything the allow rules cover."""
        parsed = parse_shell(command)
        if self.mode == "yolo":
            return Grant(everything=True, label=command)
        return Grant(templates=templates_of(parsed), read_only=self.mode == "plan", label=command)

    def _undecided(self, rules: list[Rule], name: str, parsed: ParsedShell) -> str | None:
        """Why some rule in `rules` might match what the line runs although no spelling of it
        does: the line is unparsed or opaque, or a command's arguments are partly unknown and a
        rule names its program. None when every rule is proven not to match."""
        rules = [r for r in rules if r.applies_to(name, "run")]
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

    def _shell_hit(
        self, rules: list[Rule], name: str, parsed: ParsedShell, whole: str, kind: str
    ) -> Rule | None:
        for rule in rules:
            if not rule.applies_to(name, "run"):
                continue
            if rule.pattern is None:
                return rule
            if rule.pipe:
                if any(rule.matches_text(s) for s in pipeline_texts(parsed)):
                    return rule
                continue
            forms = [f for c in parsed.commands for f in c.deny_forms()]
            if kind == "deny":  # more flags are no safer: `rm -frv x` is denied by `rm -fr *`
                forms += [n for f in forms if (n := narrowed(f, rule))]
            if any(rule.matches_text(f) for f in forms):
                return rule
            if kind == "deny" and not parsed.ok and rule.matches_text(whole):
                return rule
        return None

    def _all_allowed(self, rules: list[Rule], name: str, parsed: ParsedShell, proven: bool = True) -> bool:
        """Every command of the line matches one of `rules` on its exact argv (`proven`: the
        caller checked the line is literal; False only words a reason for asking)."""
        rules = [r for r in rules if r.applies_to(name, "run") and not r.pipe]
        if not rules or not parsed.commands or (proven and not parsed.ok):
            return False
        return all(
            any(r.allows_words(words) for r in rules for words in allow_argvs(c)) for c in parsed.commands
        )

    def allowed_argv(self, words: list[str], remembered: Iterable[Rule] = ()) -> Rule | None:
        """The allow rule or remembered approval that covers one program start (the exec check)."""
        for rule in [*self.allow, *remembered]:
            if rule.applies_to("bash", "run") and not rule.pipe and rule.allows_words(words):
                return rule
        return None

    def denied_argv(self, words: list[str]) -> Rule | None:
        """The deny rule one program start matches, on every spelling of its argv (the exec check)."""
        if not words:
            return None
        cmd = SimpleCommand(words=list(words), argv=list(words))
        forms = cmd.deny_forms()
        for rule in self.deny:
            if not rule.applies_to("bash", "run") or rule.pipe:
                continue
            if rule.pattern is None or any(rule.matches_text(f) for f in forms):
                return rule
            if any(rule.matches_text(n) for f in forms if (n := narrowed(f, rule))):
                return rule
        return None

    def remember_rules(
        self,
        tool_name: str,
        args: dict[str, Any],
        main_key: str | None = None,
        kind: ToolKind | None = None,
    ) -> list[Rule]:
        """Exact-match rules for an "always" answer: the line byte for byte and each of its
        commands' exact argv (a literal line), the file, or the argument."""
        name = (tool_name or "").lower()
        kind = kind_of(name) if kind is None else kind
        if kind == "run":
            command = str(args.get("command", args.get("cmd", "")) or "")
            rules = [Rule.exact_line(name, command)] if command.strip() else []
            parsed = parse_shell(command)
            if literal_proof(parsed) is None:
                rules += [Rule.exact_argv(name, c.words) for c in parsed.commands if c.words]
            return rules
        subject = self.subject(name, args, self.main_key(name, args, main_key, kind))
        rule_name = "edit" if kind == "edit" else name
        return [Rule(rule_name, literal=subject) if subject else Rule(rule_name)]

    def prefix_rule(self, tool_name: str, args: dict[str, Any], kind: ToolKind | None = None) -> Rule | None:
        """The prefix rule an approval offers for this call (see `offered_prefix`); none in plan mode."""
        prefix = offered_prefix(tool_name, args, kind) if self.mode != "plan" else None
        return Rule.prefix_rule((tool_name or "").lower(), prefix) if prefix else None


# The gate lives in its own module; it is imported from here too.
from clover.tools.safety.permgate import PermissionGate  # noqa: E402

__all__ = [
    "SUGGESTED_DENY",
    "PermissionGate",
    "PermissionPolicy",
    "Rule",
    "command_prefix",
    "offered_prefix",
    "shell_label",
]
