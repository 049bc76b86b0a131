"""Sparse MoE block (Qwen3.5 names): softmax router `gate`, top-k renormalised, routed experts in
fused tensors, plus a shared SwiGLU expert scaled by sigmoid(`shared_expert_gate`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from clover.kernels import dispatch
from clover.model.config import CloverConfig


class MLP(nn.Module):
    def __init__(self, hidden: int, inter: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Experts(nn.Module):
    """All routed experts: gate_up_proj [E, 2I, H] (gate rows, then up rows), down_proj [E, H, I].
    Checkpoints with per-expert `experts.{i}.gate_proj/up_proj/down_proj` are fused by model/loading/load.py."""

    def __init__(self, num: int, hidden: int, inter: int) -> None:
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.empty(num, 2 * inter, hidden))
        self.down_proj = nn.Parameter(torch.empty(num, hidden, inter))
        nn.init.normal_(self.gate_up_proj, std=hidden**-0.5)
        nn.init.normal_(self.down_proj, std=inter**-0.5)

    def forward(self, x: Tensor, ids: Tensor, weights: Tensor) -> Tensor:
        return dispatch.moe_experts(x, ids, weights, self.gate_up_proj, self.down_proj)


class SparseMoE(nn.Module):
    def __init__(self, config: CloverConfig) -> None:
        super().__init__()
        h = config.hidden_size
        self.top_k, self.norm_topk_prob = config.num_experts_per_tok, config.norm_topk_prob
        self.gate = nn.Linear(h, config.num_experts, bias=False)
        self.experts = Experts(config.num_experts, h, config.moe_intermediate_size)
        self.shared_expert = MLP(h, config.shared_expert_intermediate_size)
        self.shared_expert_gate = nn.Linear(h, 1, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        """x [T, H] (any leading shape is flattened)."""
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        # quantized experts on CPU route and run in one kernel call where they can
        fused = getattr(self.experts, "forward_routed", None)
        y = fused(x, self.gate.weight, self.top_k, self.norm_topk_prob) if fused else None
        if y is not None and getattr(self.experts, "shared", None) is not None:
            return y.view(shape)  # the call ran the shared expert too (model/loading/cpu_fusion.py)
        if y is None:
            probs = self.gate(x).float().softmax(dim=-1)
            weights, ids = probs.topk(self.top_k, dim=-1)
            if self.norm_topk_prob:
                weights = weights / weights.sum(-1, keepdim=True)
            y = self.experts(x, ids, weights.to(x.dtype))
        y = y + torch.sigmoid(self.shared_expert_gate(x)) * self.shared_expert(x)
        return y.view(shape)
