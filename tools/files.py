"""File tools: view, create, str_replace, insert.

Edits are byte-exact outside the edited region: files are decoded with surrogateescape (invalid
UTF-8 survives), CRLF files are matched with '\\n' and the new text is written back with CRLF,
and binary files are refused.

Each edit tool has a dry run, `plan(args, env) -> EditPlan` (the file's text before and after, or
an EditError saying why not); `run` writes exactly that plan, and the approval preview shows its diff.
Every edit of a Python file is checked before it is written (`_checked`): a plan that leaves a
file that parses now unparsable is refused, and so is one that makes the module use a name it
neither defines nor imports (pyflakes, pynames.py), each with the reason, so the model redoes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from clover.core.environment_protocol import Environment
from clover.core.tool_protocol import Tool, ToolKind, ToolResult
from clover.tools.dirview import directory_view
from clover.tools.editmatch import closest, normalise, occurrences, original
from clover.tools.paths import PathError
from clover.tools.pynames import describe, newly_undefined
from clover.tools.pysyntax import newly_broken
from clover.tools.textio import (
    arg_int,
    display_path,
    encode,
    error,
    lines_of,
    numbered,
    read_text,
    resolve,
    snippet,
    unified_diff,
    uses_crlf,
)

MAX_VIEW_LINES = 800
MAX_VIEW_CHARS = 40_000


def _schema(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


_PATH = {"type": "string", "description": "file path, relative to the workspace root or absolute"}


class EditError(ValueError):
    """Why an edit cannot be made as asked; the message is the tool's error output."""


@dataclass
class EditPlan:
    """An edit's exact change: `path` (absolute) goes from `old` to `new`; lines first-last of `new`
    are the edited region (for the tool's message)."""

    path: str
    rel: str
    old: str
    new: str
    existed: bool = True
    first: int = 1
    last: int = 1

    def diff(self) -> str:
        return unified_diff(self.old, self.new, self.rel, new_file=not self.existed)


def _write(tool: str, env: Environment, plan: EditPlan) -> str | None:
    """Write the plan's new text; an error message on failure."""
    try:
        env.write_file(plan.path, encode(plan.new))
    except OSError as exc:
        return f"{tool}: cannot write {plan.rel}: {exc.strerror or exc}"
    return None


def _checked(tool: str, plan: EditPlan) -> EditPlan:
    """The plan, or an EditError when it would leave a parsing Python file unparsable or using a
    name it does not define or import: nothing is written, and the model is told where, so a garbled
    edit is redone instead of breaking the module."""
    if problem := newly_broken(plan.rel, plan.old, plan.new):
        raise EditError(
            f"{tool}: not applied, the edit would leave {plan.rel} with a syntax error "
            f"({problem}); the file is unchanged. Write the new text as valid Python."
        )
    if names := newly_undefined(plan.rel, plan.old, plan.new):
        raise EditError(
            f"{tool}: not applied, the edit would make {plan.rel} use names it neither defines "
            f"nor imports: {describe(names)}; the file is unchanged. Use the module's own names, "
            "or import what the new code needs."
        )
    return plan


def _text_arg(args: dict[str, Any], *names: str, default: str | None = None) -> str:
    """A string argument (first of `names` present); lone surrogates from JSON are replaced."""
    for name in names:
        if name in args and args[name] is not None:
            value = args[name]
            if not isinstance(value, str):
                raise ValueError(f"{name} must be a string")
            return value.encode("utf-8", "replace").decode("utf-8")
    if default is None:
        raise ValueError(f"'{names[0]}' is required")
    return default


# --------------------------------------------------------------------------- view


