"""Clover checkpoint names -> the names and layout an engine's Qwen3-Next model loads. Torch only.

For autoregressive decoding (block size 1) Clover is exactly the Qwen3.5 / 3.6 MoE network, which is
the Qwen3-Next network with its GDN input projections stored apart. So:
- the block-mode GDN parameters (`block_logit_scale`, `memory_logit`, `block_size_calibration`) take
  part only when a block of more than one token is denoised: dropped;
- `in_proj_qkv` + `in_proj_z` and `in_proj_b` + `in_proj_a` are fused into Qwen3-Next's
  `in_proj_qkvz` / `in_proj_ba`, rows grouped per key head (clover.model.loading.load.fuse_qkvz / fuse_ba,
  the inverse of what the loader does with a Qwen3-Next checkpoint);
- Clover's fused experts (`mlp.experts.gate_up_proj` [E, 2I, H], `mlp.experts.down_proj` [E, H, I])
  become per-expert `gate_proj` / `up_proj` / `down_proj` weights (views, no copy);
everything else keeps its name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from torch import Tensor

from clover.model.config import CloverConfig
from clover.model.loading.load import BLOCK_PARAMS, canonical_name, fuse_ba, fuse_qkvz

_PAIRS = {
    "in_proj_qkv": "in_proj_qkvz",
    "in_proj_z": "in_proj_qkvz",
    "in_proj_b": "in_proj_ba",
    "in_proj_a": "in_proj_ba",
}


def clover_to_qwen3_next(
    weights: Iterable[tuple[str, Tensor]], config: CloverConfig
) -> Iterator[tuple[str, Tensor]]:
    pending: dict[str, dict[str, Tensor]] = {}  # '...linear_attn.in_proj_qkvz' -> the halves seen
    for raw, t in weights:
        name = canonical_name(raw)
        if name is None or name.endswith(BLOCK_PARAMS):
            continue
        base, _, leaf = name.removesuffix(".weight").rpartition(".")
        if base.endswith(".linear_attn") and leaf in _PAIRS:
            fused = f"{base}.{_PAIRS[leaf]}"
            halves = pending.setdefault(fused, {})
            halves[leaf] = t
            if len(halves) == 2:
                del pending[fused]
                if "in_proj_qkv" in halves:
                    yield fused + ".weight", fuse_qkvz(halves["in_proj_qkv"], halves["in_proj_z"], config)
                else:
                    yield fused + ".weight", fuse_ba(halves["in_proj_b"], halves["in_proj_a"], config)
        elif name.endswith("mlp.experts.gate_up_proj"):
            prefix, inter = name[: -len("gate_up_proj")], t.shape[1] // 2
            for i in range(t.shape[0]):
                yield f"{prefix}{i}.gate_proj.weight", t[i, :inter]
                yield f"{prefix}{i}.up_proj.weight", t[i, inter:]
        elif name.endswith("mlp.experts.down_proj"):
            prefix = name[: -len("down_proj")]
            for i in range(t.shape[0]):
                yield f"{prefix}{i}.down_proj.weight", t[i]
        else:
            yield name, t
    if pending:
        raise ValueError(f"GDN projections without their pair: {sorted(pending)[:3]}")
