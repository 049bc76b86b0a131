"""Literal bug families: a position one off (off_by_one), a wrong constant and a wrong parameter default.

Each turns a unit's AST into `Mutation`s as families.py's do; they share the tables of plausible
wrong values (a 7 for a 6, "-" for "_") and the rule that 0 and 1 belong to off_by_one.
"""

from __future__ import annotations

import ast

from clover.evals.synthfix.source_edit import Mutation, Source, functions, plus_text


def _docstring_nodes(unit: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(unit):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _default_nodes(unit: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(unit):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in [*node.args.defaults, *node.args.kw_defaults]:
                if d is not None:
                    ids.update(id(n) for n in ast.walk(d))
    return ids


def _int_const(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int_const(node.operand)
        return None if inner is None else -inner
    return None


def _shift(src: Source, node: ast.AST, delta: int, note: str) -> Mutation:
    """`node` moved by one: constants change value, `x ± 1` loses its correction, others gain one."""
    start, end = src.span(node)
    value = _int_const(node)
    if value is not None:
        new = value + (delta if value >= 0 else -delta)
        return Mutation("off_by_one", start, end, str(new), f"{note}: {value} -> {new}")
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, (ast.Add, ast.Sub))
        and isinstance(node.right, ast.Constant)
        and node.right.value == 1
    ):
        return Mutation("off_by_one", start, end, src.seg(node.left), f"{note}: dropped ± 1")
    return Mutation("off_by_one", start, end, plus_text(src, node, delta), f"{note}: {delta:+d}")


_INDEX_NAMES = {"i", "j", "k", "n", "idx", "index", "mid", "pos", "position", "start", "end"}


def _index_names(unit: ast.AST) -> set[str]:
    """Names used as positions: loop variables over `range(...)` plus conventional index names."""
    names = set(_INDEX_NAMES)
    for node in ast.walk(unit):
        if (
            isinstance(node, (ast.For, ast.comprehension))
            and isinstance(node.target, ast.Name)
            and isinstance(node.iter, ast.Call)
            and isinstance(node.iter.func, ast.Name)
            and node.iter.func.id in ("range", "enumerate")
        ):
            names.add(node.target.id)
    return names


def off_by_one(src: Source, unit: ast.AST) -> list[Mutation]:
    out = []
    for node in ast.walk(unit):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            args = node.args
            if len(args) == 1:
                out.append(_shift(src, args[0], -1, "range stop"))
            elif len(args) >= 2:
                out.append(_shift(src, args[1], 1, "range stop"))
                out.append(_shift(src, args[0], 1, "range start"))
        elif isinstance(node, ast.Slice):
            if node.lower is not None:
                out.append(_shift(src, node.lower, 1, "slice lower"))
            if node.upper is not None:
                out.append(
                    _shift(src, node.upper, -1 if _int_const(node.upper) is None else 1, "slice upper")
                )
        elif isinstance(node, ast.Subscript) and not isinstance(node.slice, (ast.Slice, ast.Tuple)):
            idx = node.slice
            # Only positions: int literals, arithmetic, and names that hold an index (not dict keys).
            if (
                _int_const(idx) is not None
                or isinstance(idx, ast.BinOp)
                or (isinstance(idx, ast.Name) and idx.id in _index_names(unit))
            ):
                out.append(_shift(src, idx, 1, "index"))
    return out


_INT_TABLE = {
    2: 3,
    3: 2,
    7: 6,
    10: 100,
    12: 10,
    24: 12,
    60: 100,
    100: 10,
    365: 360,
    1000: 1024,
    1024: 1000,
    3600: 60,
}
_FLOAT_TABLE = {0.5: 0.25, 1.8: 1.6, 32.0: 23.0, 100.0: 10.0, 1.609344: 1.6, 0.621371: 0.6}
_STR_TABLE = {
    "-": "_",
    "_": "-",
    ",": ";",
    ";": ",",
    ":": "=",
    "=": ":",
    ".": ",",
    " ": "",
    "...": "..",
    "\n": " ",
}


def _new_number(value: float) -> float | None:
    if type(value) is int:
        if abs(value) < 2:
            return None  # 0 and 1 belong to off_by_one
        return _INT_TABLE.get(value, value + 1 if value < 10 else value * 10)
    if type(value) is float:
        return _FLOAT_TABLE.get(value, round(value * 10, 6) if value else None)
    return None


def _new_literal(value: object) -> object | None:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return _new_number(value)
    if isinstance(value, str):
        if value in _STR_TABLE:
            return _STR_TABLE[value]
        if 1 < len(value) <= 12 and value.upper() != value:
            return value.upper()
    return None


def wrong_constant(src: Source, unit: ast.AST) -> list[Mutation]:
    skip = _docstring_nodes(unit) | _default_nodes(unit)
    fstrings = {id(v) for n in ast.walk(unit) if isinstance(n, ast.JoinedStr) for v in n.values}
    out = []
    for node in ast.walk(unit):
        if not isinstance(node, ast.Constant) or id(node) in skip or id(node) in fstrings:
            continue
        if isinstance(node.value, bool) or node.value is None:
            continue
        new = _new_literal(node.value)
        if new is None or new == node.value:
            continue
        start, end = src.span(node)
        out.append(Mutation("wrong_constant", start, end, repr(new), f"{node.value!r} -> {new!r}"))
    return out


def wrong_default(src: Source, unit: ast.AST) -> list[Mutation]:
    out = []
    for fn in functions(unit):
        for d in [*fn.args.defaults, *fn.args.kw_defaults]:
            if isinstance(d, ast.Constant) and d.value is not None:
                new = _new_literal(d.value)
                if new is not None and new != d.value:
                    start, end = src.span(d)
                    out.append(
                        Mutation("wrong_default", start, end, repr(new), f"default {d.value!r} -> {new!r}")
                    )
    return out
