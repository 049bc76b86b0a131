"""Weight-only quantized matrices, run by torch's own int4 / int8 kernels (no dequantization in the
hot path).

Two forms at run time, both decided and packed once, at load:
- int4: a 4-bit code per weight, one scale and one zero point per group of `group_size` input
  columns, w = (q - zero) * scale (GPTQ, AWQ and quantize-on-load all reduce to this). Packed by
  aten `_convert_weight_to_int4pack_for_cpu` and multiplied by `_weight_int4pack_mm_for_cpu` on CPU;
  `_convert_weight_to_int4pack` / `_weight_int4pack_mm` (tinygemm) on CUDA. Those kernels take a
  float zero per group, w = (q - 8) * scale + zf, so an integer zero z becomes zf = (8 - z) * scale.
- int8: one code per weight and one scale per output row, w = q * scale
  (`_weight_int8pack_mm`; CPU and CUDA).

Why these kernels (benchmarks/quant_kernels.py, one expert-sized matmul side by side): torchao 0.18
has no CPU int4 path any more (its int4 configs need CUDA or mslk) and its CPU int8 path
dequantizes (8x slower than `_weight_int8pack_mm` here); hand-written dequantization costs a full
bf16 matrix per call. The aten kernels read the packed bytes directly.

A shape a kernel cannot take (CPU int4 needs rows % 16 and a group of 32/64/128/256 dividing the
columns) is not forced: `int4_fits` says so and the loader keeps that matrix dense instead.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from clover.kernels.reference.moe import routed_experts

INT4_GROUPS = (32, 64, 128, 256)
CUDA_INNER_K_TILES = 8  # tinygemm's packing: columns in tiles of 8 x 16


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


def _row_blocks_fit(rows: int, group_size: int, device: torch.device | str) -> bool:
    """Can an int4 expert stack take the numba kernels' row-block layout (kernels/cpu/int4.py)?"""
    from clover.kernels import cpu

    return torch.device(device).type == "cpu" and rows % 16 == 0 and group_size % 8 == 0 and cpu.available()


def _native_fits(rows: int, cols: int, group_size: int, device: torch.device | str) -> bool:
    """Can an int4 matrix run on the integer-dot kernel (kernels/cpu/native.py, layout "int4v")?"""
    from clover.kernels import cpu

    if torch.device(device).type != "cpu" or not cpu.available():
        return False
    from clover.kernels.cpu import native

    return native.fits(rows, cols, group_size) and native.available()


ROW_BLOCK_KINDS = ("int4r", "int4v")  # the CPU kernels' expert stacks: one call per MoE layer


def _cpu_moe():
    from clover.kernels.cpu import moe

    return moe


def int4_fits(rows: int, cols: int, group_size: int, device: torch.device | str) -> bool:
    """Can the int4 kernel of `device` run a [rows, cols] matrix with this group size?"""
    if group_size not in INT4_GROUPS or cols % group_size:
        return False
    if torch.device(device).type == "cuda":
        return rows % 8 == 0 and cols % (CUDA_INNER_K_TILES * 16) == 0
    return rows % 16 == 0


# ---------------------------------------------------------------------- quantizing (round to nearest)


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


# ---------------------------------------------------------------------- packing and the kernels


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


def _pack_int4_one(q: Int4Codes, dtype: torch.dtype, device) -> tuple[Tensor, Tensor]:
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


