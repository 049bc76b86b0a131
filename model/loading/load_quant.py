"""What a quantized or quantize-on-load weight becomes in the model, one weight at a time (the
loader, model/loading/load.py, reads; this places).

- A checkpoint's int4 weight (GPTQ, AWQ) runs as int4 where the device's kernel takes its shape,
  else dense (dequantized) in the model's dtype. It is never requantized.
- A floating-point weight (bf16, fp32, or FP8 dequantized block by block) is quantized on load when
  `quantize` asks for it and the weight is a matrix that is multiplied (`quantizable`): int8 per
  row, or int4 in groups of up to 128 columns (int8 where no group fits the int4 kernel). Otherwise
  it stays dense in the model's dtype.
- Routed experts are stacked per layer: each expert is converted and packed into its slot as soon
  as its pieces (gate and up, or down) are read, so a layer never exists whole in floating point.

The linear layer is swapped for a `QuantLinear` and the `Experts` for `QuantExperts`
(model/loading/quantized.py) as their weights arrive; the modules are built on the meta device before.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from clover.model.loading.quant_codes import Int4Codes, quantize_int4, quantize_int8
from clover.model.loading.quant_pack import int4_fits
from clover.model.loading.quantized import PackedWeight, QuantExperts, QuantLinear

QUANTIZE_MODES = ("int4", "int8")
INT4_GROUP = 128  # the largest group tried on load (what GPTQ / AWQ checkpoints use)
# Kept dense whatever `quantize` says: the router and the shared expert's gate (tiny, and a routing
# decision flips on a small error), GDN's b / a projections (one value per head, tiny), and the
# embedding (a lookup reads a few rows, not the matrix; mapped from the file it costs little memory).
KEEP_DENSE = (
    "mlp.gate.weight",
    "shared_expert_gate.weight",
    "in_proj_b.weight",
    "in_proj_a.weight",
    "embed_tokens.weight",
)
EXPERT_LEAVES = ("experts.gate_up_proj", "experts.down_proj")


def quantizable(name: str, model: nn.Module) -> bool:
    """Is parameter `name` a matrix that quantize-on-load may quantize?"""
    if name.endswith(EXPERT_LEAVES):
        return True
    if name.endswith(KEEP_DENSE) or not name.endswith(".weight"):
        return False
    if name == "lm_head.weight" and model.config.tie_word_embeddings:
        return False
    return isinstance(model.get_submodule(name[: -len(".weight")]), nn.Linear)


def _int4_group(cols: int, rows: int, device) -> int:
    """The largest group <= INT4_GROUP the int4 kernel takes for this shape; 0: none."""
    return next((g for g in (INT4_GROUP, 64, 32) if int4_fits(rows, cols, g, device)), 0)


class Placer:
    """Turns each weight read by the loader into what runs: a dense tensor (returned to the loader),
    or a quantized module installed in `model`."""

    def __init__(
        self, model: nn.Module, quantize: str | None, dtype: torch.dtype, dev_of: Callable[[str], str]
    ) -> None:
        if quantize is not None and quantize not in QUANTIZE_MODES:
            raise ValueError(f"quantize must be one of {', '.join(QUANTIZE_MODES)} or None, not {quantize!r}")
        from clover.kernels import cpu

        cpu.check_choices()
        self.model, self.quantize, self.dtype, self.dev_of = model, quantize, dtype, dev_of
        self._stacks: dict[str, PackedWeight] = {}  # '...experts.gate_up_proj' -> slots being filled
        self._left: dict[str, int] = {}
        self._pending: dict[tuple[str, int], dict[str, Int4Codes | Tensor]] = {}  # gate / up halves
        self.packed_bytes = 0

    def wants(self, name: str) -> bool:
        """Will a floating-point weight `name` be quantized on load?"""
        return self.quantize is not None and quantizable(name, self.model)

    # ------------------------------------------------------------------ one whole matrix

    def whole(self, name: str, value: Tensor | Int4Codes) -> Tensor | None:
        """The dense tensor to set as parameter `name`, or None once a QuantLinear took its place."""
        dev = self.dev_of(name)
        packed = self._convert(name, value, dev)
        if isinstance(packed, Tensor):
            return packed
        module_name = name[: -len(".weight")]
        parent, _, leaf = module_name.rpartition(".")
        setattr(self.model.get_submodule(parent), leaf, QuantLinear(packed))
        self.packed_bytes += packed.nbytes()
        return None

    def _convert(self, name: str, value: Tensor | Int4Codes, dev) -> PackedWeight | Tensor:
        if isinstance(value, Int4Codes):
            rows, cols = value.shape[-2:]
            if int4_fits(rows, cols, value.group_size, dev):
                return PackedWeight.int4(value, self.dtype, dev)
            return value.dequantize().to(device=dev, dtype=self.dtype)
        if not self.wants(name):
            return value.to(device=dev, dtype=self.dtype)
        rows, cols = value.shape[-2:]
        group = _int4_group(cols, rows, dev) if self.quantize == "int4" else 0
        if group:
            return PackedWeight.int4(quantize_int4(value, group), self.dtype, dev)
        return PackedWeight.int8(*quantize_int8(value), self.dtype, dev)

    # ------------------------------------------------------------------ routed experts, one at a time

    def expert(self, leaf_name: str, e: int, part: str, value: Tensor | Int4Codes, count: int) -> None:
        """One expert's piece of a fused leaf (`part`: gate_proj, up_proj, down_proj, or whole for
        an already fused [2I, H] / [H, I] slice). The layer's QuantExperts is installed once both
        leaves have all `count` experts."""
        if part in ("gate_proj", "up_proj"):
            halves = self._pending.setdefault((leaf_name, e), {})
            halves[part] = value
            if len(halves) < 2:
                return
            del self._pending[(leaf_name, e)]
            gate, up = halves["gate_proj"], halves["up_proj"]
            if isinstance(gate, Int4Codes) and isinstance(up, Int4Codes):
                value = gate.cat_rows(up)
            else:
                value = torch.cat([_dense(gate), _dense(up)])
        stack = self._stacks.get(leaf_name)
        if stack is None:
            stack = self._stacks[leaf_name] = self._new_stack(leaf_name, value, count)
            self._left[leaf_name] = count
        stack.put(e, self._fit(stack, value))
        self._left[leaf_name] -= 1
        if not self._left[leaf_name]:
            self._install_experts(leaf_name.rsplit(".", 1)[0])

    def _new_stack(self, leaf_name: str, first: Tensor | Int4Codes, count: int) -> PackedWeight:
        dev = self.dev_of(leaf_name)
        rows, cols = first.shape
        if isinstance(first, Int4Codes) and int4_fits(rows, cols, first.group_size, dev):
            return PackedWeight.empty_stack("int4", count, rows, cols, first.group_size, self.dtype, dev)
        if isinstance(first, Tensor) and self.wants(leaf_name):
            group = _int4_group(cols, rows, dev) if self.quantize == "int4" else 0
            kind = "int4" if group else "int8"
            return PackedWeight.empty_stack(kind, count, rows, cols, group, self.dtype, dev)
        return PackedWeight.empty_stack("dense", count, rows, cols, 0, self.dtype, dev)

    def _fit(self, stack: PackedWeight, value: Tensor | Int4Codes):
        """`value` in the form the stack's slots take."""
        if stack.kind in ("int4", "int4r", "int4v"):
            if isinstance(value, Int4Codes):
                if value.group_size != stack.group_size:
                    raise ValueError("experts of one layer with different int4 group sizes")
                return value
            return quantize_int4(value, stack.group_size)
        dense = _dense(value)
        return quantize_int8(dense) if stack.kind == "int8" else dense

    def _install_experts(self, prefix: str) -> None:
        up, down = self._stacks.get(f"{prefix}.gate_up_proj"), self._stacks.get(f"{prefix}.down_proj")
        if (
            up is None
            or down is None
            or self._left[f"{prefix}.gate_up_proj"]
            or self._left[f"{prefix}.down_proj"]
        ):
            return
        parent, _, leaf = prefix.rpartition(".")
        setattr(self.model.get_submodule(parent), leaf, QuantExperts(up, down))
        self.packed_bytes += up.nbytes() + down.nbytes()
        del self._stacks[f"{prefix}.gate_up_proj"], self._stacks[f"{prefix}.down_proj"]

    def unfinished(self) -> list[str]:
        return sorted(self._stacks) + sorted(f"{n} expert {e}" for n, e in self._pending)


def _dense(value: Tensor | Int4Codes) -> Tensor:
    return value.dequantize() if isinstance(value, Int4Codes) else value
