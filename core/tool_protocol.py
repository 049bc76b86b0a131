"""The Tool protocol and what a call gives back (ToolResult), the tool kinds permissions go by,
the permission modes, and a tool's spec as the model is shown it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from clover.core.model_protocol import ToolSpec

if TYPE_CHECKING:
    from clover.core.environment_protocol import Environment


@dataclass
class ToolResult:
    """What a call did: `output` is the text the model sees; the fields beside it say the same in
    structured form, for the parts of Clover that act on it (nothing parses `output` back)."""

    output: str
    is_error: bool = False
    # For renderers, not for the model: e.g. {"diff": "...", "path": "..."}.
    data: dict[str, Any] = field(default_factory=dict)
    # Workspace paths (as the tool shows them) this call changed: an edit's file, a commit's files.
    paths: tuple[str, ...] = ()
    exit_code: int | None = None  # the command's exit status, for a call that ran one
    edited: bool = False  # a file tool changed a file (a fix may answer after one)
    # For each line of `output`, the workspace files it shows (a search hit's, a diff section's);
    # empty for a line of none, and for a result that does not say (read rules screen by it).
    line_files: tuple[tuple[str, ...], ...] = ()


# A tool message's key (beside OpenAI's) for the paths the call edited, so the model layer can say
# what was changed (steering/competence.py) without reading the text back; backends do not send it.
EDITED_KEY = "edited"


# What a tool does, which decides how permissions treat it: "read" only reads files (plan mode
# runs it; `read(...)` rules cover its path), "edit" changes files through the file tools
# (`edit(...)` rules; auto-edit allows it), "run" runs shell commands (`bash(...)` rules), "git"
# reads the repository or commits (per call: `is_read_only`), "other" anything else.
ToolKind = Literal["read", "edit", "run", "git", "other"]


@runtime_checkable
class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    kind: ToolKind

    def run(self, args: dict[str, Any], env: Environment) -> ToolResult: ...

    def is_read_only(self, args: dict[str, Any]) -> bool:
        """Whether this call cannot change files or run commands: a "read" tool's calls. A tool
        whose answer depends on the call (git: status reads, commit writes) overrides it."""
        return self.kind == "read"

    def preview(self, args: dict[str, Any], env: Environment) -> str | None:
        """The diff this call would make, from the tool's own dry run, so an approval shows exactly
        what runs; None for a tool without a dry run, or an edit it cannot make (its run says why)."""
        return None


def tool_spec(tool: Tool) -> ToolSpec:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


# Permission modes, strictest first (tools/safety/permissions.py enforces them; the settings choose one).
MODES = ("plan", "ask", "auto-edit", "yolo")
