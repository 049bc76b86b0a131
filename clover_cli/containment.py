"""What bounds the agent's commands in this run, said once at start, in `/status` and in every
headless report: the sandbox, the step boundary and the exec check, each on or off and why.

The words are the same everywhere, and they say what the guarantee is: the sandbox (what a
command can read and write outside the workspace), the step boundary (what it may leave in the
workspace: tools/safety/boundary.py) and undo. Deny rules and the exec check refuse programs as they
start; they are defence in depth (a program written to race the check, or work done inside a
process, is bounded by the sandbox and the boundary, not by them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFENCE_IN_DEPTH = (
    "deny rules and the exec check are defence in depth; the sandbox, the step boundary and undo "
    "are what bound a command"
)


@dataclass(frozen=True)
class Containment:
    sandbox: bool
    sandbox_why: str  # why it is off ("" when on)
    boundary: bool
    boundary_why: str
    exec_check: bool
    exec_why: str

    @property
    def contained(self) -> bool:
        """Commands run in the sandbox: allow rules may run them unasked."""
        return self.sandbox

    def line(self) -> str:
        """One line for the start of a run and `/status`."""
        parts = [
            "sandbox " + ("on" if self.sandbox else f"OFF ({self.sandbox_why})"),
            "step boundary " + ("on" if self.boundary else f"OFF ({self.boundary_why})"),
            "exec check " + ("on" if self.exec_check else f"off ({self.exec_why})"),
        ]
        return "containment: " + " · ".join(parts)

    def warnings(self, mode: str) -> list[str]:
        """What the user must know before the first command: what is not bounded here."""
        out = []
        if not self.sandbox:
            asked = (
                "every command runs unasked (yolo)" if mode == "yolo" else "so every command is asked first"
            )
            out.append(
                f"no sandbox ({self.sandbox_why}): commands can read your files and write anywhere you can, "
                f"{asked}"
            )
        if not self.boundary:
            out.append(
                f"no step boundary ({self.boundary_why}): what a command changes is found by scanning after "
                "it; a command that removes .git or git objects cannot be undone"
            )
        if mode == "yolo":
            out.append("yolo mode: commands and edits run without asking (deny rules still hold)")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "sandbox": self.sandbox,
            "sandbox_off_because": self.sandbox_why or None,
            "step_boundary": self.boundary,
            "step_boundary_off_because": self.boundary_why or None,
            "exec_check": self.exec_check,
            "exec_check_off_because": self.exec_why or None,
            "note": DEFENCE_IN_DEPTH,
        }


def of(settings: Any, env: Any) -> Containment:
    """The containment of an environment built by runner.build_environment (a container
    environment: the container is the sandbox, and it has no host boundary)."""
    from clover.tools.safety import sandbox

    if env.host_root() is None:
        return Containment(True, "", False, "the workspace is in a container", False, "in a container")
    sandboxed = env.sandbox is not None
    if sandboxed:
        sandbox_why = ""
    elif settings.sandbox is False:
        sandbox_why = "sandbox = false"
    else:
        sandbox_why = sandbox.unavailable_reason() or "off"
    boundary = env.boundary is not None
    boundary_why = "" if boundary else ("boundary = false" if settings.boundary is False else _boundary_why())
    checking = bool(env.exec_guard is not None and env.exec_guard.check)
    exec_why = "" if checking else ("exec_check = false" if settings.exec_check is False else _exec_why())
    return Containment(sandboxed, sandbox_why, boundary, boundary_why, checking, exec_why)


def _boundary_why() -> str:
    from clover.tools.safety.boundary import available
    from clover.tools.statehome import private_dir

    works, why = available(private_dir("steps"))
    return "off" if works else why


def _exec_why() -> str:
    from clover.tools.safety.execguard import unavailable_reason

    return unavailable_reason() or "off"


__all__ = ["DEFENCE_IN_DEPTH", "Containment", "of"]
