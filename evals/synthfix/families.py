"""Bug families: each finds the places in one function or class where a realistic bug can be injected.

A family turns a unit's AST into `Mutation`s (a byte span of the module source and its replacement).
Whether a mutation is a useful bug (changes some observed behaviour) is decided by the generator,
which runs the module's example calls against the correct and the mutated code.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Callable

from clover.evals.synthfix.source_edit import Mutation, Source, apply, gap_token, plus_text
from clover.evals.synthfix.training_families import TRAIN_ONLY_FAMILIES, wrong_attribute, wrong_builtin

__all__ = [
    "FAMILIES",
    "TRAIN_FAMILIES",
    "TRAIN_ONLY_FAMILIES",
    "Mutation",
    "apply",
    "candidates",
    "split_families",
]

FAMILIES: tuple[str, ...] = (
    "wrong_operator",
    "off_by_one",
    "wrong_constant",
    "swapped_arguments",
    "wrong_comparison",
    "missing_return",
    "misspelt_name",
    "wrong_default",
    "inverted_condition",
)
# The train split also draws the train-only families (training_families.py says why).
TRAIN_FAMILIES: tuple[str, ...] = FAMILIES + TRAIN_ONLY_FAMILIES


def split_families(split: str) -> tuple[str, ...]:
    return TRAIN_FAMILIES if split == "train" else FAMILIES


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


# --------------------------------------------------------------------------- families

_OP_SWAP = {
    ast.Add: (r"\+", "-"),
    ast.Sub: (r"-", "+"),
    ast.Mult: (r"\*", "+"),
    ast.Div: (r"(?<!/)/(?!/)", "*"),
    ast.FloorDiv: (r"//", "/"),
    ast.Mod: (r"%", "//"),
    ast.Pow: (r"\*\*", "*"),
}


def wrong_operator(src: Source, unit: ast.AST) -> list[Mutation]:
    out = []
    for node in ast.walk(unit):
        if isinstance(node, ast.BinOp) and type(node.op) in _OP_SWAP:
            if isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant, ast.JoinedStr)):
                continue  # "%"-formatting, not arithmetic
            pattern, new = _OP_SWAP[type(node.op)]
            if isinstance(node.op, ast.Mult):
                pattern = r"(?<!\*)\*(?!\*)"
            tok = gap_token(src, node.left, node.right, pattern)
            if tok:
                out.append(Mutation("wrong_operator", tok[0], tok[1], new, f"{tok[2]} -> {new}"))
        elif isinstance(node, ast.AugAssign) and type(node.op) in _OP_SWAP:
            pattern, new = _OP_SWAP[type(node.op)]
            tok = gap_token(src, node.target, node.value, pattern + "=")
            if tok:
                out.append(Mutation("wrong_operator", tok[0], tok[1], new + "=", f"{tok[2]} -> {new}="))
        elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
            old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            tok = gap_token(src, node.values[0], node.values[1], rf"\b{old}\b")
            if tok:
                out.append(Mutation("wrong_operator", tok[0], tok[1], new, f"{old} -> {new}"))
    return out


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


def swapped_arguments(src: Source, unit: ast.AST) -> list[Mutation]:
    out = []
    for node in ast.walk(unit):
        if not isinstance(node, ast.Call) or len(node.args) < 2:
            continue
        a, b = node.args[0], node.args[1]
        if isinstance(a, ast.Starred) or isinstance(b, ast.Starred):
            continue
        ta, tb = src.seg(a), src.seg(b)
        if ta == tb:
            continue
        (sa, ea), (sb, eb) = src.span(a), src.span(b)
        middle = src.text(ea, sb)
        out.append(Mutation("swapped_arguments", sa, eb, tb + middle + ta, f"swap {ta} <-> {tb}"))
    return out


_CMP_TOKEN = r"<=|>=|<|>"
_CMP_VARIANTS = {"<": ("<=", ">"), "<=": ("<", ">="), ">": (">=", "<"), ">=": (">", "<=")}


def wrong_comparison(src: Source, unit: ast.AST) -> list[Mutation]:
    out = []
    for node in ast.walk(unit):
        if not isinstance(node, ast.Compare):
            continue
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
                tok = gap_token(src, left, right, _CMP_TOKEN)
                if tok:
                    for new in _CMP_VARIANTS[tok[2]]:
                        out.append(Mutation("wrong_comparison", tok[0], tok[1], new, f"{tok[2]} -> {new}"))
            left = right
    return out


def _functions(unit: ast.AST) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(unit) if isinstance(n, ast.FunctionDef)]


def missing_return(src: Source, unit: ast.AST) -> list[Mutation]:
    """The function's final `return <value>` line is gone, so it falls off the end and gives None."""
    out = []
    for fn in _functions(unit):
        last = fn.body[-1]
        if not isinstance(last, ast.Return) or last.value is None or len(fn.body) < 2:
            continue
        if len(fn.body) == 2 and isinstance(fn.body[0], ast.Expr):
            continue  # only a docstring would remain
        start = src.line_starts[last.lineno - 1]
        end = src.line_starts[last.end_lineno] if last.end_lineno < len(src.line_starts) else len(src.data)  # type: ignore[operator]
        out.append(Mutation("missing_return", start, end, "", f"removed {src.seg(last)!r}"))
    return out


