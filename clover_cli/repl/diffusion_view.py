"""The live line of the block-diffusion decoder: the current block, its still-masked positions
shown as ░, filling in round by round from `block_round` events. The chat template's markup
(`</think>`, `<tool_call>`, `<function=bash>`, `<|im_end|>`, whole or still being filled in) is
shown as what it means: a call as `⏺ bash command=ls`, the rest not at all."""

from __future__ import annotations

import re

from rich.text import Text

from clover.core.model_protocol import StreamEvent

MASK = "░"
_HOLE = "\x00"  # a masked position while the markup is rewritten
_TAGS = (
    "think>",
    "/think>",
    "tool_call>",
    "/tool_call>",
    "function=",
    "/function>",
    "parameter=",
    "/parameter>",
    "|im_end|>",
    "|im_start|>",
    "|endoftext|>",
)
_TAIL = re.compile(r"[a-z_|/]+>")  # the end of a tag whose start is still masked (`_call>`)


def _meaning(inner: str, closed: bool) -> str | None:
    """What a piece of markup `<inner>` (or `<inner` cut by a mask) stands for; None: not markup."""
    key = inner[: inner.index("=") + 1] if "=" in inner else inner + (">" if closed else "")
    if not any(tag.startswith(key) for tag in _TAGS):
        return None
    value = inner[len(key) :] if key.endswith("=") else ""
    if key == "tool_call>":
        return "⏺ "
    if key == "function=":
        return f"{value} " if value else ""
    if key == "parameter=":
        return f"{value}=" if value else ""
    return " " if key in ("/think>", "/parameter>") else ""


def visible(tokens: list[str | None]) -> str:
    """The block as the user reads it: markup rewritten, masks as ░, newlines as ⏎."""
    text = "".join(_HOLE if t is None else t for t in tokens).replace("\r", "")
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "<":
            j = i + 1
            while j < len(text) and text[j] not in "<>\n" + _HOLE:
                j += 1
            closed = j < len(text) and text[j] == ">"
            meaning = _meaning(text[i + 1 : j], closed)
            if meaning is not None:
                if out and out[-1] == "\n" and text[i + 1 : i + 2] == "/":
                    out.pop()  # the newline before a closing tag is the format's, not the value's
                out.append(meaning)
                i = j + 1 if closed else j
                if i < len(text) and text[i] == "\n":
                    i += 1  # and so is the one after a tag
                continue
        elif ch == _HOLE and (m := _TAIL.match(text, i + 1)) and any(t.endswith(m.group(0)) for t in _TAGS):
            out.append(ch)
            i = m.end()
            continue
        out.append(ch)
        i += 1
    return "".join(out).replace("\n", "⏎").replace("\t", "→").replace(_HOLE, MASK)


class DiffusionView:
    def __init__(self) -> None:
        self.tokens: list[str | None] = []
        self.block = -1
        self.round = 0
        self.blocks_done = 0
        self.rounds = 0
        self.committed = 0  # tokens of the finished blocks

    def update(self, event: StreamEvent) -> None:
        data = event.data
        block = int(data.get("block", 0))
        if block != self.block:
            if self.block >= 0:
                self.blocks_done += 1
                self.committed += len(self.tokens)
            self.block = block
        self.round = int(data.get("round", 0))
        self.rounds += 1
        self.tokens = list(data.get("tokens", []))

    @property
    def active(self) -> bool:
        return self.block >= 0

    @property
    def masked(self) -> int:
        return sum(1 for t in self.tokens if t is None)

    @property
    def filled(self) -> int:
        """Tokens decoded so far: the finished blocks and the unmasked part of this one."""
        return self.committed + len(self.tokens) - self.masked

    def plain(self) -> str:
        return (
            f"block {self.block} · round {self.round} · {self.masked}/{len(self.tokens)} masked │ "
            f"{visible(self.tokens)}"
        )

    def render(self, width: int = 120) -> Text:
        line = Text(
            f"block {self.block} · round {self.round} │ ", style="dim cyan", no_wrap=True, overflow="ellipsis"
        )
        for part in re.split(f"({MASK}+)", visible(self.tokens)):
            line.append(part, style="bright_black" if part.startswith(MASK) else "cyan")
        line.truncate(width, overflow="ellipsis")
        return line
