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
from typing import Any, Literal

from clover.core.protocols import MODES, Tool, ToolCall
from clover.tools.execgrant import Grant, templates_of
from clover.tools.permrules import EDIT_TOOLS, READ_TOOLS, SHELL_TOOLS, Rule, join_words, squash
from clover.tools.shellnorm import glob_prefix_feasible
from clover.tools.shellparse import ParsedShell, SimpleCommand, parse_shell
from clover.tools.shellproof import literal_proof, read_only_proof
from clover.tools.textio import escape_controls

Decision = Literal["allow", "ask", "deny"]
Answer = Literal["yes", "no", "always", "prefix"]
AskUser = Callable[[ToolCall, Tool, str], Answer]

_MODE_ALIASES = {"auto_edit": "auto-edit", "autoedit": "auto-edit", "accept-edits": "auto-edit",
                 "default": "ask", "bypass": "yolo"}
_MAIN_ARG_KEYS = ("command", "subcommand", "pattern", "query", "url", "path", "file", "name")
_PATH_KEYS = ("path", "file", "file_path", "filename")

# A reasonable starting deny list for settings files (the CLI decides whether to use it).
SUGGESTED_DENY = [
    "bash(rm -rf /)", "bash(rm -rf /*)", "bash(rm -rf ~*)", "bash(rm -rf $HOME*)",
    "bash(curl *|*sh)", "bash(wget *|*sh)", "bash(git push *--force*)", "bash(git push -f*)",
    "bash(git push * -f*)", "bash(mkfs*)", "bash(dd * of=/dev/*)", "bash(shutdown*)", "bash(reboot*)",
]


def normalize_mode(mode: str) -> str:
    m = (mode or "ask").strip().lower()
    m = _MODE_ALIASES.get(m, m)
    if m not in MODES:
        raise ValueError(f"unknown permission mode {mode!r}; choose one of {', '.join(MODES)}")
    return m


class PermissionPolicy:
    """Pure: mode + rules -> (decision, reason). `root` lets rules see workspace-relative paths."""

    def __init__(self, mode: str = "ask", allow: Iterable[str] = (), ask: Iterable[str] = (),
                 deny: Iterable[str] = (), root: str | None = None, plan_commands: bool = False):
        self.mode = normalize_mode(mode)
        # plan mode: commands proven read-only run (only where the environment runs them read-only)
        self.plan_commands = plan_commands
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
        what = "edit" if kind == "edit" else "command"
        return "ask", f"{label}: this {what} needs approval in {self.mode} mode"

    # ----------------------------------------------------------------------- shell

    def _decide_shell(self, name: str, command: str, remembered: list[Rule]) -> tuple[Decision, str]:
        """Deny rules first, on every spelling; then, where deny rules exist and the line cannot be
        proven not to match one (see `_undecided`), yolo refuses and the other modes ask. Allow
        rules and remembered approvals need the line proven literal (tools/shellproof.py)."""
        parsed = parse_shell(command)
        shown = squash(command)
        label = f"bash({shell_label(command)})"
        if rule := self._shell_hit(self.deny, name, parsed, shown, "deny"):
            return "deny", f"{label} is denied by rule {rule.text}"
        if self.mode == "plan":  # ask and allow rules never open plan mode
            return self._plan_shell(label, parsed)
        if any(r.line == command for r in remembered if r.applies_to(name)):
            return "allow", f"{label} was approved earlier in this session"
        if why := self._undecided(self.deny, name, parsed):
            if self.mode == "yolo":
                return "deny", (f"{label} cannot be checked against the deny rules: {why}. Write the "
                                "command out literally (no variables or aliases as commands)")
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
            return "allow", f"{label} is allowed by the allow rules"
        if proof is not None and self.mode != "yolo" and self._all_allowed(self.allow, name, parsed, proven=False):
            return "ask", f"{label} looks like the allow rules, but {proof}; needs approval"
        return self._by_mode(label, "action")

    def _plan_shell(self, label: str, parsed: ParsedShell) -> tuple[Decision, str]:
        refusal = f"plan mode: {label} would run a command; only read-only tools and commands run"
        if not self.plan_commands:
            return "deny", f"{refusal} (read-only commands run only in the read-only sandbox, which is off here)"
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

    def _all_allowed(self, rules: list[Rule], name: str, parsed: ParsedShell, proven: bool = True) -> bool:
        """Every command of the line matches one of `rules` on its exact argv (`proven`: the
        caller checked the line is literal; False only words a reason for asking)."""
        rules = [r for r in rules if r.applies_to(name) and not r.pipe]
        if not rules or not parsed.commands or (proven and not parsed.ok):
            return False
        return all(any(r.allows_words(words) for r in rules for words in allow_argvs(c))
                   for c in parsed.commands)

    def allowed_argv(self, words: list[str], remembered: Iterable[Rule] = ()) -> Rule | None:
        """The allow rule or remembered approval that covers one program start (the exec check)."""
        for rule in [*self.allow, *remembered]:
            if rule.applies_to("bash") and not rule.pipe and rule.allows_words(words):
                return rule
        return None

    def denied_argv(self, words: list[str]) -> Rule | None:
        """The deny rule one program start matches, on every spelling of its argv (the exec check)."""
        if not words:
            return None
        cmd = SimpleCommand(words=list(words), argv=list(words))
        forms = cmd.deny_forms()
        for rule in self.deny:
            if not rule.applies_to("bash") or rule.pipe:
                continue
            if rule.pattern is None or any(rule.matches_text(f) for f in forms):
                return rule
            if any(rule.matches_text(n) for f in forms if (n := _narrowed(f, rule))):
                return rule
        return None

    def remember_rules(self, tool_name: str, args: dict[str, Any], main_key: str | None = None) -> list[Rule]:
        """Exact-match rules for an "always" answer: the line byte for byte and each of its
        commands' exact argv (a literal line), the file, or the argument."""
        name = (tool_name or "").lower()
        if name in SHELL_TOOLS:
            command = str(args.get("command", args.get("cmd", "")) or "")
            rules = [Rule.exact_line(name, command)] if command.strip() else []
            parsed = parse_shell(command)
            if literal_proof(parsed) is None:
                rules += [Rule.exact_argv(name, c.words) for c in parsed.commands if c.words]
            return rules
        subject = self.subject(name, args, self.main_key(name, args, main_key))
        rule_name = "edit" if name in EDIT_TOOLS else name
        return [Rule(rule_name, literal=subject) if subject else Rule(rule_name)]

    def prefix_rule(self, tool_name: str, args: dict[str, Any]) -> Rule | None:
        """The prefix rule an approval offers for this call (see `offered_prefix`); none in plan mode."""
        prefix = offered_prefix(tool_name, args) if self.mode != "plan" else None
        return Rule.prefix_rule((tool_name or "").lower(), prefix) if prefix else None