@dataclass
class ViewTool(Tool):
    name: str = "view"
    description: str = (
        "Show a text file with line numbers (optionally only view_range [start, end], end -1 = end of "
        "file), or list a directory two levels deep."
    )
    parameters: dict[str, Any] = field(
        default_factory=lambda: _schema(
            {
                "path": _PATH,
                "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
            },
            ["path"],
        )
    )
    kind: ToolKind = "read"

    def run(self, args: dict[str, Any], env: Environment) -> ToolResult:
        try:
            full = resolve(env, args.get("path"))
        except PathError as exc:
            return error(str(exc))
        rel = display_path(env, full)
        info = env.stat(full)
        if info is not None and info.kind == "dir":
            return directory_view(env, full)
        try:
            text = read_text(env, full)
        except ValueError as exc:
            if "is a directory" in str(exc):
                return directory_view(env, full)
            return error(str(exc))
        lines = lines_of(text)
        total = len(lines)
        if total == 0:
            return ToolResult(f"{rel} is empty", data={"path": rel})
        start, end = 1, total
        ranged = args.get("view_range") not in (None, [], "")
        if ranged:
            try:
                start, end = _parse_range(args.get("view_range"), total)
            except ValueError as exc:
                return error(f"view {rel}: {exc}")
        shown = lines[start - 1 : end]
        cut = len(shown)
        if cut > MAX_VIEW_LINES:
            cut = MAX_VIEW_LINES
        size = 0
        for i, line in enumerate(shown[:cut]):
            size += min(len(line), 2000) + 8
            if size > MAX_VIEW_CHARS:
                cut = max(i, 1)
                break
        out = numbered(shown[:cut], start)
        if cut < len(shown):
            last = start + cut - 1
            out += (
                f"\n[{rel} has {total} lines; showing {start}-{last}. "
                f"Use view_range [{last + 1}, {min(last + MAX_VIEW_LINES, total)}] to see more.]"
            )
        return ToolResult(out, data={"path": rel})


def _parse_range(value: Any, total: int) -> tuple[int, int]:
    if isinstance(value, str):
        value = [int(v) for v in re.findall(r"-?\d+", value)]
    if not isinstance(value, list | tuple) or len(value) != 2 or not all(isinstance(v, int) for v in value):
        raise ValueError("view_range must be two integers [start, end]")
    start, end = value
    if end == -1 or end > total:
        end = total
    if start < 1 or start > total:
        raise ValueError(f"start line {start} is outside the file (lines 1-{total})")
    if end < start:
        raise ValueError(f"end line {end} is before start line {start}")
    return start, end


# --------------------------------------------------------------------------- create


class _PlannedEdit(Tool):
    """An edit tool with a dry run (`plan`): the approval's preview is that plan's diff."""

    def plan(self, args: dict[str, Any], env: Environment) -> EditPlan:
        raise NotImplementedError

    def preview(self, args: dict[str, Any], env: Environment) -> str | None:
        try:
            return self.plan(args, env).diff() or None
        except ValueError:  # EditError: e.g. old_str not found, or found twice
            return None


@dataclass
class CreateTool(_PlannedEdit):
    name: str = "create"
    description: str = (
        "Create a file with the given content, or overwrite it; parent directories are created."
    )
    parameters: dict[str, Any] = field(
        default_factory=lambda: _schema(
            {"path": _PATH, "file_text": {"type": "string"}}, ["path", "file_text"]
        )
    )
    kind: ToolKind = "edit"

    def plan(self, args: dict[str, Any], env: Environment) -> EditPlan:
        try:
            full = resolve(env, args.get("path"), write=True)
            content = _text_arg(args, "file_text", "content")
        except (PathError, ValueError) as exc:
            raise EditError(f"create: {exc}") from None
        rel = display_path(env, full)
        info = env.stat(full)
        if info is not None and info.kind == "dir":
            raise EditError(f"create: {rel} is a directory")
        try:
            old = read_text(env, full)
            existed = True
        except ValueError:
            old, existed = "", False
        return _checked("create", EditPlan(full, rel, old, content, existed))

    def run(self, args: dict[str, Any], env: Environment) -> ToolResult:
        try:
            plan = self.plan(args, env)
        except EditError as exc:
            return error(str(exc))
        if failed := _write("create", env, plan):
            return error(failed)
        verb = "Overwrote" if plan.existed else "Created"
        return ToolResult(
            f"{verb} {plan.rel} ({len(lines_of(plan.new))} lines)",
            data={"path": plan.rel, "diff": plan.diff()},
            paths=(plan.rel,),
            edited=True,
        )


# --------------------------------------------------------------------------- str_replace


def _span(first: int, last: int) -> str:
    return f"Line {first}" if first == last else f"Lines {first}-{last}"


