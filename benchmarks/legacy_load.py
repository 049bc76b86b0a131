"""The loader as it was before the streaming one (model/load.py at 2a41484), kept only so that
benchmarks/load_memory.py can compare the two side by side and tests can check their parity. It reads
every tensor into host RAM, stacks per-expert tensors into a new copy, then casts and moves the
whole state dict. Product code uses clover.model.load."""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch
from torch import Tensor

from clover.model.config import CloverConfig
from clover.model.layers.rope import RotaryEmbedding
from clover.model.load import CheckpointError, Loaded
from clover.model.modeling import CloverForCausalLM

BLOCK_PARAMS = ("block_logit_scale", "memory_logit", "block_size_calibration")
_EXPERT = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
_SKIP = ("mtp.", "model.visual.", "visual.", "model.vision_tower.")


def _read_tensors(directory: Path) -> dict[str, Tensor]:
    from safetensors.torch import load_file

    index = directory / "model.safetensors.index.json"
    if index.is_file():
        try:
            files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (json.JSONDecodeError, KeyError) as e:
            raise CheckpointError(f"{index}: bad index ({e})") from None
    else:
        files = sorted(p.name for p in directory.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"no *.safetensors in {directory}")
    tensors: dict[str, Tensor] = {}
    for name in files:
        path = directory / name
        if not path.is_file():
            raise CheckpointError(f"missing weight shard {path}")
        try:
            tensors.update(load_file(str(path)))
        except Exception as e:  # safetensors raises its own error types for truncated/corrupt files
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise CheckpointError(f"{path}: unreadable safetensors file ({reason})") from None
    return tensors


def convert_state_dict(tensors: dict[str, Tensor], config: CloverConfig) -> dict[str, Tensor]:
    """Checkpoint names -> this model's names (prefixes, skipped heads, fused experts)."""
    out: dict[str, Tensor] = {}
    experts: dict[str, dict[int, dict[str, Tensor]]] = {}
    for name, t in tensors.items():
        if name.startswith("model.language_model."):
            name = "model." + name[len("model.language_model.") :]
        elif name.startswith("language_model."):
            name = name[len("language_model.") :]
        if name.startswith(_SKIP):
            continue
        m = _EXPERT.match(name)
        if m:
            experts.setdefault(m[1], {}).setdefault(int(m[2]), {})[m[3]] = t
            continue
        out[name] = t
    for prefix, per in experts.items():
        if sorted(per) != list(range(config.num_experts)):
            raise CheckpointError(f"{prefix}: found {len(per)} experts, config says {config.num_experts}")
        try:
            gate_up = [torch.cat([per[i]["gate_proj"], per[i]["up_proj"]], dim=0) for i in range(len(per))]
            down = [per[i]["down_proj"] for i in range(len(per))]
        except KeyError as e:
            raise CheckpointError(f"{prefix}: an expert lacks {e}") from None
        out[prefix + ".gate_up_proj"] = torch.stack(gate_up)
        out[prefix + ".down_proj"] = torch.stack(down)
    if any(".in_proj_qkvz." in n for n in out):
        raise CheckpointError(
            "Qwen3-Next fused in_proj_qkvz / in_proj_ba weights are not supported; use Qwen3.5 names"
        )
    return out


def load_checkpoint_legacy(
    directory: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
) -> Loaded:
    """(model in eval mode, config, chat template or None)."""
    d = Path(directory)
    if not d.is_dir():
        raise CheckpointError(f"checkpoint directory {d} does not exist")
    try:
        config = CloverConfig.load(d)
    except ValueError as e:
        raise CheckpointError(str(e)) from None
    dtype = dtype or getattr(torch, config.torch_dtype, torch.float32)
    sd = convert_state_dict(_read_tensors(d), config)

    with torch.device("meta"):
        model = CloverForCausalLM(config)
    expected = model.state_dict()
    if config.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
        expected.pop("lm_head.weight", None)
    for name, ref in expected.items():  # absent block-mode parameters: neutral defaults
        if name not in sd and name.endswith(BLOCK_PARAMS):
            sd[name] = torch.full(ref.shape, 1.0 if name.endswith("block_size_calibration") else 0.0)
    missing = sorted(set(expected) - set(sd))
    unexpected = sorted(set(sd) - set(expected))
    if missing or unexpected:
        raise CheckpointError(
            f"weights do not match the config: {len(missing)} missing (e.g. {missing[:3]}), "
            f"{len(unexpected)} unexpected (e.g. {unexpected[:3]})"
        )
    for name, t in sd.items():
        if tuple(t.shape) != tuple(expected[name].shape):
            raise CheckpointError(
                f"{name}: shape {tuple(t.shape)} in the checkpoint, {tuple(expected[name].shape)} expected"
            )
    sd = {k: v.to(device=device, dtype=dtype) for k, v in sd.items()}
    model.load_state_dict(sd, strict=not config.tie_word_embeddings, assign=True)
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    model.model.rotary_emb = RotaryEmbedding(config.rotary_dim, config.rope_theta).to(device)
    return Loaded(model.eval(), config, None)
