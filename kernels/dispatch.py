"""Picks the implementation of each op. CLOVER_KERNELS=torch|triton|auto (default auto).

- torch:  the pure-torch references (kernels/reference/), any device.
- triton: the Triton kernels (kernels/triton/); needs CUDA tensors, or TRITON_INTERPRET=1 on CPU.
- auto:   Triton for CUDA tensors when triton is installed and no input needs a gradient (the
          kernels are forward-only), the torch reference otherwise.

A lookup only: each op has the same name, module name and arguments in reference/ and triton/.
`recurrent_gated_delta_rule` is the definition and always runs in torch.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from collections.abc import Callable
from typing import Any

import torch

BACKENDS = ("torch", "triton", "auto")
# op -> module, under kernels/reference/ and (when the op has a kernel) kernels/triton/
MODULES = {
    "chunk_gated_delta_rule": "delta_rule",
    "recurrent_gated_delta_rule": "delta_rule",
    "block_gdn_attention": "block_gdn",
    "moe_experts": "moe",
    "attention": "attention",
}
TRITON_OPS = frozenset(MODULES) - {"recurrent_gated_delta_rule"}


def backend() -> str:
    name = os.environ.get("CLOVER_KERNELS", "auto").strip().lower() or "auto"
    if name not in BACKENDS:
        raise ValueError(f"CLOVER_KERNELS={name!r}; expected one of {', '.join(BACKENDS)}")
    return name


@functools.cache
def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


@functools.cache
def _impl(kind: str, op: str) -> Callable[..., Any]:
    if kind == "triton" and not triton_available():
        raise RuntimeError(
            "CLOVER_KERNELS=triton but triton is not installed (pip install 'clover-cli[triton]')"
        )
    return getattr(importlib.import_module(f"clover.kernels.{kind}.{MODULES[op]}"), op)


def get(op: str, device: torch.device | None = None, needs_grad: bool = False) -> Callable[..., Any]:
    """The implementation of `op` under CLOVER_KERNELS for inputs on `device`."""
    name = backend()
    if name == "torch" or op not in TRITON_OPS:
        return _impl("reference", op)
    if name == "triton":
        if (
            device is not None
            and device.type != "cuda"
            and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")
        ):
            raise RuntimeError("CLOVER_KERNELS=triton needs CUDA tensors (or TRITON_INTERPRET=1 on CPU)")
        return _impl("triton", op)
    if device is not None and device.type == "cuda" and not needs_grad and triton_available():
        return _impl("triton", op)
    return _impl("reference", op)


def _call(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    device = tensors[0].device if tensors else None
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    return get(op, device, needs_grad)(*args, **kwargs)


def chunk_gated_delta_rule(*args: Any, **kwargs: Any) -> Any:
    """See kernels/reference/delta_rule.py."""
    return _call("chunk_gated_delta_rule", args, kwargs)


def recurrent_gated_delta_rule(*args: Any, **kwargs: Any) -> Any:
    return _call("recurrent_gated_delta_rule", args, kwargs)


def block_gdn_attention(*args: Any, **kwargs: Any) -> Any:
    """See kernels/reference/block_gdn.py."""
    return _call("block_gdn_attention", args, kwargs)


def moe_experts(*args: Any, **kwargs: Any) -> Any:
    """See kernels/reference/moe.py."""
    return _call("moe_experts", args, kwargs)


def attention(*args: Any, **kwargs: Any) -> Any:
    """See kernels/reference/attention.py (block keys appended, fused output gate)."""
    return _call("attention", args, kwargs)
