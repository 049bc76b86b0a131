"""Small helpers shared by the Triton kernels."""

from __future__ import annotations

import os

import torch


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def dot_f32(*tensors: torch.Tensor) -> bool:
    """Whether dot operands must be fp32: always under the interpreter (its bf16 `tl.dot` is wrong)
    and whenever an input is fp32; native runs keep bf16/fp16 operands on the tensor cores."""
    return interpreting() or any(t.dtype == torch.float32 for t in tensors)


def pow2(n: int, floor: int = 16) -> int:
    """Tile size for a dimension: the next power of two, at least `floor` (tl.dot needs >= 16)."""
    p = 1
    while p < n:
        p *= 2
    return max(p, floor)
