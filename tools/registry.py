"""The agent's default tool set."""

from __future__ import annotations

from clover.core.tool_protocol import Tool, ToolKind
from clover.tools.files import CreateTool, InsertTool, StrReplaceTool, ViewTool
from clover.tools.git_tools import GitTool
from clover.tools.outline import OutlineTool
from clover.tools.search import GlobTool, GrepTool
from clover.tools.shell import BashTool


def default_tools() -> list[Tool]:
    return [
        ViewTool(),
        CreateTool(),
        StrReplaceTool(),
        InsertTool(),
        GlobTool(),
        GrepTool(),
        BashTool(),
        GitTool(),
        OutlineTool(),
    ]


def tools_by_name(tools: list[Tool] | None = None) -> dict[str, Tool]:
    return {t.name: t for t in (default_tools() if tools is None else tools)}


def kind_of(name: str) -> ToolKind:
    """The kind of the default tool called `name` ("other" for a name none has): for code that
    knows a call only by its tool's name (a permission rule's check, a settings file's rule)."""
    tool = _DEFAULT_KINDS.get((name or "").lower())
    return tool if tool is not None else "other"


_DEFAULT_KINDS: dict[str, ToolKind] = {t.name: t.kind for t in default_tools()}
