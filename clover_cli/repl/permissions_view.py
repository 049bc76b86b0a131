"""`/permissions`: the mode, the rules from the settings, and the approvals remembered this session
("always" answers), numbered so that `/permissions remove N` forgets one. What an "always" answer
will remember is worded here too, so the question can say it before the user answers."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from clover.core.tool_protocol import Tool

if TYPE_CHECKING:
    from clover.repl.render import Renderer
    from clover.tools.safety.permgate import PermissionGate
    from clover.tools.safety.permrules import Rule

_GLOB_ESCAPE = re.compile(r"\[([*?\[])\]")


def rule_label(rule: Rule) -> str:
    """`bash(git status)` for a remembered exact value, the rule's own text for a settings rule."""
    if rule.literal:
        pattern = _GLOB_ESCAPE.sub(r"\1", rule.pattern or "")
        return f"{rule.text}({pattern})" if pattern else str(rule.text)
    return str(rule.text)


def always_rules(gate: PermissionGate, name: str, args: dict[str, Any], tool: Tool) -> list[Rule]:
    """The rules an "always" answer to this call would add (as the permission gate computes them)."""
    required = (tool.parameters or {}).get("required") or []
    main_key = next((k for k in required if isinstance(args.get(k), str)), None)
    try:
        return list(gate.policy.remember_rules(name, args, main_key))
    except Exception:  # a hint only: never in the way of the question
        return []


def show(gate: PermissionGate, mode: str, renderer: Renderer, console: Console) -> None:
    policy = gate.policy
    renderer.note(f"mode: {mode}")
    table = Table.grid(padding=(0, 2))
    for kind, rules in (("deny", policy.deny), ("ask", policy.ask), ("allow", policy.allow)):
        for rule in rules:
            table.add_row(kind, rule_label(rule), "settings")
    remembered = _remembered_labels(gate)
    for i, label in enumerate(remembered, 1):
        table.add_row(f"[{i}] allow", label, 'this session (an "always" answer)')
    if table.row_count:
        console.print(table)
    if remembered:
        renderer.info("/permissions remove N forgets a session approval; settings rules live in config.toml")
    else:
        renderer.info('no approvals remembered this session (answer "a" to an approval to add one)')


def _remembered_labels(gate: PermissionGate) -> list[str]:
    """One entry per distinct rule (a command line and its one sub-command read the same)."""
    return list(dict.fromkeys(rule_label(r) for r in gate.remembered))


def forget(gate: PermissionGate, renderer: Renderer, number: int) -> None:
    labels = _remembered_labels(gate)
    if not 1 <= number <= len(labels):
        count = len(labels)
        renderer.error(f"no remembered approval {number}; there {'is' if count == 1 else 'are'} {count}")
        return
    label = labels[number - 1]
    gate.remembered[:] = [r for r in gate.remembered if rule_label(r) != label]
    renderer.note(f"forgot: {label} (it will be asked again)")
