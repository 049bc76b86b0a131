"""Splitting one Clover over several devices by layer (a `device_map`, as in accelerate).

A device map names module prefixes: `model.embed_tokens`, `model.layers.N`, `model.norm`, `lm_head`
(or "" for everything else). `plan_device_map` cuts the layers into contiguous runs of about equal
parameter bytes, the embeddings on the first device and the final norm and head on the last; the
loader places each weight with `device_for`; `attach_device_hooks` moves the activations (and the
forward's masks and rotary tables) onto each layer's device as they arrive. The inference cache puts
each layer's K/V or GDN state beside that layer's weights (model/cache.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch
from torch import Tensor, nn

DeviceMap = dict[str, str]


def plan_device_map(model: nn.Module, devices: Sequence[str]) -> DeviceMap:
    """Contiguous layer runs of near-equal parameter count over `devices` (works on a meta model)."""
    if not devices:
        raise ValueError("device_map needs at least one device")
    layers = list(model.model.layers)
    sizes = [sum(p.numel() for p in layer.parameters()) for layer in layers]
    embed = model.model.embed_tokens.weight.numel()
    head = 0 if model.config.tie_word_embeddings else model.lm_head.weight.numel()
    total = embed + sum(sizes) + head
    share = total / len(devices)
    out: DeviceMap = {"model.embed_tokens": devices[0], "model.norm": devices[-1], "lm_head": devices[-1]}
    used, k = embed, 0
    for i, size in enumerate(sizes):
        # move on when this device has its share, keeping at least one layer for each later device
        left_layers, left_devices = len(sizes) - i, len(devices) - 1 - k
        if k < len(devices) - 1 and (used + size / 2 > share * (k + 1) or left_layers <= left_devices):
            k += 1
        out[f"model.layers.{i}"] = devices[k]
        used += size
    return out


def auto_device_map(model: nn.Module) -> DeviceMap:
    """Every visible CUDA device (one device: the plain single-device case)."""
    n = torch.cuda.device_count()
    if n == 0:
        raise ValueError("device_map='auto' needs CUDA devices; none is visible")
    return plan_device_map(model, [f"cuda:{i}" for i in range(n)])


def device_for(name: str, device_map: DeviceMap, default: str) -> str:
    """The device of parameter `name`: the longest map prefix that ends at a name boundary."""
    best, found = -1, default
    for prefix, dev in device_map.items():
        if (prefix == "" or name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
            best, found = len(prefix), dev
    return found


def _move_ctx(ctx, device: torch.device):
    changes = {}
    for f in dataclasses.fields(ctx):
        value = getattr(ctx, f.name)
        if isinstance(value, Tensor) and value.device != device:
            changes[f.name] = value.to(device)
        elif (
            isinstance(value, tuple) and value and isinstance(value[0], Tensor) and value[0].device != device
        ):
            changes[f.name] = tuple(v.to(device) for v in value)
    return dataclasses.replace(ctx, **changes) if changes else ctx


def attach_device_hooks(model: nn.Module) -> None:
    """Pre-forward hooks that bring each decoder layer's inputs to its own device. A no-op in effect
    when everything sits on one device (the `.to` calls return their input)."""

    def to_embed(module: nn.Module, args: tuple) -> tuple:
        return (args[0].to(module.weight.device), *args[1:])

    def to_layer(module: nn.Module, args: tuple) -> tuple:
        dev = module.input_layernorm.weight.device
        clean, noisy, ctx, *rest = args
        clean = clean.to(dev) if clean is not None else None
        noisy = noisy.to(dev) if noisy is not None else None
        return (clean, noisy, _move_ctx(ctx, dev), *rest)

    def to_self(module: nn.Module, args: tuple) -> tuple:
        return tuple(a.to(module.weight.device) if isinstance(a, Tensor) else a for a in args)

    model.model.embed_tokens.register_forward_pre_hook(to_embed)
    for layer in model.model.layers:
        layer.register_forward_pre_hook(to_layer)
    model.model.norm.register_forward_pre_hook(to_self)
    model.lm_head.register_forward_pre_hook(to_self)