def offered_prefix(tool_name: str, args: dict[str, Any]) -> list[str] | None:
    """The words an approval may offer to allow as a prefix rule ("always allow commands starting
    with `python3 -m pytest`"): only for a line that is one command the parser proves literal."""
    if (tool_name or "").lower() not in SHELL_TOOLS or not isinstance(args, dict):
        return None
    parsed = parse_shell(str(args.get("command", args.get("cmd", "")) or ""))
    if literal_proof(parsed) is not None or len(parsed.commands) != 1 or parsed.commands[0].wrappers:
        return None
    return command_prefix(parsed.commands[0].words) or None


def shell_label(command: str, limit: int = 200) -> str:
    """A command on one line as a terminal will show it: line breaks as `⏎`, controls escaped."""
    return squash(escape_controls(command).replace("\n", " ⏎ "))[:limit]


def allow_argvs(cmd: SimpleCommand) -> list[list[str]]:
    """The words an allow rule may match: as written, or with harmless wrappers removed (`timeout
    60 pytest`); environment prefixes stay unless harmless (LANG, TZ, ...; tools/shellnorm.py)."""
    out: list[list[str]] = []
    for words in cmd.allow_words():
        if words not in out:
            out.append(words)
    return out


# Programs whose first operands name what they do (`git commit`, `npm run test`, `python3 -m pytest`).
_SUBCOMMANDS = {"git": 1, "npm": 2, "pnpm": 2, "yarn": 2, "cargo": 1, "go": 1, "docker": 1, "kubectl": 1,
                "uv": 2, "poetry": 2, "pip": 1, "pip3": 1, "make": 1, "dotnet": 1, "gradle": 1, "mvn": 1,
                "bundle": 2, "rake": 1, "mix": 1, "deno": 1, "bun": 2, "conda": 1, "tox": 0, "nox": 0}


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
    for word in words[1:1 + keep]:
        if word.startswith("-") or "/" in word or "=" in word:
            break
        out.append(word)
    return out


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
        self.grants: dict[str, Grant] = {}  # command line -> what the exec check lets it start

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
            self._grant(call, tool, asked=False)
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
        elif answer == "prefix" and (rule := self.policy.prefix_rule(call.name, args)) is not None:
            self.remembered.append(rule)
        elif answer not in ("yes", "prefix"):
            return "The user declined this tool call. Ask what they want instead, or try another approach."
        self._grant(call, tool, asked=True)
        return None

    # ------------------------------------------------------------------ the exec check's grants

    def _grant(self, call: ToolCall, tool: Tool, asked: bool) -> None:
        """Remember what this shell call may start, for the exec check (`take_grant`)."""
        name = (call.name or "").lower()
        command = (call.arguments or {}).get("command") if isinstance(call.arguments, dict) else None
        if name not in SHELL_TOOLS or not isinstance(command, str):
            return
        grant = self.policy.exec_grant(name, command)
        grant.policy, grant.remembered = self.policy, self.remembered
        if self.ask_user is not None and not grant.read_only:
            grant.ask = self._exec_asker(call, tool)
        self.grants[command] = grant
        if len(self.grants) > 64:  # calls that never ran (a tool error before executing)
            self.grants.pop(next(iter(self.grants)))

    def take_grant(self, command: str) -> Grant | None:
        """The grant the gate made for this command line (once), or None if it made none."""
        return self.grants.pop(command, None)

    def _exec_asker(self, call: ToolCall, tool: Tool) -> Callable[[list[str], str], str]:
        """Asks the user about a program the approved command starts but did not name (the exec
        check calls this on the thread that runs the command, while that program waits)."""

        def ask(argv: list[str], why: str) -> str:
            question = ToolCall(name="exec", arguments={"command": join_words(argv)}, id=f"{call.id}-exec")
            try:
                answer = self.ask_user(question, tool, why) if self.ask_user else "no"
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception:
                return "no"
            if answer == "always":
                self.remembered.append(Rule.exact_argv("bash", argv))
            elif answer == "prefix" and (prefix := command_prefix(argv)):
                self.remembered.append(Rule.prefix_rule("bash", prefix))
            return "yes" if answer in ("yes", "always", "prefix") else "no"

        return ask
