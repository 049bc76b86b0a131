"""Int4 matrices packed for a device's kernel, and which kernel takes which shape.

torch's kernels take a float zero per group, w = (q - 8) * scale + zf, so an integer zero z becomes
zf = (8 - z) * scale. CPU: `_convert_weight_to_int4pack_for_cpu`'s layout (made here in a few
vectorised passes, checked against the op once) and `_weight_int4pack_mm_for_cpu`; CUDA: tinygemm
(`_convert_weight_to_int4pack`, `_weight_int4pack_mm`). CPU expert stacks may take the numba
kernels' row-block layout (kernels/cpu/int4.py) or the integer-dot kernel's (kernels/cpu/native.py).
A shape a kernel cannot take (CPU int4 needs rows % 16 and a group of 32/64/128/256 dividing the
columns) is not forced: `int4_fits` says so and the loader keeps that matrix dense instead.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from clover.model.loading.quant_codes import Int4Codes

INT4_GROUPS = (32, 64, 128, 256)
CUDA_INNER_K_TILES = 8  # tinygemm's packing: columns in tiles of 8 x 16


def row_blocks_fit(rows: int, group_size: int, device: torch.device | str) -> bool:
    """Can an int4 expert stack take the numba kernels' row-block layout (kernels/cpu/int4.py)?"""
    from clover.kernels import cpu

    return torch.device(device).type == "cpu" and rows % 16 == 0 and group_size % 8 == 0 and cpu.available()


def native_fits(rows: int, cols: int, group_size: int, device: torch.device | str) -> bool:
    """Can an int4 matrix run on the integer-dot kernel (kernels/cpu/native.py, layout "int4v")?"""
    from clover.kernels import cpu

    if torch.device(device).type != "cpu" or not cpu.available():
        return False
    from clover.kernels.cpu import native

    return native.fits(rows, cols, group_size) and native.available()


def int4_fits(rows: int, cols: int, group_size: int, device: torch.device | str) -> bool:
    """Can the int4 kernel of `device` run a [rows, cols] matrix with this group size?"""
    if group_size not in INT4_GROUPS or cols % group_size:
        return False
    if torch.device(device).type == "cuda":
        return rows % 8 == 0 and cols % (CUDA_INNER_K_TILES * 16) == 0
    return rows % 16 == 0


CPU_BLOCK_N = 64  # rows per block of the CPU int4 layout


def _cpu_layout(codes: Tensor) -> Tensor:
    """codes [N, K] (N % 64 == 0, any strides) -> the CPU kernel's packed bytes [N, K/2]: per block of
    64 rows, for each column k 32 bytes, byte i = row i | row i+32 << 4. What
    `_convert_weight_to_int4pack_for_cpu` makes, in a few vectorised passes instead of its ~20 ns
    per weight (minutes for a 35B model); `_cpu_layout_ok` checks it against the op once."""
    n, k = codes.shape
    kn = codes.t().to(torch.uint8).reshape(k, n // CPU_BLOCK_N, 2, CPU_BLOCK_N // 2)  # [K, blocks, half, 32]
    packed = kn[:, :, 0] | (kn[:, :, 1] << 4)  # [K, blocks, 32]
    return packed.permute(1, 0, 2).reshape(n, k // 2).contiguous()


def _cpu_layout_from_kwords(kwords: Tensor) -> Tensor:
    """The same bytes from codes packed 8 to a word down each column (`Int4Codes.kwords`), one nibble
    plane at a time, never unpacking the whole matrix."""
    kw = kwords.contiguous()
    k8, n = kw.shape
    out = torch.empty(n // CPU_BLOCK_N, k8, 8, CPU_BLOCK_N // 2, dtype=torch.uint8)
    for j in range(8):  # row 8i + j of every word
        plane = torch.bitwise_and(torch.bitwise_right_shift(kw, 4 * j), 15).view(k8, n // CPU_BLOCK_N, 2, -1)
        out[:, :, j] = torch.bitwise_or(plane[:, :, 0], torch.bitwise_left_shift(plane[:, :, 1], 4)).permute(
            1, 0, 2
        )
    return out.view(n, k8 * 4)


@functools.cache
def _cpu_layout_ok() -> bool:
    """Do `_cpu_layout` and `_cpu_layout_from_kwords` reproduce this torch build's packing? (else the
    op packs, slowly)."""
    q = torch.randint(
        0, 16, (2 * CPU_BLOCK_N, 64), generator=torch.Generator().manual_seed(0), dtype=torch.int32
    )
    want = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 1)
    words = q.t().reshape(8, 8, -1)  # [K/8, 8, N]: nibble j of word i is row 8i + j
    kwords = sum(words[:, j] << (4 * j) for j in range(8))
    return torch.equal(_cpu_layout(q), want) and torch.equal(_cpu_layout_from_kwords(kwords), want)


def pack_int4(q: Int4Codes, dtype: torch.dtype, device: torch.device | str) -> tuple[Tensor, Tensor]:
    """One [N, K] matrix -> (packed weight, scale_zero [K/G, N, 2]) for `device`'s kernel."""
    rows = q.shape[0]
    if torch.device(device).type == "cuda":
        codes = q.codes.to(device=device, dtype=torch.int32)
        nibbles = (codes[:, ::2] << 4 | codes[:, 1::2]).to(
            torch.uint8
        )  # tinygemm: even column in the high nibble
        packed = torch.ops.aten._convert_weight_to_int4pack(nibbles, CUDA_INNER_K_TILES)
    elif rows % CPU_BLOCK_N == 0 and _cpu_layout_ok():
        packed = _cpu_layout_from_kwords(q.kwords) if q.kwords is not None else _cpu_layout(q.codes)
    else:
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q.codes.to(torch.int32), 1)
    scales, zeros = q.scales, q.zeros
    zf = (8 - zeros) * scales  # the kernels' float zero: (q - z) s = (q - 8) s + (8 - z) s
    scale_zero = torch.stack([scales.t(), zf.t()], dim=-1).to(device=device, dtype=dtype).contiguous()
    return packed, scale_zero


def pack_native(q: Int4Codes, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """One [N, K] matrix in the integer-dot kernel's layout (kernels/cpu/native.py)."""
    from clover.kernels.cpu import native

    data = native.pack_kwords(q.kwords) if q.kwords is not None else native.pack_codes(q.codes)
    return data, native.pack_scales(q.scales, q.zeros, dtype)


def int4_mm(x: Tensor, packed: Tensor, scale_zero: Tensor, group_size: int) -> Tensor:
    if x.is_cuda:
        return torch.ops.aten._weight_int4pack_mm(x, packed, group_size, scale_zero)
    return torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, group_size, scale_zero)