@dataclass
class StrReplaceTool(_PlannedEdit):
    name: str = "str_replace"
    description: str = (
        "Replace old_str with new_str in a file. old_str must match exactly one place, whitespace "
        "included; add surrounding lines to make it unique. Empty new_str deletes."
    )
    parameters: dict[str, Any] = field(
        default_factory=lambda: _schema(
            {"path": _PATH, "old_str": {"type": "string"}, "new_str": {"type": "string"}},
            ["path", "old_str", "new_str"],
        )
    )
    kind: ToolKind = "edit"

    def plan(self, args: dict[str, Any], env: Environment) -> EditPlan:
        try:
            full = resolve(env, args.get("path"), write=True)
            old_str = _text_arg(args, "old_str")
            new_str = _text_arg(args, "new_str", default="")
            text = read_text(env, full)
        except (PathError, ValueError) as exc:
            raise EditError(f"str_replace: {exc}") from None
        rel = display_path(env, full)
        old_str, new_str = old_str.replace("\r\n", "\n"), new_str.replace("\r\n", "\n")
        if not old_str:
            raise EditError("str_replace: old_str is empty; use insert or create to add text")
        if old_str == new_str:
            raise EditError("str_replace: old_str and new_str are identical; nothing to change")
        norm, removed = normalise(text)
        hits = occurrences(norm, old_str)
        if not hits:
            raise EditError(closest(norm, old_str, rel))
        if len(hits) > 1:
            starts = ", ".join(str(norm.count("\n", 0, h) + 1) for h in hits[:20])
            raise EditError(
                f"str_replace: old_str occurs {len(hits)} times in {rel} (starting at lines "
                f"{starts}); include more surrounding lines so it matches exactly one place."
            )
        begin, end = original(hits[0], removed), original(hits[0] + len(old_str), removed)
        replacement = new_str.replace("\n", "\r\n") if uses_crlf(text) else new_str
        first = norm.count("\n", 0, hits[0]) + 1
        return _checked(
            "str_replace",
            EditPlan(
                full,
                rel,
                text,
                text[:begin] + replacement + text[end:],
                True,
                first,
                first + new_str.count("\n"),
            ),
        )

    def run(self, args: dict[str, Any], env: Environment) -> ToolResult:
        try:
            plan = self.plan(args, env)
        except EditError as exc:
            return error(str(exc))
        if failed := _write("str_replace", env, plan):
            return error(failed)
        return ToolResult(
            f"Edited {plan.rel}. {_span(plan.first, plan.last)} now read (with context):\n"
            f"{snippet(plan.new, plan.first, plan.last)}",
            data={"path": plan.rel, "diff": plan.diff()},
            paths=(plan.rel,),
            edited=True,
        )


# --------------------------------------------------------------------------- insert


@dataclass
class InsertTool(_PlannedEdit):
    name: str = "insert"
    description: str = "Insert text after line insert_line of a file (0 inserts at the top)."
    parameters: dict[str, Any] = field(
        default_factory=lambda: _schema(
            {"path": _PATH, "insert_line": {"type": "integer"}, "text": {"type": "string"}},
            ["path", "insert_line", "text"],
        )
    )
    kind: ToolKind = "edit"

    def plan(self, args: dict[str, Any], env: Environment) -> EditPlan:
        try:
            full = resolve(env, args.get("path"), write=True)
            line_no = arg_int(args, "insert_line")
            new = _text_arg(args, "text", "new_str").replace("\r\n", "\n")
            text = read_text(env, full)
        except (PathError, ValueError) as exc:
            raise EditError(f"insert: {exc}") from None
        rel = display_path(env, full)
        total = len(lines_of(text))
        if line_no is None or not 0 <= line_no <= total:
            raise EditError(f"insert: insert_line must be between 0 and {total} (the file has {total} lines)")
        nl = "\r\n" if uses_crlf(text) else "\n"
        if not new.endswith("\n"):
            new += "\n"
        new = new.replace("\n", nl)
        starts = [0] + [m.end() for m in re.finditer("\n", text)]
        offset = starts[line_no] if line_no < len(starts) else len(text)
        if offset == len(text) and text and not text.endswith("\n"):
            new = nl + new  # the last line had no newline; end it before appending
        return _checked(
            "insert",
            EditPlan(
                full,
                rel,
                text,
                text[:offset] + new + text[offset:],
                True,
                line_no + 1,
                line_no + new.strip("\r\n").count("\n") + 1,
            ),
        )

    def run(self, args: dict[str, Any], env: Environment) -> ToolResult:
        try:
            plan = self.plan(args, env)
        except EditError as exc:
            return error(str(exc))
        if failed := _write("insert", env, plan):
            return error(failed)
        return ToolResult(
            f"Inserted {_span(plan.first, plan.last).lower()} into {plan.rel} (after line {plan.first - 1}):\n"
            f"{snippet(plan.new, plan.first, plan.last)}",
            data={"path": plan.rel, "diff": plan.diff()},
            paths=(plan.rel,),
            edited=True,
        )
