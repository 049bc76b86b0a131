"""Quantized weights before packing: `Int4Codes`, what every int4 checkpoint format (GPTQ, AWQ) and
quantize-on-load decode to (a 4-bit code per weight, one scale and one integer zero per group of
input columns, w = (q - zero) * scale), and round-to-nearest quantization of a float matrix to int4
codes or to int8 codes with one scale per output row."""

from __future__ import annotations

import torch
from torch import Tensor


class Int4Codes:
    """Unpacked int4 weights [..., N, K]: codes uint8 in 0..15 (any strides), scales and (integer)
    zeros float32 [..., N, K / group]. What every int4 checkpoint format decodes to. A single matrix
    may come as `kwords` instead of codes: int32 [K/8, N], 8 codes to a word down each column,
    nibble j holding row 8i + j (GPTQ's qweight as stored); the CPU packer reads those words directly
    (~10x faster than unpacking), and `codes` unpacks them only when asked."""

    def __init__(
        self,
        codes: Tensor | None,
        scales: Tensor,
        zeros: Tensor,
        group_size: int,
        kwords: Tensor | None = None,
    ) -> None:
        if (codes is None) == (kwords is None):
            raise ValueError("Int4Codes needs codes or kwords, not both")
        self._codes, self.kwords = codes, kwords
        self.scales, self.zeros, self.group_size = scales, zeros, group_size

    @property
    def shape(self) -> tuple[int, ...]:
        if self._codes is not None:
            return tuple(self._codes.shape)
        return (self.kwords.shape[1], self.kwords.shape[0] * 8)

    @property
    def codes(self) -> Tensor:
        if self._codes is None:
            kw = self.kwords
            planes = torch.empty(kw.shape[0], 8, kw.shape[1], dtype=torch.uint8)
            for j in range(8):
                planes[:, j] = torch.bitwise_and(torch.bitwise_right_shift(kw, 4 * j), 15)
            self._codes = planes.view(-1, kw.shape[1]).t()
        return self._codes

    def dequantize(self) -> Tensor:
        """float32 [..., N, K]: (q - zero) * scale."""
        *lead, n, k = self.shape
        q = self.codes.float().reshape(*lead, n, k // self.group_size, self.group_size)
        return ((q - self.zeros[..., None]) * self.scales[..., None]).view(*lead, n, k)

    def cat_rows(self, other: Int4Codes) -> Int4Codes:
        """Rows of `self` then rows of `other` (gate_proj then up_proj: one gate_up matrix)."""
        if other.group_size != self.group_size:
            raise ValueError("cannot join int4 matrices of different group sizes")
        scales, zeros = torch.cat([self.scales, other.scales], -2), torch.cat([self.zeros, other.zeros], -2)
        if self.kwords is not None and other.kwords is not None:
            return Int4Codes(None, scales, zeros, self.group_size, torch.cat([self.kwords, other.kwords], 1))
        # joined column-major ([K, N] in memory), as unpacked words are and the CPU packer reads
        codes = torch.cat([self.codes.transpose(-1, -2), other.codes.transpose(-1, -2)], -1).transpose(-1, -2)
        return Int4Codes(codes, scales, zeros, self.group_size)


ROW_CHUNK = 4096  # rows quantized at a time: lm_head's 248320 rows never exist whole in fp32


def _by_rows(w: Tensor, fn) -> list[Tensor]:
    """fn over chunks of ROW_CHUNK rows of `w` (a matrix, or a stack along its first dimension),
    each output concatenated along the rows."""
    chunks = [fn(w[..., i : i + ROW_CHUNK, :]) for i in range(0, w.shape[-2], ROW_CHUNK)]
    return [
        torch.cat(parts, dim=-2 if parts[0].dim() == w.dim() else -1) for parts in zip(*chunks, strict=True)
    ]


def quantize_int4(w: Tensor, group_size: int) -> Int4Codes:
    """Asymmetric min/max int4 per group of `group_size` columns, one matrix or a stack [..., N, K]."""

    def chunk(part: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        *lead, n, k = part.shape
        g = part.float().view(*lead, n, k // group_size, group_size)
        lo, hi = g.amin(-1).clamp(max=0), g.amax(-1).clamp(min=0)
        scales = ((hi - lo) / 15).clamp(min=torch.finfo(torch.float32).tiny)
        zeros = (-lo / scales).round().clamp(0, 15)
        codes = (g / scales[..., None] + zeros[..., None]).round().clamp(0, 15).to(torch.uint8)
        return codes.view(*lead, n, k), scales, zeros

    codes, scales, zeros = _by_rows(w, chunk)
    return Int4Codes(codes, scales, zeros, group_size)


def quantize_int8(w: Tensor) -> tuple[Tensor, Tensor]:
    """Symmetric int8 per output row: (codes int8 [..., N, K], scales float32 [..., N])."""

    def chunk(part: Tensor) -> tuple[Tensor, Tensor]:
        wf = part.float()
        scales = (wf.abs().amax(-1) / 127).clamp(min=torch.finfo(torch.float32).tiny)
        return (wf / scales[..., None]).round().clamp(-127, 127).to(torch.int8), scales

    codes, scales = _by_rows(w, chunk)
    return codes, scales