def _pack_native(q: Int4Codes, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """One [N, K] matrix in the integer-dot kernel's layout (kernels/cpu/native.py)."""
    from clover.kernels.cpu import native

    data = native.pack_kwords(q.kwords) if q.kwords is not None else native.pack_codes(q.codes)
    return data, native.pack_scales(q.scales, q.zeros, dtype)


def _int4_mm(x: Tensor, packed: Tensor, scale_zero: Tensor, group_size: int) -> Tensor:
    if x.is_cuda:
        return torch.ops.aten._weight_int4pack_mm(x, packed, group_size, scale_zero)
    return torch.ops.aten._weight_int4pack_mm_for_cpu(x, packed, group_size, scale_zero)


class PackedWeight(nn.Module):
    """One quantized matrix [N, K], or a stack of E of them [E, N, K] (routed experts), packed for
    its device's kernel (kind int4 or int8; "dense" for an expert stack whose shape no kernel takes).
    `mm(x, e)` is x [M, K] @ W[e].T in the activation dtype `dtype`."""

    def __init__(
        self,
        kind: str,
        data: Tensor,
        scale: Tensor,
        shape: tuple[int, ...],
        group_size: int = 0,
        act_dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.kind, self.shape, self.group_size = kind, tuple(shape), group_size
        self.act_dtype = act_dtype or scale.dtype
        self.register_buffer("data", data)
        self.register_buffer("scale", scale)

    @classmethod
    def int4(cls, q: Int4Codes, dtype: torch.dtype, device: torch.device | str) -> PackedWeight:
        if len(q.shape) == 2 and _native_fits(*q.shape, q.group_size, device):
            data, scale = _pack_native(q, dtype)
            return cls("int4v", data, scale, q.shape, q.group_size, act_dtype=dtype)
        if len(q.shape) == 2:
            data, scale = _pack_int4_one(q, dtype, device)
        else:
            parts = [
                _pack_int4_one(Int4Codes(q.codes[e], q.scales[e], q.zeros[e], q.group_size), dtype, device)
                for e in range(q.shape[0])
            ]
            data, scale = torch.stack([p[0] for p in parts]), torch.stack([p[1] for p in parts])
        return cls("int4", data, scale, q.shape, q.group_size)

    @classmethod
    def int8(
        cls, codes: Tensor, scales: Tensor, dtype: torch.dtype, device: torch.device | str
    ) -> PackedWeight:
        return cls(
            "int8",
            codes.to(device).contiguous(),
            scales.to(device=device, dtype=dtype).contiguous(),
            tuple(codes.shape),
        )

    @classmethod
    def empty_stack(
        cls, kind: str, count: int, rows: int, cols: int, group_size: int, dtype, device
    ) -> PackedWeight:
        """E uninitialised slots, filled by `put` one expert at a time (a layer is never whole in
        floating point while it loads). An int4 stack on CPU takes the row-block layout of the
        numba kernels (kind "int4r": one call per MoE layer) where they are available, and the
        integer-dot kernel's layout (kind "int4v") where that one is."""
        if kind == "int4" and _native_fits(rows, cols, group_size, device):
            from clover.kernels.cpu import native

            sm_dtype = torch.int16 if dtype == torch.bfloat16 else torch.float32
            r = native.ROWS
            return cls(
                "int4v",
                torch.empty(count, rows // r, cols // 8, r, 4, dtype=torch.uint8),
                torch.empty(count, rows // r, cols // group_size, 2, r, dtype=sm_dtype),
                (count, rows, cols),
                group_size,
                act_dtype=dtype,
            )
        if kind == "int4" and _row_blocks_fit(rows, group_size, device):
            from clover.kernels.cpu import int4 as cpu_int4

            r = cpu_int4.block_rows(rows)
            sm_dtype = torch.int16 if dtype == torch.bfloat16 else torch.float32
            return cls(
                "int4r",
                torch.empty(count, rows // r, cols // 2, r, dtype=torch.uint8),
                torch.empty(count, rows // r, cols // group_size, 2, r, dtype=sm_dtype),
                (count, rows, cols),
                group_size,
                act_dtype=dtype,
            )
        if kind == "int4":
            probe = Int4Codes(
                torch.zeros(rows, cols, dtype=torch.uint8),
                torch.ones(rows, cols // group_size),
                torch.zeros(rows, cols // group_size),
                group_size,
            )
            data, scale = _pack_int4_one(probe, dtype, device)
        elif kind == "int8":
            data, scale = torch.empty(rows, cols, dtype=torch.int8), torch.empty(rows, dtype=dtype)
        else:  # dense: a shape no quantized kernel takes, kept in the activation dtype
            data, scale = torch.empty(rows, cols, dtype=dtype), torch.empty(0, dtype=dtype)
        stack = cls(
            kind,
            torch.empty(count, *data.shape, dtype=data.dtype, device=device),
            torch.empty(count, *scale.shape, dtype=scale.dtype, device=device),
            (count, rows, cols),
            group_size,
        )
        return stack

    def put(self, e: int, value: Int4Codes | tuple[Tensor, Tensor]) -> None:
        """Pack one expert's matrix into slot e."""
        if self.kind == "int4v":
            assert isinstance(value, Int4Codes)
            data, scale = _pack_native(value, self.act_dtype)
            self.data[e].copy_(data)
            self.scale[e].copy_(scale)
            return
        if self.kind == "int4r":
            from clover.kernels.cpu import int4 as cpu_int4

            assert isinstance(value, Int4Codes)
            g = self.group_size
            codes = cpu_int4.pack_kwords(value.kwords, g) if value.kwords is not None else None
            self.data[e].copy_(codes if codes is not None else cpu_int4.pack_codes(value.codes, g))
            self.scale[e].copy_(cpu_int4.pack_scales(value.scales, value.zeros, self.act_dtype))
            return
        if self.kind == "int4":
            assert isinstance(value, Int4Codes)
            data, scale = _pack_int4_one(value, self.scale.dtype, self.data.device)
        elif self.kind == "int8":
            data, scale = value
        else:
            data, scale = value, self.scale[e]
        self.data[e].copy_(data)
        self.scale[e].copy_(scale)

    @property
    def dtype(self) -> torch.dtype:
        """The activations' dtype (what `mm` takes and returns)."""
        return self.act_dtype

    def mm(self, x: Tensor, e: int | None = None) -> Tensor:
        data, scale = (self.data, self.scale) if e is None else (self.data[e], self.scale[e])
        if self.kind == "int4v":
            from clover.kernels.cpu import native

            return native.matmul(x, data, scale, self.group_size).to(self.dtype)
        if self.kind == "int4r":
            from clover.kernels.cpu import int4 as cpu_int4

            return cpu_int4.matmul(x, data, scale).to(self.dtype)
        if self.kind == "int4":
            return _int4_mm(x, data, scale, self.group_size)
        if self.kind == "int8":
            return torch.ops.aten._weight_int8pack_mm(x, data, scale)
        return x @ data.t()

    def dequantize(self) -> Tensor:
        """The matrix (or stack) in the activation dtype, read back through the kernel itself
        (x = identity): for checks and the dense reference, never the hot path."""
        if self.kind == "dense":
            return self.data
        mats = [None] if len(self.shape) == 2 else range(self.shape[0])
        k = self.shape[-1]
        eye = torch.eye(k, dtype=self.dtype, device=self.data.device)
        out = [self.mm(eye, e).t() for e in mats]
        return out[0] if len(self.shape) == 2 else torch.stack(out)

    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size() + self.scale.numel() * self.scale.element_size()

    def extra_repr(self) -> str:
        group = f", group {self.group_size}" if self.kind.startswith("int4") else ""
        return f"{self.kind}, {list(self.shape)}{group}, {self.dtype}"


class QuantLinear(nn.Module):
    """nn.Linear without bias whose weight is a PackedWeight; the activations keep their dtype."""

    def __init__(self, weight: PackedWeight) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.qweight = weight

    def forward(self, x: Tensor) -> Tensor:
        flat = x.reshape(-1, self.in_features)
        y = self.qweight.mm(flat.to(self.qweight.dtype).contiguous())
        return y.to(x.dtype).view(*x.shape[:-1], self.out_features)


class QuantExperts(nn.Module):
    """The routed experts (model/layers/moe.py `Experts`) with quantized stacks gate_up [E, 2I, H] and
    down [E, H, I]: only the experts some token was routed to are read (kernels/reference/moe.py)."""

    def __init__(self, gate_up: PackedWeight, down: PackedWeight) -> None:
        super().__init__()
        self.gate_up, self.down = gate_up, down
        # the layer's shared expert, run inside `forward_routed`'s one call (model/cpu_fusion.py):
        # (gate_up, down) int4v stacks of one and its gate; not submodules (its own modules keep
        # the same buffers, so the state dict is unchanged)
        self.shared: tuple | None = None

    def forward_routed(self, x: Tensor, gate: Tensor, top: int, renorm: bool) -> Tensor | None:
        """The router and these experts in one CPU kernel call (kernels/cpu/moe.py), for a few bf16
        tokens; None where that does not apply (the caller routes in torch)."""
        if not (
            self.gate_up.kind == self.down.kind
            and self.gate_up.kind in ROW_BLOCK_KINDS
            and x.shape[0] <= _cpu_moe().MAX_TOKENS
            and x.dtype == gate.dtype == torch.bfloat16
            and gate.is_contiguous()
            and not torch.is_grad_enabled()
        ):
            return None
        return _cpu_moe().route_and_run(x, gate, top, renorm, self.gate_up, self.down, self.shared)

    def forward(self, x: Tensor, ids: Tensor, weights: Tensor) -> Tensor:
        dtype = self.gate_up.dtype

        def expert(e: int, xs: Tensor) -> Tensor:
            gate, up = self.gate_up.mm(xs.to(dtype).contiguous(), e).chunk(2, dim=-1)
            return self.down.mm((F.silu(gate) * up).contiguous(), e)

        kinds = (self.gate_up.kind, self.down.kind)
        if kinds[0] == kinds[1] and kinds[0] in ROW_BLOCK_KINDS and x.shape[0] <= _cpu_moe().MAX_TOKENS:
            return _cpu_moe().routed_moe(x, ids, weights, self.gate_up, self.down)
        if x.shape[0] == 1:  # one token (B = 1): its k experts are distinct, nothing to sort or scatter
            xs = x.to(dtype).contiguous()
            ys = torch.cat([expert(e, xs) for e in ids[0].tolist()])  # [k, H]
            return (weights.to(ys.dtype) @ ys).to(x.dtype)
        return routed_experts(x, ids, weights, expert)
