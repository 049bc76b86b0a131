"""The `outline` tool: a file's classes/functions/methods, or where a symbol is defined, via tree-sitter."""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from typing import Any

from clover.core.environment_protocol import Environment
from clover.core.tool_protocol import Tool, ToolKind, ToolResult
from clover.tools.paths import PathError
from clover.tools.textio import display_path, error, is_binary, resolve

LANGUAGES = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
}

_JS = {
    "class_declaration": "class",
    "abstract_class_declaration": "class",
    "class": "class",
    "function_declaration": "function",
    "generator_function_declaration": "function",
    "method_definition": "method",
    "method_signature": "method",
    "abstract_method_signature": "method",
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
    "internal_module": "namespace",
    "variable_declarator": "function",
}
KINDS: dict[str, dict[str, str]] = {
    "python": {"class_definition": "class", "function_definition": "def"},
    "javascript": _JS,
    "typescript": _JS,
    "tsx": _JS,
    "go": {
        "function_declaration": "func",
        "method_declaration": "func",
        "type_spec": "type",
        "method_elem": "method",
    },
    "rust": {
        "function_item": "fn",
        "function_signature_item": "fn",
        "struct_item": "struct",
        "enum_item": "enum",
        "trait_item": "trait",
        "impl_item": "impl",
        "mod_item": "mod",
        "type_item": "type",
        "union_item": "union",
        "macro_definition": "macro",
    },
    "java": {
        "class_declaration": "class",
        "interface_declaration": "interface",
        "enum_declaration": "enum",
        "record_declaration": "record",
        "annotation_type_declaration": "@interface",
        "method_declaration": "method",
        "constructor_declaration": "constructor",
    },
}
_FUNCTION_VALUES = {"arrow_function", "function_expression", "function", "generator_function"}
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_RESULTS = 100


@dataclass
class Symbol:
    kind: str
    name: str
    params: str
    start: int  # 1-based lines
    end: int
    depth: int
    parents: tuple[str, ...]

    def label(self) -> str:
        return f"{self.kind} {self.name}{self.params}"


@functools.cache
def _parser(language: str):
    from tree_sitter_language_pack import get_parser  # loads the bundled grammars on first use

    return get_parser(language)


def language_of(path: str) -> str | None:
    return LANGUAGES.get(os.path.splitext(path)[1].lower())


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "replace") if node is not None else ""


def _squash(text: str, limit: int = 80) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 4] + " ...)"


def _describe(node: Any, language: str) -> tuple[str, str, str] | None:
    """(kind, name, params) when `node` defines a symbol, else None."""
    kind = KINDS[language].get(node.type)
    if kind is None:
        return None
    field_ = node.child_by_field_name
    params_node = field_("parameters")
    if node.type == "variable_declarator":  # const f = () => ... counts only for functions
        value = field_("value")
        if value is None or value.type not in _FUNCTION_VALUES:
            return None
        params_node = value.child_by_field_name("parameters") or value.child_by_field_name("parameter")
    if node.type == "impl_item":
        trait, typ = field_("trait"), field_("type")
        name = f"{_text(trait)} for {_text(typ)}" if trait is not None else _text(typ)
        return kind, name, ""
    name = _text(field_("name"))
    if not name:
        return None
    if node.type == "type_spec":
        typ = field_("type")
        kind = {"struct_type": "struct", "interface_type": "interface"}.get(typ.type if typ else "", "type")
    if node.type == "method_declaration" and language == "go":
        name = f"{_squash(_text(field_('receiver')))} {name}"
    params = _squash(_text(params_node)) if params_node is not None else ""
    if params and not params.startswith("("):
        params = f"({params})"
    return kind, name, params


def symbols(source: bytes, language: str) -> list[Symbol]:
    tree = _parser(language).parse(source)
    found: list[Symbol] = []

    def walk(node: Any, depth: int, parents: tuple[str, ...]) -> None:
        for child in node.children:
            if not child.is_named:
                continue
            info = _describe(child, language)
            if info is None:
                walk(child, depth, parents)
                continue
            kind, name, params = info
            found.append(
                Symbol(kind, name, params, child.start_point[0] + 1, child.end_point[0] + 1, depth, parents)
            )
            walk(child, depth + 1, (*parents, name))

    walk(tree.root_node, 0, ())
    return found


