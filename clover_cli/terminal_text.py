"""Text from outside Clover as a terminal must show it: the model's words and thinking, tool output,
tool and file names, a server's messages. Every character that would act on the terminal instead
of being shown becomes a visible escape: C0 controls but newline and tab (`\\r`, `\\b`, `\\a`, ESC as
`\\e`, so every CSI / OSC / DCS sequence: cursor moves, clearing the screen, an OSC 52 clipboard
write, a window title), DEL, the C1 controls (`\\x9b` is CSI on its own), and the invisible or
direction-changing Unicode (zero-width characters, bidi embeddings, overrides and isolates, line
and paragraph separators, tag characters, BOM). Bytes that were not UTF-8 (kept as surrogate
escapes) show as `\\xNN`. Newlines and tabs stay; CRLF line ends become newlines.

One place: `visible` is the function; the chat draws through a `GuardedConsole`, which applies it
to every piece of text rich is about to write (Clover's own styling is rendered from styles, not
text, and cursor control from rich's control segments, so both stay), and the headless outputs
(`clover -p` text, `clover fix`'s report, stderr lines) call `visible` before they print. Callers
still apply it where a renderable is built, so that widths are measured on what will be shown."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.segment import Segment

# Everything a terminal acts on or hides. Kept as one character class so that clean text (nearly
# all of it) is passed by a single regex search.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\ufeff\ufff9-\ufffb\ud800-\udfff\U000e0000-\U000e007f]"
)
_NAMES = {"\x1b": "\\e", "\r": "\\r", "\b": "\\b", "\a": "\\a", "\f": "\\f", "\v": "\\v", "\x00": "\\0"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group(0)
    code = ord(ch)
    if ch in _NAMES:
        return _NAMES[ch]
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str) -> str:
    """`text` with every character that would act on a terminal (or hide) shown as an escape."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_escape, text.replace("\r\n", "\n"))


class GuardedConsole(Console):
    """A rich console that never writes a control character it did not make itself: every text
    segment passes `visible` on its way out (control segments, rich's own cursor moves, pass)."""

    def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and segment.text and _UNSAFE.search(segment.text):
                yield Segment(visible(segment.text), segment.style, None)
            else:
                yield segment


__all__ = ["GuardedConsole", "visible"]
