"""Bug families: each finds the places in one function or class where a realistic bug can be injected.

A family turns a unit's AST into `Mutation`s (a byte span of the module source and its replacement).
Whether a mutation is a useful bug (changes some observed behaviour) is decided by the generator,
which runs the module's example calls against the correct and the mutated code. The literal
families (off_by_one, wrong_constant, wrong_default) are in literal_families.py, the train-only ones
in training_families.py; `candidates` dispatches to all of them.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Callable

from clover.evals.synthfix.literal_families import off_by_one, wrong_constant, wrong_default
from clover.evals.synthfix.source_edit import Mutation, Source, apply, functions, gap_token
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


def missing_return(src: Source, unit: ast.AST) -> list[Mutation]:
    """The function's final `return <value>` line is gone, so it falls off the end and gives None."""
    out = []
    for fn in functions(unit):
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
    for fn in functions(unit):
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