def _short_name(name: str) -> str:
    """`(s *Server) Start` -> `Start`; `Display for P` -> `P`."""
    return name.rsplit(" ", 1)[-1]


@dataclass
class OutlineTool(Tool):
    name: str = "outline"
    description: str = (
        "Code structure via tree-sitter (Python, JS, TS, Go, Rust, Java). With `path` of a file: its "
        "classes, functions and methods with line ranges. With `symbol` (e.g. 'parse' or 'Parser.parse'): "
        "where it is defined (file:first-last line) across the repository (or under `path`)."
    )
    parameters: dict[str, Any] = field(
        default_factory=lambda: {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "a source file, or a directory to search in"},
                "symbol": {"type": "string", "description": "name to find definitions of"},
            },
        }
    )
    kind: ToolKind = "read"

    def run(self, args: dict[str, Any], env: Environment) -> ToolResult:
        symbol, path = args.get("symbol"), args.get("path")
        if not symbol and not path:
            return error("outline: give `path` (a file to outline) or `symbol` (a name to find)")
        try:
            full = resolve(env, path or ".")
        except PathError as exc:
            return error(f"outline: {exc}")
        if symbol:
            if not isinstance(symbol, str):
                return error("outline: symbol must be a string")
            return self._find(env, full, symbol.strip())
        return self._outline(env, full)

    def _outline(self, env: Environment, full: str) -> ToolResult:
        rel = display_path(env, full)
        language = language_of(full)
        if language is None:
            exts = ", ".join(sorted(LANGUAGES))
            return error(f"outline: {rel}: unsupported file type (supported: {exts})")
        try:
            data = env.read_file(full)
        except OSError as exc:
            return error(f"outline: {rel}: cannot read: {exc.strerror or exc}")
        if is_binary(data):
            return error(f"outline: {rel}: binary file")
        found = symbols(data, language)
        if not found:
            return ToolResult(f"{rel}: no classes or functions found", data={"path": rel})
        lines = [f"{'  ' * s.depth}{s.label()}  L{s.start}-{s.end}" for s in found]
        return ToolResult(f"{rel}:\n" + "\n".join(lines), data={"path": rel})

    def _find(self, env: Environment, full: str, symbol: str) -> ToolResult:
        *qualifiers, name = symbol.split(".")
        if not name:
            return error(f"outline: invalid symbol {symbol!r}")
        info = env.stat(full)
        if info is not None and info.kind == "file":
            base, files = os.path.dirname(full), [os.path.basename(full)]
        else:
            base, files = full, env.list_files(full)
        hits: list[str] = []
        files_of: list[tuple[str, ...]] = []  # the file each hit's line names
        needle = name.encode()
        for rel in files:
            language = language_of(rel)
            if language is None:
                continue
            path = os.path.join(base, rel)
            try:  # a listed file may be a symlink: contained like every file-tool path
                real = resolve(env, path)
                stat = env.stat(real)
                if stat is None or stat.kind != "file" or stat.size > MAX_FILE_BYTES:
                    continue
                data = env.read_file(real)
            except (OSError, PathError):
                continue
            if needle not in data or is_binary(data):
                continue
            for s in symbols(data, language):
                if _short_name(s.name) != name and s.name != name:
                    continue
                parents = [_short_name(p) for p in s.parents]
                where = f"  (in {'.'.join(parents)})" if parents else ""
                receiver = re.match(r"\(.*?(\w+)\) ", s.name)  # Go: `(r *Rect) Area` belongs to Rect
                if receiver:
                    parents.append(receiver.group(1))
                if qualifiers and parents[-len(qualifiers) :] != qualifiers:
                    continue
                hits.append(f"{display_path(env, path)}:{s.start}-{s.end}: {s.label()}{where}")
                files_of.append((display_path(env, path),))
            if len(hits) >= MAX_RESULTS:
                hits.append(f"[stopped after {MAX_RESULTS} definitions; give a path to narrow]")
                break
        if not hits:
            return ToolResult(f"no definition of {symbol!r} found under {display_path(env, full)}")
        return ToolResult("\n".join(hits), data={"count": len(hits)}, line_files=tuple(files_of))
