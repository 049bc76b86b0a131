"""One chat session's state, apart from how it is shown (ui.py): the settings as the session changed
them, the workspace and its environment, the model and the agent with its gate, the saved session
and what is kept with it (results' line counts, totals), and the counters of the request in hand."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clover.repl import compaction
from clover.repl.outputs import OutputStore, SeenLines
from clover.repl.sessions import Session, SessionStore, new_session_id
from clover.repl.status import Totals
from clover.settings import Settings

if TYPE_CHECKING:
    from clover.agent import Agent
    from clover.containment import Containment
    from clover.repl.observed import ObservedGate, ObservedModel
    from clover.tools.environment import LocalEnvironment


class ChatState:
    # Set once the agent is built (app.py): the environment first, the model and gate by the
    # wrappers runner.build_agent is given, the agent from it.
    env: LocalEnvironment
    model: ObservedModel
    gate: ObservedGate
    agent: Agent
    recorder: Any  # tools/undorecorder.Recorder, or None: /undo is off
    containment: Containment
    baseline: str | None  # the work tree when the session began (/diff)

    def __init__(self, settings: Settings, root: Path, home: Path) -> None:
        self.settings = settings
        self.root = root
        self.home = home
        self.store = SessionStore(home / "sessions")
        self.session = Session(new_session_id(), str(root), settings.model, settings.mode)
        self.outputs = OutputStore()
        self.outputs_seen = SeenLines()  # each result's real line count, saved with the session
        self.pending_lines: dict[str, int] = {}  # a result kept, its message not yet added
        self.history_by = ""  # the backend that wrote this session's earlier turns, when not this one
        self.context_tokens = 0
        self.current_request = ""
        self.user_commands = 0
        self.turn_stopped = False  # the user declined a call and says what to do next
        self.server_url = settings.base_url  # /model NAME asks this server, even after /model embedded
        self.totals = Totals()
        self.recorder = None
        self.baseline = None

    def open_recorder(self, error: Callable[[str], None]) -> Any:
        """What each agent step changes, recorded for /undo (None: checkpoints off or unusable,
        said through `error`)."""
        if not self.settings.checkpoints:
            return None
        try:
            from clover.tools.undo.checkpoints import Checkpoints
            from clover.tools.undo.undorecorder import Recorder

            return Recorder(Checkpoints(str(self.root)), self.session.id)
        except Exception as exc:  # a store that cannot be used: /undo says so
            error(f"checkpoints unavailable ({exc}): /undo will not work in this session")
            return None

    def model_name(self) -> str:
        return self.model.name

    def used_tokens(self) -> int:
        return max(self.context_tokens, compaction.estimate_tokens(self.agent.messages))

    def started(self) -> bool:
        """Whether the conversation has a request yet (only then is the session saved)."""
        return any(m.get("role") == "user" for m in self.agent.messages)

    def worktree(self) -> str | None:
        from clover.gitdiff import is_git_repo, worktree_tree

        try:
            return worktree_tree(self.root) if is_git_repo(self.root) else None
        except RuntimeError:
            return None
