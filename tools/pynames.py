"""Does an edit make a Python module use a name it neither defines nor imports? The edit tools
(files.py) refuse one that does, beside the syntax check (pysyntax.py): a renamed variable (`arr`
-> `the`) or a call of a function nobody defined is a NameError waiting for the first run.

pyflakes reads the module as Python scopes it (builtins, imports, star imports, class and
comprehension scopes, `del`, conditional definitions), so only the names it is sure of count; a
name that was already undefined before the edit is the file's own business and is left alone.
"""

from __future__ import annotations

import ast
import warnings

from pyflakes import checker, messages

# what "uses a name the module does not define" means: a plain undefined name, a local read before
# any assignment in its function, an `__all__` entry that names nothing
UNDEFINED = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)


def undefined_names(text: str, name: str) -> dict[str, int] | None:
    """{undefined name: the first line using it} of a module, or None when it does not parse."""
    with warnings.catch_warnings():  # e.g. an invalid escape sequence's SyntaxWarning: not ours to print
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(text, name)
        except (SyntaxError, ValueError):
            return None
        found = checker.Checker(tree, filename=name).messages
    out: dict[str, int] = {}
    for message in sorted(found, key=lambda m: m.lineno):
        if isinstance(message, UNDEFINED):
            out.setdefault(str(message.message_args[0]), message.lineno)
    return out


def newly_undefined(name: str, old: str, new: str) -> dict[str, int]:
    """The names `new` uses without defining or importing them that `old` did not (name -> line);
    empty for a file that is not Python, or when either text does not parse (the syntax check
    speaks for those)."""
    if not name.endswith((".py", ".pyi")):
        return {}
    before, after = undefined_names(old, name), undefined_names(new, name)
    if before is None or after is None:
        return {}
    return {n: line for n, line in after.items() if n not in before}


def describe(names: dict[str, int]) -> str:
    """`the` (line 7), `arr2` (line 9)"""
    return ", ".join(f"`{n}` (line {line})" for n, line in names.items())


__all__ = ["describe", "newly_undefined", "undefined_names"]
