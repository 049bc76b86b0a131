"""The house's shape, counted: modules over 400 lines, functions over 80, getattr/hasattr and regex calls.

Product code only (tests/, benchmarks/ and docs/ are left out). Counts, not a speed:

    python -m benchmarks.house_metrics [REPO] [--list]
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

PRODUCT_DIRS = (
    "clover_cli",
    "core",
    "model",
    "kernels",
    "tools",
    "steering",
    "decoding",
    "backends",
    "evals",
    "engines",
)
MODULE_LIMIT = 400
FUNCTION_LIMIT = 80
REGEX_CALLS = {"match", "search", "fullmatch", "findall", "finditer", "sub", "subn", "split", "compile"}


def product_files(repo: Path) -> list[Path]:
    return sorted(p for d in PRODUCT_DIRS if (repo / d).is_dir() for p in (repo / d).rglob("*.py"))


def _long_functions(tree: ast.AST, rel: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LIMIT:
                found.append((length, f"{rel}:{node.name}"))
    return found


def _calls(tree: ast.AST) -> tuple[int, int]:
    getattrs = regexes = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in ("getattr", "hasattr"):
            getattrs += 1
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "re":
            regexes += f.attr in REGEX_CALLS
    return getattrs, regexes


def measure(repo: Path) -> dict:
    modules, functions = [], []
    getattrs = regexes = 0
    for path in product_files(repo):
        rel = str(path.relative_to(repo))
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MODULE_LIMIT:
            modules.append((lines, rel))
        tree = ast.parse(text)
        functions += _long_functions(tree, rel)
        g, r = _calls(tree)
        getattrs += g
        regexes += r
    return {
        "modules_over_400": sorted(modules, reverse=True),
        "functions_over_80": sorted(functions, reverse=True),
        "getattr_hasattr": getattrs,
        "regex_calls": regexes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", nargs="?", default=".", type=Path)
    parser.add_argument("--list", action="store_true", help="name each long module and function")
    args = parser.parse_args(argv)
    m = measure(args.repo)
    print(f"modules > {MODULE_LIMIT} lines: {len(m['modules_over_400'])}")
    print(f"functions > {FUNCTION_LIMIT} lines: {len(m['functions_over_80'])}")
    print(f"getattr/hasattr calls: {m['getattr_hasattr']}")
    print(f"re.* calls: {m['regex_calls']}")
    if args.list:
        for n, name in m["modules_over_400"] + m["functions_over_80"]:
            print(f"  {n:5d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
