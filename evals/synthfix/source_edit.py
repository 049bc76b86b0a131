"""Byte-exact source edits located through the AST (AST columns count UTF-8 bytes, not characters)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    family: str
    start: int  # byte offsets into the UTF-8 module source
    end: int
    replacement: str
    note: str  # what changed, for debugging; never shown in the issue


class Source:
    """Byte-offset view of a module source, because AST columns count UTF-8 bytes."""

    def __init__(self, text: str) -> None:
        self.data = text.encode()
        self.line_starts = [0]
        for i, b in enumerate(self.data):
            if b == 0x0A:
                self.line_starts.append(i + 1)

    def off(self, line: int, col: int) -> int:
        return self.line_starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.off(node.lineno, node.col_offset), self.off(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined,arg-type]

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode()

    def seg(self, node: ast.AST) -> str:
        return self.text(*self.span(node))


def apply(source: str, m: Mutation) -> str:
    data = source.encode()
    return (data[: m.start] + m.replacement.encode() + data[m.end :]).decode()


def gap_token(src: Source, left: ast.AST, right: ast.AST, pattern: str) -> tuple[int, int, str] | None:
    """Locate an operator token between two sibling nodes (parentheses may sit around it)."""
    a, b = src.span(left)[1], src.span(right)[0]
    found = re.search(pattern, src.text(a, b))
    if not found:
        return None
    return a + found.start(), a + found.end(), found.group(0)


_SAFE_ARITH = (ast.Name, ast.Constant, ast.Call, ast.Attribute, ast.Subscript)
_ADDITIVE_OK = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


def plus_text(src: Source, node: ast.AST, delta: int) -> str:
    """Source text for `node ± delta`, parenthesised only where precedence needs it."""
    text = src.seg(node)
    if not (
        isinstance(node, _SAFE_ARITH) or (isinstance(node, ast.BinOp) and isinstance(node.op, _ADDITIVE_OK))
    ):
        text = f"({text})"
    return f"{text} + {delta}" if delta > 0 else f"{text} - {-delta}"


def functions(unit: ast.AST) -> list[ast.FunctionDef]:
    """Every function defined in `unit`, itself included, nested ones and methods too."""
    return [n for n in ast.walk(unit) if isinstance(n, ast.FunctionDef)]
