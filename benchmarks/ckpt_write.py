"""Write Clover checkpoints in the layouts real ones come in, for the loader benchmark and tests:
fused experts (Clover's own names) or one tensor per expert (Qwen3.5 names under
`model.language_model.`), in N safetensors shards with a model.safetensors.index.json. The writer
holds one shard at a time, so a 35B-shaped random checkpoint can be written with bounded memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch
from torch import Tensor

from clover.model.config import CloverConfig
from clover.model.modeling import CloverForCausalLM

LAYOUTS = ("fused", "per_expert")


def _experts_split(name: str, t: Tensor) -> Iterator[tuple[str, Tensor]]:
    base = name.rsplit(".", 1)[0]  # '...mlp.experts'
    if name.endswith("gate_up_proj"):
        inter = t.shape[1] // 2
        for i in range(t.shape[0]):
            yield f"{base}.{i}.gate_proj.weight", t[i, :inter].clone()
            yield f"{base}.{i}.up_proj.weight", t[i, inter:].clone()
    else:
        for i in range(t.shape[0]):
            yield f"{base}.{i}.down_proj.weight", t[i].clone()


def in_layout(tensors: Iterable[tuple[str, Tensor]], layout: str) -> Iterator[tuple[str, Tensor]]:
    """Clover-named tensors -> the checkpoint names of `layout`."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}")
    for name, t in tensors:
        if layout == "fused":
            yield name, t
            continue
        hf = "model.language_model." + name[len("model.") :] if name.startswith("model.") else name
        if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            yield from _experts_split(hf, t)
        else:
            yield hf, t


def model_tensors(model: CloverForCausalLM) -> Iterator[tuple[str, Tensor]]:
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" and model.config.tie_word_embeddings:
            continue
        yield name, t.detach()


def random_tensors(config: CloverConfig, dtype: torch.dtype, seed: int = 0) -> Iterator[tuple[str, Tensor]]:
    """A random Clover of `config`, one tensor at a time (never the whole model in memory)."""
    with torch.device("meta"):
        meta = CloverForCausalLM(config)
    gen = torch.Generator().manual_seed(seed)
    for name, p in meta.state_dict().items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue
        yield name, (torch.randn(p.shape, generator=gen) * 0.02).to(dtype)


def write_shards(
    tensors: Iterable[tuple[str, Tensor]], directory: str | Path, config: CloverConfig, max_shard_bytes: int
) -> list[Path]:
    """Write config.json, shards of at most ~max_shard_bytes (a tensor is never split) and the index."""
    from safetensors.torch import save_file

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    config.save(d / "config.json")
    current: dict[str, Tensor] = {}
    size = 0
    paths: list[Path] = []
    weight_map: dict[str, str] = {}

    def flush() -> None:
        nonlocal current, size
        if current:
            path = d / f"model-{len(paths) + 1:05d}.safetensors"
            save_file({k: v.contiguous() for k, v in current.items()}, str(path), metadata={"format": "pt"})
            paths.append(path)
            weight_map.update({k: path.name for k in current})
        current, size = {}, 0

    for name, t in tensors:
        nbytes = t.numel() * t.element_size()
        if current and size + nbytes > max_shard_bytes:
            flush()
        current[name] = t
        size += nbytes
    flush()
    # rename to the usual model-0000i-of-0000n pattern now that n is known
    final: list[Path] = []
    for i, path in enumerate(paths, 1):
        target = d / f"model-{i:05d}-of-{len(paths):05d}.safetensors"
        path.rename(target)
        final.append(target)
    names = {p.name: t.name for p, t in zip(paths, final, strict=True)}
    index = {"metadata": {}, "weight_map": {k: names[v] for k, v in weight_map.items()}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    return final


def state_bytes(config: CloverConfig, dtype: torch.dtype) -> int:
    """Bytes of the checkpoint's tensors in `dtype` (tied head counted once)."""
    with torch.device("meta"):
        meta = CloverForCausalLM(config)
    size = torch.tensor([], dtype=dtype).element_size()
    return sum(
        p.numel() * size
        for n, p in meta.state_dict().items()
        if not (n == "lm_head.weight" and config.tie_word_embeddings)
    )
