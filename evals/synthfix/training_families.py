"""Bug families that only the train split draws: a wrong builtin or method, and a wrong attribute.

The held-out split keeps families.FAMILIES so its figures stay comparable across model generations;
these families are measured on the hand-written set instead (min for max, len for sum,
self.width for self.height are there, written by hand and never trained on; a fitted set all the
same, since the decoder's repair rules were written from it).
"""

from __future__ import annotations

import ast

from clover.evals.synthfix.source_edit import Mutation, Source

TRAIN_ONLY_FAMILIES: tuple[str, ...] = ("wrong_builtin", "wrong_attribute")

# Builtins and methods people confuse: each swap keeps the call valid Python.
_BUILTIN_SWAP = {"min": "max", "max": "min", "sum": "len", "len": "sum", "any": "all", "all": "any"}
_METHOD_SWAP = {
    "lower": "upper",
    "upper": "lower",
    "startswith": "endswith",
    "endswith": "startswith",
    "lstrip": "rstrip",
    "rstrip": "lstrip",
    "keys": "values",
    "values": "keys",
    "floor": "ceil",
    "ceil": "floor",
}


def _attr_span(src: Source, node: ast.Attribute) -> tuple[int, int]:
    """Byte span of the attribute name alone (`obj.name` -> `name`)."""
    end = src.span(node)[1]
    return end - len(node.attr.encode()), end


def wrong_builtin(src: Source, unit: ast.AST) -> list[Mutation]:
    out = []
    for node in ast.walk(unit):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in _BUILTIN_SWAP:
            start, end = src.span(func)
            new = _BUILTIN_SWAP[func.id]
            out.append(Mutation("wrong_builtin", start, end, new, f"{func.id} -> {new}"))
        elif isinstance(func, ast.Attribute) and func.attr in _METHOD_SWAP:
            start, end = _attr_span(src, func)
            new = _METHOD_SWAP[func.attr]
            out.append(Mutation("wrong_builtin", start, end, new, f".{func.attr}() -> .{new}()"))
    return out


def _data_attributes(tree: ast.AST) -> dict[str, set[str]]:
    """For each name `x` in the module, the attributes read or set as `x.attr` that are not called."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    found: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and id(node) not in called:
            found.setdefault(node.value.id, set()).add(node.attr)
    return found


def wrong_attribute(src: Source, unit: ast.AST) -> list[Mutation]:
    """`self.width` read where `self.height` was meant: another data attribute of the same object."""
    siblings = _data_attributes(ast.parse(src.data))
    called = {id(n.func) for n in ast.walk(unit) if isinstance(n, ast.Call)}
    out = []
    for node in ast.walk(unit):
        if (
            not isinstance(node, ast.Attribute)
            or not isinstance(node.ctx, ast.Load)
            or not isinstance(node.value, ast.Name)
            or id(node) in called
        ):
            continue
        start, end = _attr_span(src, node)
        for other in sorted(siblings.get(node.value.id, set()) - {node.attr}):
            out.append(Mutation("wrong_attribute", start, end, other, f".{node.attr} -> .{other}"))
    return out
