"""Gated full attention (Qwen3.5): q_proj yields query and gate interleaved per head, q/k RMSNorm,
partial RoPE, grouped-query heads, sigmoid output gate. Causal over the clean stream; each noisy
block attends to the committed history before it plus its whole own block."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from clover.kernels import dispatch
from clover.model.config import CloverConfig
from clover.model.layers.context import ForwardContext
from clover.model.layers.norms import RMSNorm
from clover.model.layers.rope import apply_rotary


class GatedAttention(nn.Module):
    def __init__(self, config: CloverConfig) -> None:
        super().__init__()
        h, d = config.hidden_size, config.head_dim
        self.num_heads, self.num_kv_heads, self.head_dim = (
            config.num_attention_heads,
            config.num_key_value_heads,
            d,
        )
        self.q_proj = nn.Linear(h, self.num_heads * d * 2, bias=False)
        self.k_proj = nn.Linear(h, self.num_kv_heads * d, bias=False)
        self.v_proj = nn.Linear(h, self.num_kv_heads * d, bias=False)
        self.o_proj = nn.Linear(self.num_heads * d, h, bias=False)
        self.q_norm = RMSNorm(d, config.rms_norm_eps)
        self.k_norm = RMSNorm(d, config.rms_norm_eps)

    def _project(self, x: Tensor, rope: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """x [N, T, D] -> q [N, Hq, T, d], gate [N, T, Hq*d], k / v [N, Hkv, T, d]."""
        n, t, _ = x.shape
        q, gate = self.q_proj(x).view(n, t, self.num_heads, 2 * self.head_dim).chunk(2, dim=-1)
        k = self.k_proj(x).view(n, t, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).view(n, t, self.num_kv_heads, self.head_dim)
        q, k = apply_rotary(self.q_norm(q), *rope), apply_rotary(self.k_norm(k), *rope)
        return q.transpose(1, 2), gate.reshape(n, t, -1), k.transpose(1, 2), v.transpose(1, 2)

    def _out(self, o: Tensor, gate: Tensor) -> Tensor:
        n, _, t, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(n, t, -1) * torch.sigmoid(gate))

    def forward(
        self, clean: Tensor | None, noisy: Tensor | None, ctx: ForwardContext, cache: KVCache | None
    ) -> tuple[Tensor | None, Tensor | None]:
        keys, values = cache.view(ctx.past) if cache is not None else (None, None)
        clean_out = noisy_out = None
        if clean is not None:
            q, gate, k, v = self._project(clean, ctx.clean_rope)
            if cache is not None:
                # written where they go whether or not this step commits (past the committed
                # length nothing reads them, and the next write there replaces them): no copy of
                # the whole cache per token
                cache.write(k, v, ctx.past)
                keys, values = cache.view(ctx.past + k.shape[2])
            else:
                keys, values = k, v
            clean_out = self._out(dispatch.attention(q, keys, values, ctx.clean_mask), gate)
        if noisy is not None:
            n, nb, b, dim = noisy.shape
            q, gate, k, v = self._project(noisy.reshape(n, nb * b, dim), ctx.noisy_rope)
            # The block reads the history and itself without a copy of the cache (Triton path);
            # the sigmoid output gate is fused there too.
            if keys is None:
                o = dispatch.attention(q, k, v, ctx.noisy_mask, gate=gate)
            else:
                o = dispatch.attention(q, keys, values, ctx.noisy_mask, k_block=k, v_block=v, gate=gate)
            noisy_out = self.o_proj(o.transpose(1, 2).reshape(n, nb * b, -1)).view(n, nb, b, dim)
        return clean_out, noisy_out


class KVCache:
    """Keys and values of the committed columns, in a buffer that grows by doubling."""

    def __init__(
        self, batch: int, heads: int, head_dim: int, dtype: torch.dtype, device: torch.device
    ) -> None:
        self.k = torch.zeros(batch, heads, 0, head_dim, dtype=dtype, device=device)
        self.v = torch.zeros_like(self.k)

    def view(self, length: int) -> tuple[Tensor | None, Tensor | None]:
        if length == 0:
            return None, None
        return self.k[:, :, :length], self.v[:, :, :length]

    def write(self, k: Tensor, v: Tensor, at: int) -> None:
        end = at + k.shape[2]
        if end > self.k.shape[2]:
            grow = max(end, 2 * self.k.shape[2]) - self.k.shape[2]
            pad = self.k.new_zeros(*self.k.shape[:2], grow, self.k.shape[3])
            self.k, self.v = torch.cat([self.k, pad], dim=2), torch.cat([self.v, pad], dim=2)
        self.k[:, :, at:end] = k
        self.v[:, :, at:end] = v


def build_masks(
    past: int, clean_len: int, noisy_offset: int, nb: int, block: int, key_valid: Tensor | None, device
) -> tuple[Tensor | None, Tensor | None]:
    """Boolean masks (True = may attend) for the clean and noisy queries; see ForwardContext.

    key_valid [N, P+Tc] marks real (non-padding) committed columns. A padding query may always see
    itself, so no row is empty."""
    total = past + clean_len
    cols = torch.arange(total, device=device)
    valid = (
        key_valid[:, None, None, :]
        if key_valid is not None
        else torch.ones(1, 1, 1, total, dtype=torch.bool, device=device)
    )
    clean_mask = noisy_mask = None
    if clean_len:
        rows = past + torch.arange(clean_len, device=device)
        clean_mask = (cols[None, :] <= rows[:, None]) & valid | (cols[None, :] == rows[:, None])
    if nb:
        start = past + noisy_offset + block * torch.arange(nb, device=device).repeat_interleave(block)
        hist = (cols[None, :] < start[:, None]) & valid  # [N or 1, 1, nb*B, P+Tc]
        blk = torch.arange(nb, device=device).repeat_interleave(block)
        own = (blk[:, None] == blk[None, :]).expand(hist.shape[0], 1, -1, -1)
        noisy_mask = torch.cat([hist.expand(own.shape[0], 1, -1, -1), own], dim=-1)
    return clean_mask, noisy_mask
