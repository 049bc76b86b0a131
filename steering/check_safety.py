"""Which of an issue's checks (issue_checks.py) may run: an issue is untrusted text, and its checks
run without the model choosing to, so a check may only call what the workspace defines, with values.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clover.steering.issue_checks import Check

# what a check may use besides the workspace: values and pure helpers, nothing that reaches the
# file system, the network, other processes or the interpreter itself
SAFE_BUILTINS = frozenset(
    [
        "abs",
        "all",
        "any",
        "bool",
        "bytes",
        "dict",
        "divmod",
        "enumerate",
        "float",
        "frozenset",
        "int",
        "isinstance",
        "len",
        "list",
        "map",
        "max",
        "min",
        "print",
        "range",
        "repr",
        "reversed",
        "round",
        "set",
        "sorted",
        "str",
        "sum",
        "tuple",
        "zip",
        "None",
        "True",
        "False",
    ]
)
SAFE_MODULES = frozenset(["datetime", "decimal", "fractions", "math", "collections"])


def safe(check: Check, modules: set[str], defined: set[str] | dict[str, list[str]]) -> bool:
    """Whether a check only takes from the workspace what it defines, and calls it with values: an
    issue is untrusted text, and a check runs without the model choosing to. It may import a few
    side-effect-free standard modules, and `from M import N` where M is a workspace module and N a
    function or class the workspace defines (not a module M itself imported: `units.os.system`
    must stay out of reach). Statements are imports, assignments and expressions; names are the
    ones it binds or harmless builtins; no attribute starts with `_`."""
    bound = set(SAFE_BUILTINS)
    for code in (*check.setup, check.probe):
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError):
            return False
        for stmt in tree.body:
            if not isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign, ast.Expr)):
                return False
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                if not all(a.name in SAFE_MODULES for a in node.names):
                    return False
                bound.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                ours = module in modules and all(a.name in defined for a in node.names)
                if node.level or not (module in SAFE_MODULES or ours):
                    return False
                bound.update(a.asname or a.name for a in node.names)
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                return False
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
                return False
    return True


__all__ = ["SAFE_BUILTINS", "SAFE_MODULES", "safe"]
