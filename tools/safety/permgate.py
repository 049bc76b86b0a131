"""The permission gate the agent loop calls before every tool call (tools/safety/permissions.py decides):
it asks the user where the decision is "ask", remembers "always" and prefix answers, screens read
results for files `read(...)` rules deny, and hands the exec check what each shell call may start
(`take_grant`; tools/safety/execgrant.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clover.core.model_protocol import ToolCall
from clover.core.tool_protocol import Tool, ToolKind, ToolResult
from clover.tools.safety.execgrant import Grant
from clover.tools.safety.permrules import READ_KINDS, Rule, command_prefix, join_words

AskUser = Callable[[ToolCall, Tool, str], str]


class _HeldChangeTool:
    """What an approval of a held step change is about (the approval shows its name and words)."""

    name = "apply_change"
    description = "apply a change a command made that would make a program run later on this machine"
    parameters: dict[str, Any] = {"type": "object", "properties": {"path": {"type": "string"}}}
    kind: ToolKind = "other"

    def is_read_only(self, args: dict[str, Any]) -> bool:
        return False


_HELD_TOOL = _HeldChangeTool()


class PermissionGate:
    """What the agent loop calls: `authorize` returns None to go ahead or the refusal the model sees."""

    def __init__(self, policy: Any, ask_user: AskUser | None = None):
        self.policy = policy
        self.ask_user = ask_user
        self.remembered: list[Rule] = []
        self.grants: dict[str, Grant] = {}  # command line -> what the exec check lets it start
        self.held_allowed: set[str] = set()  # held step changes the user allowed for the session

    def screen(self, tool: Tool, result: ToolResult) -> None:
        """Leave out of a read's result the lines of files `read(...)` rules deny (`grep` over the
        whole tree must not show what `view` of the file may not), and of a git diff or show the
        sections of those files; the tool says which files each line shows (`line_files`)."""
        if tool.kind not in READ_KINDS or not result.line_files:
            return
        rules = [r for r in self.policy.deny if r.tool == "read"]
        if not rules:
            return
        denied = {f for files in result.line_files for f in files if self.policy.read_denied(f, rules)}
        if not denied:
            return
        lines = result.output.split("\n")
        files = list(result.line_files) + [()] * (len(lines) - len(result.line_files))
        kept = [line for line, shown in zip(lines, files, strict=True) if not denied.intersection(shown)]
        if tool.kind == "git":  # a diff's lines are its files' sections: each denied one counts once
            starts = [i for i, f in enumerate(files) if f and (i == 0 or files[i - 1] != f)]
            sections = sum(bool(denied.intersection(files[i])) for i in starts)
            note = f"[{sections} file(s) denied by read rules left out of the diff]"
        else:
            note = f"[{len(lines) - len(kept)} line(s) from files denied by read rules left out]"
        result.output = "\n".join([*kept, note])
        result.line_files = tuple(f for f in files if not denied.intersection(f)) + ((),)

    def authorize(self, call: ToolCall, tool: Tool) -> str | None:
        args = call.arguments if isinstance(call.arguments, dict) else {}
        try:  # a tool that cannot say counts as one that writes
            read_only = bool(tool.is_read_only(args))
        except Exception:
            read_only = False
        required = (tool.parameters or {}).get("required") or []
        main_key = next((k for k in required if isinstance(args.get(k), str)), None)
        decision, reason = self.policy.decide(
            call.name, args, read_only, self.remembered, main_key, tool.kind
        )
        if decision == "allow":
            self._grant(call, tool, asked=False)
            return None
        if decision == "deny":
            return f"Permission denied: {reason}. Do not retry this; choose another approach."
        if self.ask_user is None:
            return (
                f"Not run: {reason}, and no one can approve it in this non-interactive session. "
                "Continue without it, or the user can allow it with a rule or a more permissive mode."
            )
        try:
            answer = self.ask_user(call, tool, reason)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            return f"Not run: asking the user for approval failed ({exc})."
        if answer == "always":
            self.remembered.extend(self.policy.remember_rules(call.name, args, main_key, tool.kind))
        elif answer == "prefix" and (rule := self.policy.prefix_rule(call.name, args, tool.kind)) is not None:
            self.remembered.append(rule)
        elif answer not in ("yes", "prefix"):
            return "The user declined this tool call. Ask what they want instead, or try another approach."
        self._grant(call, tool, asked=True)
        return None

    # ------------------------------------------------------------------ held step changes

    def approve_held(self, held: list[Any]) -> set[str]:
        """Which of a step's held changes (tools/safety/steppolicy.py: ones that would make a program run
        later on the host) the user lets through; none where no one can be asked. An "always"
        answer lets that path through for the rest of the session."""
        approved = {h.path for h in held if h.path in self.held_allowed}
        if self.ask_user is None:
            return approved
        for item in held:
            if item.path in approved:
                continue
            question = ToolCall(name="apply_change", arguments={"path": item.path}, id=f"held-{item.path}")
            try:
                answer = self.ask_user(
                    question, _HELD_TOOL, f"the command also wrote {item.path}, {item.why}"
                )
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception:
                continue
            if answer == "always":
                self.held_allowed.add(item.path)
            if answer in ("yes", "always", "prefix"):
                approved.add(item.path)
        return approved

    # ------------------------------------------------------------------ the exec check's grants

    def _grant(self, call: ToolCall, tool: Tool, asked: bool) -> None:
        """Remember what this shell call may start, for the exec check (`take_grant`)."""
        name = (call.name or "").lower()
        command = (call.arguments or {}).get("command") if isinstance(call.arguments, dict) else None
        if tool.kind != "run" or not isinstance(command, str):
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
