"""Partial rotary position embedding: the first `rotary_dim` dims of each head rotate
(half-split layout, as in Qwen3.5); the rest pass through."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class RotaryEmbedding(nn.Module):
    def __init__(self, rotary_dim: int, theta: float) -> None:
        super().__init__()
        self.rotary_dim = rotary_dim
        inv_freq = 1.0 / theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """positions [...] (int) -> cos, sin [..., rotary_dim] in fp32."""
        freqs = positions.float()[..., None] * self.inv_freq
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos(), emb.sin()


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x [..., T, heads, head_dim]; cos / sin [..., T, rotary_dim] (broadcast over heads)."""
    rd = cos.shape[-1]
    rot, rest = x[..., :rd].float(), x[..., rd:]
    cos, sin = cos[..., None, :], sin[..., None, :]
    a, b = rot.chunk(2, dim=-1)
    rotated = torch.cat([-b, a], dim=-1)
    return torch.cat([(rot * cos + rotated * sin).to(x.dtype), rest], dim=-1)
