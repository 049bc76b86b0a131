"""The live line of the block-diffusion decoder: the current block, its still-masked positions
shown as ░, filling in round by round from `block_round` events."""

from __future__ import annotations

from rich.text import Text

from clover.core.protocols import StreamEvent

MASK = "░"


def _visible(token: str) -> str:
    # One cell per token where possible, so the block keeps its shape as it fills in.
    return token.replace("\n", "⏎").replace("\t", "→").replace("\r", "")


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
        body = "".join(MASK if t is None else _visible(t) for t in self.tokens)
        return f"block {self.block} · round {self.round} · {self.masked}/{len(self.tokens)} masked │ {body}"

    def render(self, width: int = 120) -> Text:
        line = Text(f"block {self.block} · round {self.round} │ ", style="dim cyan", no_wrap=True)
        for token in self.tokens:
            if token is None:
                line.append(MASK, style="bright_black")
            else:
                line.append(_visible(token), style="cyan")
        line.truncate(width, overflow="ellipsis")
        return line
