"""Does an edit break a Python module? The edit tools (files.py) refuse one that does."""

from __future__ import annotations

import ast
import warnings


def parse_error(text: str, name: str) -> str | None:
    """Why `text` does not parse as Python ("line 7: invalid syntax"), or None."""
    with warnings.catch_warnings():  # e.g. an invalid escape sequence's SyntaxWarning: not ours to print
        warnings.simplefilter("ignore")
        try:
            ast.parse(text, name)
        except SyntaxError as exc:
            return f"line {exc.lineno}: {exc.msg}"
        except ValueError as exc:  # e.g. a NUL byte
            return str(exc)
    return None


def newly_broken(name: str, old: str, new: str) -> str | None:
    """Where `new` fails to parse when `old` parsed; None when it parses, or when the file is not
    Python or did not parse before (another Python version's syntax, or the edit is a repair)."""
    if not name.endswith((".py", ".pyi")) or parse_error(old, name) is not None:
        return None
    return parse_error(new, name)


__all__ = ["newly_broken", "parse_error"]
