"""@path mentions: each file a message names inside the repository is attached to it, so the model
reads it without a tool call. Checked before anything is sent: a missing file, a directory, a binary
file or a path outside the repository is said, never dropped without a word; files that do not fit
in the room left in the model's context stop the message (it goes back to the prompt, nothing lost)
instead of failing later at the model."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

MENTION = re.compile(r"(?<![\w@])@([\w./~+-][^\s]*)")
CHARS_PER_TOKEN = 4  # the estimate compaction uses too
UNKNOWN_WINDOW_ROOM = 32_000  # tokens attached at most when the model does not say its context


def estimate(text: str) -> int:
    return len(text) // CHARS_PER_TOKEN + 4


@dataclass
class Attached:
    text: str  # the message with the files appended
    added: list[tuple[str, int]] = field(default_factory=list)  # (path as written, ~tokens)
    notes: list[str] = field(default_factory=list)  # mentions not attached, and why
    refusal: str = ""  # why the message cannot be sent as it is (too big for the context)


def attach_mentions(text: str, root: str | Path, room: int | None, window: int = 0) -> Attached:
    """`room`: tokens the context has left for the files (None: the window is unknown)."""
    root_path = Path(root).resolve()
    added: list[tuple[str, int]] = []
    notes: list[str] = []
    blocks: list[str] = []
    for match in MENTION.finditer(text):
        rel = match.group(1).rstrip(".,;:!?)'\"")
        if rel in (a for a, _ in added):
            continue
        path = (root_path / os.path.expanduser(rel)).resolve()
        if path != root_path and root_path not in path.parents:
            notes.append(f"@{rel} is outside the repository: not attached")
            continue
        if not path.exists():
            notes.append(f"@{rel}: no such file in the repository (left as text)")
            continue
        if not path.is_file():
            notes.append(f"@{rel} is a directory: not attached (mention its files, or ask the agent to look)")
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            notes.append(f"@{rel} cannot be read ({exc.strerror or exc}): not attached")
            continue
        body = _text(data)
        if body is None:
            notes.append(f"@{rel} is a binary file ({len(data):,} bytes): not attached")
            continue
        block = f'<file path="{rel}">\n{body}\n</file>'
        added.append((rel, estimate(block)))
        blocks.append(block)
    result = Attached(text + ("\n\n" + "\n\n".join(blocks) if blocks else ""), added, notes)
    total = sum(tokens for _, tokens in added)
    limit = UNKNOWN_WINDOW_ROOM if room is None else max(room, 0)
    if added and total > limit:
        sizes = ", ".join(f"@{rel} ~{tokens:,}" for rel, tokens in added)
        context = (
            f"the model's {window:,}-token context has room for ~{limit:,} more"
            if room is not None
            else f"the model's context is unknown, so at most ~{limit:,} tokens are attached"
        )
        result.refusal = (
            f"not sent: the mentioned files are ~{total:,} tokens ({sizes}) and {context}. "
            "Mention less, or ask about the part you need (the agent reads line ranges)."
        )
    return result


def _text(data: bytes) -> str | None:
    """The file as text, or None when it is binary (a NUL byte, or not UTF-8 at all)."""
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        decoded = data.decode("utf-8", errors="replace")
        return None if decoded.count("\ufffd") > len(decoded) // 20 else decoded
