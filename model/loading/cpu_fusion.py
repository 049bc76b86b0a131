"""After a load on CPU: each MoE layer's shared expert joins its routed experts' one kernel call
(kernels/cpu/moe.py on the integer-dot kernel), so a decoding step runs a MoE layer in one call
instead of four (the experts, then the shared expert's gate, up and down projections with torch ops
between them). The shared expert's modules keep working for the other paths (a prefill's many
tokens): their buffers become views of the joined stacks, so no weight is held twice."""

from __future__ import annotations

import torch
from torch import nn

from clover.model.loading.quantized import PackedWeight, QuantExperts, QuantLinear


def _int4v(module: nn.Module) -> PackedWeight | None:
    if isinstance(module, QuantLinear) and module.qweight.kind == "int4v":
        return module.qweight
    return None


def fuse_shared_experts(model: nn.Module) -> int:
    """Join the shared experts of every MoE layer that can (int4v experts and shared projections, in
    the routed experts' group sizes; a dense shared gate); returns how many layers were joined."""
    from clover.model.layers.moe import SparseMoE

    joined = 0
    for moe in model.modules():
        if not isinstance(moe, SparseMoE) or not isinstance(moe.experts, QuantExperts):
            continue
        experts, sh = moe.experts, moe.shared_expert
        gate, up, down = _int4v(sh.gate_proj), _int4v(sh.up_proj), _int4v(sh.down_proj)
        gw = moe.shared_expert_gate.weight
        if (
            experts.gate_up.kind != "int4v"
            or None in (gate, up, down)
            or {gate.group_size, up.group_size} != {experts.gate_up.group_size}
            or down.group_size != experts.down.group_size
            or moe.shared_expert_gate.bias is not None
            or gw.device.type != "cpu"
        ):
            continue
        gu = PackedWeight(
            "int4v",
            torch.cat([gate.data, up.data])[None],
            torch.cat([gate.scale, up.scale])[None],
            (1, gate.shape[0] + up.shape[0], gate.shape[1]),
            gate.group_size,
            act_dtype=gate.act_dtype,
        )
        blocks = gate.data.shape[0]
        gate.data, up.data = gu.data[0, :blocks], gu.data[0, blocks:]  # one copy of the weights
        gate.scale, up.scale = gu.scale[0, :blocks], gu.scale[0, blocks:]
        dn = PackedWeight("int4v", down.data[None], down.scale[None], (1, *down.shape), down.group_size,
                          act_dtype=down.act_dtype)  # fmt: skip
        experts.shared = (gu, dn, gw.detach().float().reshape(-1).contiguous())
        joined += 1
    return joined
