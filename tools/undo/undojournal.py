"""The undo store's journal (`journal.json`): its format and version, reading it back (a journal that
cannot be read, or of another version, reads as empty) and writing it, the requests its records
form (Group), and trimming it to the last KEEP_GROUPS requests. The store's JSON files (the scan
cache too) are written here: private, and replaced whole so that a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from clover.tools.undo.undorecord import Record

JOURNAL_VERSION = 4  # 4: refs recorded as git state (tools/undo/gitstate.py)
KEEP_GROUPS = 200  # older requests' records are dropped (their contents stay in the object store)


@dataclass
class Group:
    """One request's records: what `clover undo` names before it acts."""

    session: str
    request: int
    label: str
    records: list[Record]

    @property
    def steps(self) -> list[int]:
        return sorted({r.step for r in self.records})

    def state(self) -> str:
        states = {c.state for r in self.records for c in r.changes} | {
            m.state for r in self.records for m in r.moves
        }
        return "undone" if states == {"undone"} else "applied" if states == {"applied"} else "partly undone"


def held_key(group: Group) -> str:
    """The key of a request in the journal's `held` and `pending` entries."""
    return f"{group.session}\n{group.request}"


def load_json(path: str, default: Any) -> Any:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


def write_json(path: str, data: Any) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as fh:
        fh.write(json.dumps(data, separators=(",", ":")))  # dumps: the C encoder (dump is Python)
    os.replace(tmp, path)


def load(path: str) -> dict[str, Any]:
    data = load_json(path, {})
    if not isinstance(data, dict) or data.get("version") != JOURNAL_VERSION:
        data = {}
    try:
        records = [Record.load(r) for r in data.get("records", [])]
    except (KeyError, TypeError, ValueError, IndexError):
        records = []
    return {
        "records": records,
        "redo": list(data.get("redo", [])),
        "undone": list(data.get("undone", [])),
        "clock": int(data.get("clock", 0)),
        "touched": dict(data.get("touched", {})),
        "agent_repos": list(data.get("agent_repos", [])),
        "held": dict(data.get("held", {})),
        "pending": dict(data.get("pending", {})),
        "next_id": int(data.get("next_id", max((r.id for r in records), default=0) + 1)),
    }


def save(path: str, journal: dict[str, Any]) -> None:
    data = {**journal, "version": JOURNAL_VERSION, "records": [r.dump() for r in journal["records"]]}
    write_json(path, data)


def groups(journal: dict[str, Any], session: str | None) -> list[Group]:
    """The requests of `session` (every session's with None), oldest first."""
    found: dict[tuple[str, int], Group] = {}
    for rec in journal["records"]:
        if session is None or rec.session == session:
            found.setdefault(rec.group, Group(rec.session, rec.request, rec.label, [])).records.append(rec)
    return sorted(found.values(), key=lambda g: max(r.id for r in g.records))


def trim(journal: dict[str, Any]) -> None:
    all_groups = list(dict.fromkeys(r.group for r in journal["records"]))
    if len(all_groups) > KEEP_GROUPS:
        keep = set(all_groups[-KEEP_GROUPS:])
        journal["records"] = [r for r in journal["records"] if r.group in keep]
        recorded = {c.path for r in journal["records"] for c in r.changes}
        journal["touched"] = {p: t for p, t in journal["touched"].items() if p in recorded}
        kept = {held_key(g) for g in groups(journal, None)}
        journal["held"] = {k: v for k, v in journal["held"].items() if k in kept}
