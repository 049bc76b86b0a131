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

The unpacked codes and round-to-nearest quantizing are model/loading/quant_codes.py; packing for each
kernel, and which shapes the kernels take, model/loading/quant_pack.py.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from clover.kernels.reference.moe import routed_experts
from clover.model.loading.quant_codes import Int4Codes
from clover.model.loading.quant_pack import int4_mm, native_fits, pack_int4, pack_native, row_blocks_fit

ROW_BLOCK_KINDS = ("int4r", "int4v")  # the CPU kernels' expert stacks: one call per MoE layer


def _cpu_moe():
    from clover.kernels.cpu import moe

    return moe


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
        if len(q.shape) == 2 and native_fits(*q.shape, q.group_size, device):
            data, scale = pack_native(q, dtype)
            return cls("int4v", data, scale, q.shape, q.group_size, act_dtype=dtype)
        if len(q.shape) == 2:
            data, scale = pack_int4(q, dtype, device)
        else:
            parts = [
                pack_int4(Int4Codes(q.codes[e], q.scales[e], q.zeros[e], q.group_size), dtype, device)
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
        if kind == "int4" and native_fits(rows, cols, group_size, device):
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
        if kind == "int4" and row_blocks_fit(rows, group_size, device):
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
            data, scale = pack_int4(probe, dtype, device)
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
            data, scale = pack_native(value, self.act_dtype)
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
            data, scale = pack_int4(value, self.scale.dtype, self.data.device)
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
            return int4_mm(x, data, scale, self.group_size)
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
        # the layer's shared expert, run inside `forward_routed`'s one call (model/loading/cpu_fusion.py):
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
