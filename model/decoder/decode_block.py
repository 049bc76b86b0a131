"""A generated block's pieces for the decoder (model/decoder/generate.py): the fresh block (mask, prompt
tail, forced and filler tokens; what is output; the banned tokens), what a constraint said about it,
the fill after a stop token, and the view of it a round event shows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:  # the settings' home is the decoder's API; only their fields are read here
    from clover.model.decoder.generate import DecodeSettings


@dataclass
class Steering:
    """What the constraint said about the block last: positions held back this round (`frozen`),
    tokens banned per position, a logit bias; `given`: the caller's fixed tokens."""

    given: Tensor
    frozen: Tensor | None = None
    ban: Tensor | None = None
    bias: Tensor | None = None


def constraint_answer(res: tuple[Tensor, ...]) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor | None]:
    """A constraint's answer with its optional logit bias (None when it gave none)."""
    return (res[0], res[1], res[2], res[3] if len(res) > 3 else None)


def new_block(
    blk: int,
    b: int,
    tails: list[list[int]],
    out: list[list[int]],
    done: list[bool],
    s: DecodeSettings,
    fixed: Sequence[dict[int, int]] | None,
    allowed: Sequence[dict[int, Sequence[int]]] | None,
    mask_id: int,
    filler: int,
    vocab: int,
    dev: torch.device,
) -> tuple[Tensor, Tensor, Tensor]:
    """A fresh block: tokens (mask, prompt tail, forced or filler tokens), which positions are
    generated output (`open_`), and the tokens banned at each position (always the mask id)."""
    n = len(tails)
    tokens = [[mask_id] * b for _ in range(n)]
    open_ = [[True] * b for _ in range(n)]
    ban = torch.zeros(n, b, vocab, dtype=torch.bool, device=dev)
    for i in range(n):
        for j in range(b):
            o = blk * b + j - len(tails[i])  # generated-token offset of this position
            if o < 0:  # the prompt's tail
                tokens[i][j], open_[i][j] = tails[i][blk * b + j], False
            elif done[i] or o >= s.max_new_tokens:  # past the end: filler, not output
                tokens[i][j], open_[i][j] = (out[i][-1] if out[i] else filler), False
            elif fixed is not None and o in fixed[i]:
                tokens[i][j] = fixed[i][o]
            elif allowed is not None and o in allowed[i]:
                ban[i, j] = True
                ban[i, j, list(allowed[i][o])] = False
    ban[..., mask_id] = True
    block = torch.tensor(tokens, dtype=torch.long, device=dev)
    return block, torch.tensor(open_, dtype=torch.bool, device=dev), ban


def fill_after_stop(block: Tensor, open_: Tensor, stop_ids: Tensor, mask_id: int) -> tuple[Tensor, Tensor]:
    """Find each row's first stop token among its output positions; fill the masks after it with
    that token (the block then finishes). Returns the block and the stop position (B: none)."""
    b = block.shape[1]
    hit = torch.isin(block, stop_ids) & open_
    stop_at = torch.where(hit.any(-1), hit.int().argmax(-1), b)
    after = torch.arange(b, device=block.device)[None, :] > stop_at[:, None]
    stop_tok = block.gather(1, stop_at.clamp(max=b - 1)[:, None])
    return torch.where(after & (block == mask_id), stop_tok, block), stop_at


def visible(block: Tensor, show: Tensor, mask_id: int) -> list[list[int | None]]:
    return [
        [None if t == mask_id else t for t in row[keep].tolist()]
        for row, keep in zip(block, show, strict=True)
    ]
