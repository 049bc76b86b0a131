"""Picks the implementation of each op. CLOVER_KERNELS=torch|triton|auto (default auto).

Only the torch references exist so far; `triton` and `auto` fall back to them until the Triton
kernels land (they will register here, next to their references).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from kernels.reference.attention import attention as _attention
from kernels.reference.block_gdn import block_gdn_attention as _block_gdn
from kernels.reference.delta_rule import chunk_gated_delta_rule as _chunk
from kernels.reference.delta_rule import recurrent_gated_delta_rule as _recurrent
from kernels.reference.moe import moe_experts as _moe

BACKENDS = ("torch", "triton", "auto")

_TORCH: dict[str, Callable[..., Any]] = {
    "chunk_gated_delta_rule": _chunk,
    "recurrent_gated_delta_rule": _recurrent,
    "block_gdn_attention": _block_gdn,
    "moe_experts": _moe,
    "attention": _attention,
}


def backend() -> str:
    name = os.environ.get("CLOVER_KERNELS", "auto").strip().lower() or "auto"
    if name not in BACKENDS:
        raise ValueError(f"CLOVER_KERNELS={name!r}; expected one of {', '.join(BACKENDS)}")
    return name


def get(op: str) -> Callable[..., Any]:
    backend()  # validate the setting even while only torch exists
    return _TORCH[op]


def chunk_gated_delta_rule(*args: Any, **kwargs: Any) -> Any:
    return get("chunk_gated_delta_rule")(*args, **kwargs)


def recurrent_gated_delta_rule(*args: Any, **kwargs: Any) -> Any:
    return get("recurrent_gated_delta_rule")(*args, **kwargs)


def block_gdn_attention(*args: Any, **kwargs: Any) -> Any:
    return get("block_gdn_attention")(*args, **kwargs)


def moe_experts(*args: Any, **kwargs: Any) -> Any:
    return get("moe_experts")(*args, **kwargs)


def attention(*args: Any, **kwargs: Any) -> Any:
    return get("attention")(*args, **kwargs)