def _typo(name: str) -> str | None:
    core = name.lstrip("_")
    if len(core) < 4:
        return None
    prefix = name[: len(name) - len(core)]
    for i in range(len(core) - 2, 0, -1):
        if core[i] in "aeiou" and core[i - 1] not in "_":
            return prefix + core[:i] + core[i + 1 :]
    return prefix + core[0] + core[2] + core[1] + core[3:]


def misspelt_name(src: Source, unit: ast.AST) -> list[Mutation]:
    whole = src.data.decode()
    out = []
    for fn in _functions(unit):
        local = {a.arg for a in [*fn.args.args, *fn.args.kwonlyargs]} - {"self", "cls"}
        local |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in local:
                name, (start, end) = node.id, src.span(node)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                name = node.attr
                end = src.span(node)[1]
                start = end - len(name.encode())
            else:
                continue
            typo = _typo(name)
            if typo is None or hasattr(builtins, typo) or re.search(rf"\b{re.escape(typo)}\b", whole):
                continue
            out.append(Mutation("misspelt_name", start, end, typo, f"{name} -> {typo}"))
    return out


def wrong_default(src: Source, unit: ast.AST) -> list[Mutation]:
    out = []
    for fn in _functions(unit):
        for d in [*fn.args.defaults, *fn.args.kw_defaults]:
            if isinstance(d, ast.Constant) and d.value is not None:
                new = _new_literal(d.value)
                if new is not None and new != d.value:
                    start, end = src.span(d)
                    out.append(
                        Mutation("wrong_default", start, end, repr(new), f"default {d.value!r} -> {new!r}")
                    )
    return out


_FLIP = {ast.Eq: "!=", ast.NotEq: "==", ast.In: "not in", ast.NotIn: "in", ast.Is: "is not", ast.IsNot: "is"}
_FLIP_TOKEN = {
    ast.Eq: r"==",
    ast.NotEq: r"!=",
    ast.In: r"\bin\b",
    ast.NotIn: r"\bnot\s+in\b",
    ast.Is: r"\bis\b",
    ast.IsNot: r"\bis\s+not\b",
}


def inverted_condition(src: Source, unit: ast.AST) -> list[Mutation]:
    tests: list[ast.expr] = []
    for node in ast.walk(unit):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            tests.append(node.test)
        elif isinstance(node, ast.comprehension):
            tests.extend(node.ifs)
    out = []
    for test in tests:
        start, end = src.span(test)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            out.append(Mutation("inverted_condition", start, end, src.seg(test.operand), "dropped not"))
        elif isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _FLIP:
            tok = gap_token(src, test.left, test.comparators[0], _FLIP_TOKEN[type(test.ops[0])])
            if tok:
                new = _FLIP[type(test.ops[0])]
                out.append(Mutation("inverted_condition", tok[0], tok[1], new, f"{tok[2]} -> {new}"))
        else:
            text = src.seg(test)
            if isinstance(test, (ast.BoolOp, ast.IfExp, ast.NamedExpr, ast.Lambda)):
                text = f"({text})"
            out.append(Mutation("inverted_condition", start, end, f"not {text}", "added not"))
    return out


_FINDERS: dict[str, Callable[[Source, ast.AST], list[Mutation]]] = {
    "wrong_operator": wrong_operator,
    "off_by_one": off_by_one,
    "wrong_constant": wrong_constant,
    "swapped_arguments": swapped_arguments,
    "wrong_comparison": wrong_comparison,
    "missing_return": missing_return,
    "misspelt_name": misspelt_name,
    "wrong_default": wrong_default,
    "inverted_condition": inverted_condition,
    "wrong_builtin": wrong_builtin,
    "wrong_attribute": wrong_attribute,
}


def candidates(family: str, source: str, unit_name: str) -> list[Mutation]:
    """Every place in top-level function/class `unit_name` of `source` where `family` applies."""
    if family not in _FINDERS:
        raise ValueError(f"unknown bug family {family!r}; known: {', '.join(TRAIN_FAMILIES)}")
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == unit_name:
            src = Source(source)
            found = _FINDERS[family](src, node)
            # Deduplicate identical edits (two AST routes to the same span) keeping the first.
            seen: set[tuple[int, int, str]] = set()
            unique = []
            for m in found:
                if (m.start, m.end, m.replacement) not in seen:
                    seen.add((m.start, m.end, m.replacement))
                    unique.append(m)
            return unique
    raise KeyError(f"no top-level function or class named {unit_name!r}")
