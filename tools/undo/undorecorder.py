"""The agent's hook into the undo checkpoints (tools/undo/checkpoints.py): Recorder opens one session's
requests and records each step that may change files into the current one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clover.tools.undo.undocapture import Captured

if TYPE_CHECKING:
    from clover.tools.undo.checkpoints import Checkpoints


class Recorder:
    """The agent's hook: `begin(step)` / `end(step)` around each tool call that may change files,
    recording into one session's current request (`start_request` opens the next one). Where the
    step boundary applied the call's changes, it hands them over exactly (`capture` before,
    `commit` after) and `end` has nothing left to scan."""

    def __init__(self, checkpoints: Checkpoints, session: str, label: str = "") -> None:
        self.checkpoints, self.session = checkpoints, session
        self.request, self.label = 0, label
        self.step: int | None = None
        self.exact = False
        if label:
            self.start_request(label)

    def start_request(self, label: str) -> None:
        self.request = self.checkpoints.next_request(self.session)
        self.label = label

    def begin(self, step: int) -> None:
        self.step, self.exact = step, False
        self.checkpoints.begin()

    def capture(self, paths: list[str]) -> Captured | None:
        if self.step is None:  # a command outside the agent's steps (the user's own `!cmd`)
            return None
        return self.checkpoints.capture(paths)

    def commit(self, before: Captured) -> None:
        if self.step is None:
            return
        if self.request == 0:
            self.start_request(self.label or "request")
        self.exact = True
        self.checkpoints.commit(self.session, self.request, self.label, self.step, before)

    def end(self, step: int) -> None:
        exact, self.step, self.exact = self.exact, None, False
        if exact:
            return
        if self.request == 0:
            self.start_request(self.label or "request")
        self.checkpoints.end(self.session, self.request, self.label, step)
