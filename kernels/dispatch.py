"""Picks the implementation of each op. CLOVER_KERNELS=torch|triton|auto (default auto).

- torch:  the pure-torch references (kernels/reference/), any device.
- triton: the Triton kernels (kernels/triton/); needs CUDA tensors, or TRITON_INTERPRET=1 on CPU.
- auto:   Triton for CUDA tensors when triton is installed and no input needs a gradient (the
          kernels are forward-only), the torch reference otherwise.
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

from clover.kernels.reference.attention import attention as _attention
from clover.kernels.reference.block_gdn import block_gdn_attention as _block_gdn
from clover.kernels.reference.delta_rule import chunk_gated_delta_rule as _chunk
from clover.kernels.reference.delta_rule import recurrent_gated_delta_rule as _recurrent
from clover.kernels.reference.moe import moe_experts as _moe

BACKENDS = ("torch", "triton", "auto")

_TORCH: dict[str, Callable[..., Any]] = {
    "chunk_gated_delta_rule": _chunk,
    "recurrent_gated_delta_rule": _recurrent,
    "block_gdn_attention": _block_gdn,
    "moe_experts": _moe,
    "attention": _attention,
}

_TRITON: dict[str, str] = {  # op -> module in kernels/triton, imported on first use
    "chunk_gated_delta_rule": "delta_rule",
    "block_gdn_attention": "gdn_block_attention",
    "moe_experts": "moe",
    "attention": "block_attention",
}


def backend() -> str:
    name = os.environ.get("CLOVER_KERNELS", "auto").strip().lower() or "auto"
    if name not in BACKENDS:
        raise ValueError(f"CLOVER_KERNELS={name!r}; expected one of {', '.join(BACKENDS)}")
    return name


@functools.cache
def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def _triton(op: str) -> Callable[..., Any]:
    if not triton_available():
        raise RuntimeError(
            "CLOVER_KERNELS=triton but triton is not installed (pip install 'clover-cli[triton]')"
        )
    return getattr(importlib.import_module(f"clover.kernels.triton.{_TRITON[op]}"), op)


def get(op: str, device: torch.device | None = None, needs_grad: bool = False) -> Callable[..., Any]:
    """The implementation of `op` under CLOVER_KERNELS for inputs on `device`."""
    name = backend()
    if name == "torch" or op not in _TRITON:
        return _TORCH[op]
    if name == "triton":
        if (
            device is not None
            and device.type != "cuda"
            and os.environ.get("TRITON_INTERPRET", "0") in ("", "0")
        ):
            raise RuntimeError("CLOVER_KERNELS=triton needs CUDA tensors (or TRITON_INTERPRET=1 on CPU)")
        return _triton(op)
    if device is not None and device.type == "cuda" and not needs_grad and triton_available():
        return _triton(op)
    return _TORCH[op]


def _call(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    device = tensors[0].device if tensors else None
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    return get(op, device, needs_grad)(*args, **kwargs)


def _torch_chunk_varlen(*args: Any, cu_seqlens: torch.Tensor, **kwargs: Any) -> Any:
    """Packed sequences ([1, sum T, ...] cut at cu_seqlens) through the torch reference, one by one;
    results as kernels/triton/delta_rule.py returns them."""
    names = ("q", "k", "v", "g", "beta", "initial_state", "chunk_size", "return_chunk_states")
    kw = dict(zip(names, args, strict=False), **kwargs)
    h0 = kw.pop("initial_state", None)
    bounds = cu_seqlens.tolist()
    outs, finals, starts = [], [], []
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        piece = {n: kw[n][:, a:b] for n in names[:5]}
        res = _chunk(
            **piece,
            initial_state=None if h0 is None else h0[i : i + 1],
            chunk_size=kw.get("chunk_size", 64),
            return_chunk_states=True,
        )
        outs.append(res[0])
        finals.append(res[1])
        starts.append(res[2][0])
    o, final = torch.cat(outs, dim=1), torch.cat(finals)
    return (o, final, torch.cat(starts)) if kw.get("return_chunk_states") else (o, final)


def chunk_gated_delta_rule(*args: Any, **kwargs: Any) -> Any:
    """See kernels/reference/delta_rule.py; extra keyword `cu_seqlens` for packed variable lengths."""
    if kwargs.get("cu_seqlens") is not None:
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        impl = get("chunk_gated_delta_rule", tensors[0].device if tensors else None)
        if impl is _chunk:
            return _torch_chunk_varlen(*args, **kwargs)
        return impl(*args, **kwargs)
    kwargs.pop("cu_seqlens", None)
    every = kwargs.pop("states_every", None)
    if every is not None:
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
        if get("chunk_gated_delta_rule", tensors[0].device, needs_grad) is _chunk:
            kwargs["states_every"] = every
        else:  # the Triton kernel returns per-chunk states at any chunk size natively
            kwargs["chunk_size"] = every
    return _call("chunk_gated_delta_rule", args, kwargs)


def recurrent_gated_delta_rule(*args: Any, **kwargs: Any) -> Any:
    return get("recurrent_gated_delta_rule")(*args, **kwargs)


def block_gdn_attention(*args: Any, **kwargs: Any) -> Any:
    return _call("block_gdn_attention", args, kwargs)


def moe_experts(*args: Any, **kwargs: Any) -> Any:
    return _call("moe_experts", args, kwargs)


def attention(*args: Any, **kwargs: Any) -> Any:
    return _call("attention", args, kwargs)


def block_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    k_block: torch.Tensor | None = None,
    v_block: torch.Tensor | None = None,
    gate: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention of a block over the cache k, v plus (optionally) the block's own k_block, v_block,
    without concatenating them on the Triton path; mask None = everything visible; gate
    [N, Tq, Hq*d] fuses the sigmoid output gate. Returns [N, Hq, Tq, d]."""
    tensors = [t for t in (q, k, v, k_block, v_block, gate) if t is not None]
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    impl = get("attention", q.device, needs_grad)
    if impl is not _attention:
        return impl(q, k, v, mask, k_block=k_block, v_block=v_block, gate=gate)
    if k_block is not None:
        k, v = torch.cat([k, k_block], dim=2), torch.cat([v, v_block], dim=2)
    if mask is None:
        mask = torch.ones(1, 1, q.shape[2], k.shape[2], dtype=torch.bool, device=q.device)
    o = _attention(q, k, v, mask)
    if gate is not None:
        n, hq, tq, d = q.shape
        o = o * torch.sigmoid(gate.view(n, tq, hq, d).transpose(1, 2))
    return o
