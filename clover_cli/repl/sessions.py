"""Saved chat sessions: one JSON file per session (messages + metadata) under the state directory,
rewritten atomically after every step so a crash or Ctrl-C loses nothing. Secrets are redacted."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clover.core.model_protocol import Message


def _redact(obj: Any) -> Any:
    from clover.tools.safety.redact import redact_obj

    return redact_obj(obj)


class SessionError(Exception):
    """A session that cannot be found or read; the message is one line for the user."""


@dataclass
class Session:
    id: str
    root: str
    model: str = ""
    mode: str = ""
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    title: str = ""
    messages: list[Message] = field(default_factory=list)
    totals: dict[str, Any] = field(default_factory=dict)  # status.Totals: requests, tokens, seconds
    # what wrote it: {"model": the name to build it again, "base_url": its server or "", "name": shown}
    backend: dict[str, str] = field(default_factory=dict)
    # how many lines each tool result (by message index) really had: the messages keep a cut copy
    result_lines: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class SessionStore:
    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)

    def path(self, session_id: str) -> Path:
        return self.dir / f"{session_id}.json"

    def save(self, session: Session) -> Path:
        session.updated = time.time()
        if not session.title:
            first = next((m for m in session.messages if m.get("role") == "user"), None)
            if first and isinstance(first.get("content"), str):
                session.title = (
                    first["content"].strip().splitlines()[0][:80] if first["content"].strip() else ""
                )
        self.dir.mkdir(parents=True, exist_ok=True)
        data = json.dumps(_redact(session.to_json()), ensure_ascii=False, indent=1, default=str)
        fd, tmp = tempfile.mkstemp(prefix=".session-", dir=self.dir)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
        os.replace(tmp, self.path(session.id))
        return self.path(session.id)

    def load(self, session_id: str) -> Session:
        path = self.path(session_id)
        if not path.is_file():
            matches = [s for s in self.ids() if s.startswith(session_id)]
            if len(matches) != 1:
                raise SessionError(
                    f"no saved session {session_id!r}" if not matches else f"{session_id!r} is ambiguous"
                )
            path = self.path(matches[0])
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            known = set(Session.__dataclass_fields__)
            return Session(**{k: v for k, v in data.items() if k in known})
        except (OSError, ValueError, TypeError) as exc:
            raise SessionError(f"cannot read session {path.name}: {exc}") from None

    def ids(self) -> list[str]:
        """Session ids, most recently updated last."""
        if not self.dir.is_dir():
            return []
        files = sorted(self.dir.glob("*.json"), key=lambda p: (p.stat().st_mtime, p.name))
        return [p.stem for p in files]

    def sessions(self, root: str | None = None) -> list[Session]:
        out = []
        for sid in self.ids():
            try:
                session = self.load(sid)
            except SessionError:
                continue
            if root is None or session.root == root:
                out.append(session)
        return out

    def latest(self, root: str | None = None) -> Session | None:
        """The last session with a request in it (an opened-and-closed chat is nothing to resume)."""
        sessions = self.with_requests(root)
        return sessions[-1] if sessions else None

    def with_requests(self, root: str | None = None) -> list[Session]:
        """Sessions with something in them, oldest first."""
        return [s for s in self.sessions(root) if any(m.get("role") == "user" for m in s.messages)]

    def resolve(self, ref: str | None, root: str) -> Session:
        """`None`, '' or 'last': the latest session of this repository; otherwise an id (or prefix)."""
        if ref in (None, "", "last"):
            session = self.latest(root) or self.latest(None)
            if session is None:
                raise SessionError("no saved session to resume")
            return session
        return self.load(ref)
