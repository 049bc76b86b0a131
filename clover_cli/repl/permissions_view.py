"""`/permissions`: the mode, the rules from the settings, and the approvals remembered this session
("always" answers), numbered so that `/permissions remove N` forgets one. What an "always" answer
will remember is worded here too, so the question can say it before the user answers."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from rich.table import Table

if TYPE_CHECKING:
    from clover.repl.app import ChatApp

_GLOB_ESCAPE = re.compile(r"\[([*?\[])\]")


def rule_label(rule: Any) -> str:
    """`bash(git status)` for a remembered exact value, the rule's own text for a settings rule."""
    if getattr(rule, "literal", False):
        pattern = _GLOB_ESCAPE.sub(r"\1", rule.pattern or "")
        return f"{rule.text}({pattern})" if pattern else str(rule.text)
    return str(getattr(rule, "text", rule))


def always_rules(gate: Any, name: str, args: dict[str, Any], tool: Any) -> list[Any]:
    """The rules an "always" answer to this call would add (as the permission gate computes them)."""
    policy = getattr(gate, "policy", None)
    if policy is None or not hasattr(policy, "remember_rules"):
        return []
    required = (getattr(tool, "parameters", None) or {}).get("required") or []
    main_key = next((k for k in required if isinstance(args.get(k), str)), None)
    try:
        return list(policy.remember_rules(name, args, main_key))
    except Exception:  # a hint only: never in the way of the question
        return []


def _gate(app: ChatApp) -> Any:
    gate = app.agent.gate
    return getattr(gate, "inner", gate)


def show(app: ChatApp) -> None:
    gate = _gate(app)
    policy = getattr(gate, "policy", None)
    app.renderer.note(f"mode: {app.settings.mode}")
    table = Table.grid(padding=(0, 2))
    for kind in ("deny", "ask", "allow"):
        for rule in getattr(policy, kind, []) or []:
            table.add_row(kind, rule_label(rule), "settings")
    remembered = _remembered_labels(gate)
    for i, label in enumerate(remembered, 1):
        table.add_row(f"[{i}] allow", label, 'this session (an "always" answer)')
    if table.row_count:
        app.console.print(table)
    if remembered:
        app.renderer.info(
            "/permissions remove N forgets a session approval; settings rules live in config.toml"
        )
    else:
        app.renderer.info('no approvals remembered this session (answer "a" to an approval to add one)')


def _remembered_labels(gate: Any) -> list[str]:
    """One entry per distinct rule (a command line and its one sub-command read the same)."""
    return list(dict.fromkeys(rule_label(r) for r in getattr(gate, "remembered", []) or []))


def forget(app: ChatApp, number: int) -> None:
    gate = _gate(app)
    labels = _remembered_labels(gate)
    if not 1 <= number <= len(labels):
        count = len(labels)
        app.renderer.error(f"no remembered approval {number}; there {'is' if count == 1 else 'are'} {count}")
        return
    label = labels[number - 1]
    gate.remembered[:] = [r for r in gate.remembered if rule_label(r) != label]
    app.renderer.note(f"forgot: {label} (it will be asked again)")
