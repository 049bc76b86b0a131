"""The agent's default tool set."""

from __future__ import annotations

from clover.core.protocols import Tool
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
