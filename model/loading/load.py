"""Load / save a Hugging Face style checkpoint directory: config.json + *.safetensors (one file or
shards with model.safetensors.index.json), plus the chat template when there is one.

Accepted names: Clover's own (fused experts `mlp.experts.gate_up_proj` [E, 2I, H] and
`mlp.experts.down_proj` [E, H, I]) and Qwen3.5 / 3.6 ones: the `model.language_model.` prefix,
per-expert `mlp.experts.{i}.gate_proj|up_proj|down_proj.weight` (fused here), Qwen3-Next's fused
GDN projections `in_proj_qkvz` / `in_proj_ba` (split here, see `split_qkvz`), `mtp.*` and vision
weights skipped. A checkpoint without the block-mode GDN parameters (an autoregressive base) keeps
their neutral defaults. Any other tensor is an error, not silently dropped.

Streaming: the model is built on the meta device (no random init, no second copy); each shard's
header is read first, then every tensor on its own (model/loading/safetensors_read.py): mapped from the file
when it is wanted on the CPU as stored, else read, cast and moved to its device; the fused expert
tensors are allocated once on their device and each expert's slice read into place. All names and
shapes are checked from the headers before any weight is read. Peak host memory: the model's own
bytes on CPU (nothing on a GPU) plus about one tensor in flight. Mapped weights are private
copy-on-write pages of the shard; `save_checkpoint` replaces files atomically, so saving over the
checkpoint a model was loaded from does not disturb that model.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from clover.model.config import CloverConfig
from clover.model.layers.rope import RotaryEmbedding
from clover.model.loading.cpu_linear import use_cpu_kernels
from clover.model.loading.load_quant import EXPERT_LEAVES, Placer
from clover.model.loading.placement import DeviceMap, attach_device_hooks, auto_device_map, device_for
from clover.model.loading.quant_codes import Int4Codes
from clover.model.loading.quant_formats import (
    FP8_DTYPES,
    INT_DTYPES,
    Part,
    QuantConfigError,
    QuantScheme,
    QuantSource,
    group_tensors,
    scheme_from_config,
)
from clover.model.loading.qwen_next import fuse_ba, fuse_qkvz, split_ba, split_qkvz  # noqa: F401 - re-exported
from clover.model.loading.safetensors_read import (
    SafetensorsError,
    ShardMaps,
    TensorInfo,
    read_header,
    read_into,
)
from clover.model.loading.shard_reader import Reader, expert_piece, split_rows
from clover.model.modeling import CloverForCausalLM

BLOCK_PARAMS = ("block_logit_scale", "memory_logit", "block_size_calibration")
_EXPERT = re.compile(r"^(.*\.mlp\.experts)\.(\d+)\.(gate_proj|up_proj|down_proj)\.weight$")
_FUSED_GDN = re.compile(r"^(.*\.linear_attn)\.(in_proj_qkvz|in_proj_ba)\.weight$")
_SKIP = ("mtp.", "model.visual.", "visual.", "model.vision_tower.")
# companions of a quantized weight: found without a quantization_config, the checkpoint is misread
_QUANT_LEAVES = (".qweight", ".qzeros", ".scales", ".g_idx", ".weight_scale_inv", "_proj_scale_inv")
# On CPU a model of up to this many parameters loads in fp32 (4 GB of weights); a larger one in bf16,
# which halves its memory (a 35B model: 70 GB instead of 139 GB).
CPU_FP32_MAX_PARAMS = 1_000_000_000


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message is one line for the user."""


class Loaded(NamedTuple):
    model: CloverForCausalLM
    config: CloverConfig
    chat_template: str | None


def default_dtype(config: CloverConfig, device: str | torch.device) -> torch.dtype:
    """bf16 on an accelerator; on CPU fp32 for a small model (<= CPU_FP32_MAX_PARAMS), else bf16."""
    if torch.device(device).type != "cpu":
        return torch.bfloat16
    return torch.float32 if config.param_counts()["total"] <= CPU_FP32_MAX_PARAMS else torch.bfloat16


def shard_files(directory: Path) -> list[Path]:
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(f"{index}: bad index ({e})") from None
    else:
        names = sorted(p.name for p in directory.glob("*.safetensors"))
    if not names:
        raise CheckpointError(f"no *.safetensors in {directory}")
    files = [directory / n for n in names]
    for path in files:
        if not path.is_file():
            raise CheckpointError(f"missing weight shard {path}")
    return files


def canonical_name(name: str) -> str | None:
    """A checkpoint name in this model's spelling, or None for a tensor that is skipped."""
    if name.startswith("model.language_model."):
        name = "model." + name[len("model.language_model.") :]
    elif name.startswith("language_model."):
        name = name[len("language_model.") :]
    return None if name.startswith(_SKIP) else name


class _SkipRandomInit(TorchFunctionMode):
    """Random initialisers return their tensor untouched while the model is built on the meta
    device: there is nothing to initialise, and torch runs meta `normal_` through its Python
    reference implementation, ~4 ms a call (~2 s for the 35B model's modules)."""

    SKIPPED = frozenset(
        (
            Tensor.normal_,
            Tensor.uniform_,
            nn.init.normal_,
            nn.init.uniform_,
            nn.init.kaiming_uniform_,
            nn.init.kaiming_normal_,
            nn.init.trunc_normal_,
            nn.init.xavier_uniform_,
            nn.init.xavier_normal_,
        )
    )

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in self.SKIPPED:
            return args[0] if args else kwargs["tensor"]
        return func(*args, **(kwargs or {}))


_Source = Part | QuantSource  # one stored tensor, or the companions of one quantized weight


def _index(files: list[Path], scheme: QuantScheme | None) -> dict[str, tuple[_Source, tuple[int, ...]]]:
    """Every tensor's file, place and shape, read from the headers only; a quantized weight's
    companions folded into one entry with the dense name and shape (model/loading/quant_formats.py)."""
    found: dict[str, tuple[Part, tuple[int, ...]]] = {}
    for path in files:
        try:
            header = read_header(path)
        except (SafetensorsError, OSError) as e:
            raise CheckpointError(f"{path}: unreadable safetensors file ({_first_line(e)})") from None
        for key, info in header.items():
            found[key] = (Part(path, info), info.shape)
    if scheme is None:
        quantized = sorted(k for k in found if k.endswith(_QUANT_LEAVES))
        if quantized:
            named = next((k for k in quantized if k.endswith((".qweight", "scale_inv"))), quantized[0])
            raise CheckpointError(
                f"quantized tensors (e.g. {named}) but config.json has no quantization_config"
            )
        return found
    try:
        return group_tensors(found, scheme)
    except QuantConfigError as e:
        raise CheckpointError(str(e)) from None


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


class _Plan(NamedTuple):
    whole: dict[str, _Source]  # target name -> source tensor
    experts: dict[str, dict[tuple[int, str], _Source]]  # '...mlp.experts' -> (i, part) -> source
    fused_gdn: dict[str, _Source]  # '...linear_attn.in_proj_qkvz|in_proj_ba' -> source


def _plan(
    tensors: dict[str, tuple[_Source, tuple[int, ...]]], expected: dict[str, torch.Size], config
) -> _Plan:
    """Route every checkpoint tensor to the parameter(s) it fills; check names and shapes."""
    plan = _Plan({}, {}, {})
    shapes: dict[str, tuple[int, ...]] = {}
    unknown: list[str] = []
    for raw, (src, shape) in tensors.items():
        name = canonical_name(raw)
        if name is None or (name == "lm_head.weight" and config.tie_word_embeddings):
            continue
        if isinstance(src, Part) and src.info.dtype in INT_DTYPES + FP8_DTYPES:
            raise CheckpointError(
                f"{raw} is stored as {str(src.info.dtype).removeprefix('torch.')}: a weight that is not floating "
                "point needs the quantization_config it was made with (gptq, awq or fp8)"
            )
        if m := _EXPERT.match(name):
            plan.experts.setdefault(m[1], {})[(int(m[2]), m[3])] = src
            inter, hidden = config.moe_intermediate_size, config.hidden_size
            want = (hidden, inter) if m[3] == "down_proj" else (inter, hidden)
            if shape != want:
                raise CheckpointError(f"{raw}: shape {shape} in the checkpoint, {want} expected")
            continue
        if m := _FUSED_GDN.match(name):
            plan.fused_gdn[name] = src
            parts = ("in_proj_qkv", "in_proj_z") if m[2] == "in_proj_qkvz" else ("in_proj_b", "in_proj_a")
            targets = [f"{m[1]}.{p}.weight" for p in parts]
            if not all(t in expected for t in targets):
                unknown.append(raw)
                continue
            want = (sum(expected[t][0] for t in targets), expected[targets[0]][1])
            if shape != want:
                raise CheckpointError(f"{raw}: shape {shape} in the checkpoint, {want} expected")
            for t in targets:
                shapes[t] = tuple(expected[t])
            continue
        if name not in expected:
            unknown.append(raw)
            continue
        if shape != tuple(expected[name]):
            raise CheckpointError(
                f"{name}: shape {shape} in the checkpoint, {tuple(expected[name])} expected"
            )
        plan.whole[name] = src
        shapes[name] = shape
    if unknown:
        raise CheckpointError(
            f"{len(unknown)} tensor(s) this model does not know, e.g. {', '.join(sorted(unknown)[:3])}"
        )
    for prefix, pieces in plan.experts.items():
        ids = {i for i, _ in pieces}
        if ids != set(range(config.num_experts)):
            raise CheckpointError(f"{prefix}: found {len(ids)} experts, config says {config.num_experts}")
        for i in range(config.num_experts):
            for part in ("gate_proj", "up_proj", "down_proj"):
                if (i, part) not in pieces:
                    raise CheckpointError(f"{prefix}: expert {i} lacks {part}")
        for leaf in ("gate_up_proj", "down_proj"):
            if f"{prefix}.{leaf}" in plan.whole:
                raise CheckpointError(f"{prefix}: both per-expert and fused {leaf} weights")
            shapes[f"{prefix}.{leaf}"] = tuple(expected[f"{prefix}.{leaf}"])
    missing = sorted(
        n
        for n in expected
        if n not in shapes
        and not n.endswith(BLOCK_PARAMS)
        and not (n == "lm_head.weight" and config.tie_word_embeddings)
    )
    if missing:
        raise CheckpointError(f"weights do not match the config: {len(missing)} missing (e.g. {missing[:3]})")
    return plan


def _stream(
    plan: _Plan, config: CloverConfig, dtype: torch.dtype, dev_of, placer: Placer
) -> Iterator[tuple[str, Tensor]]:
    """(parameter name, tensor on its device in `dtype`), in file order. A tensor already in `dtype`
    bound for the CPU is mapped from the file (no copy); a per-expert tensor is read straight into its
    slice of the fused tensor; anything else through one temporary tensor. Quantized weights, and
    weights to quantize on load, go to `placer`, which installs their modules (yielding nothing) or
    hands back a dense tensor; fused experts among them are read one expert at a time."""
    order: list[tuple[str, int, str, object, _Source]] = []

    def add(src: _Source, kind: str, target: object) -> None:
        first = src.first if isinstance(src, QuantSource) else src
        order.append((str(first.path), first.info.start, kind, target, src))

    for name, src in plan.whole.items():
        add(src, "whole", name)
    for name, src in plan.fused_gdn.items():
        add(src, "fused", name)
    for prefix, pieces in plan.experts.items():
        for (i, part), src in pieces.items():
            add(src, "expert", (prefix, i, part))
    order.sort(key=lambda item: item[:2])
    inter, count = config.moe_intermediate_size, config.num_experts
    maps, reader = ShardMaps(), Reader()
    buffers: dict[str, Tensor] = {}  # fused expert tensors being filled
    left: dict[str, int] = {}

    def direct(info: TensorInfo, dev: torch.device) -> bool:
        return dev.type == "cpu" and info.dtype == dtype

    def placed(name: str, value: Tensor | Int4Codes) -> Iterator[tuple[str, Tensor]]:
        dense = placer.whole(name, value)
        if dense is not None:
            yield name, dense.contiguous()

    try:
        for _, _, kind, target, src in order:
            quantized = isinstance(src, QuantSource)
            if kind == "whole":
                dev = torch.device(dev_of(target))
                if target.endswith(EXPERT_LEAVES) and (quantized or placer.wants(target)):
                    for e in range(count):  # never the whole layer in floating point
                        placer.expert(target, e, "whole", reader.value(expert_piece(src, e)), count)
                elif quantized or placer.wants(target):
                    yield from placed(target, reader.value(src))
                elif direct(src.info, dev) and maps.can_map(src.info):
                    yield target, maps.map_tensor(src.path, src.info)
                else:
                    yield target, reader.tensor(src).to(device=dev, dtype=dtype)
            elif kind == "fused":
                base = target.rsplit(".", 2)[0]
                qkvz = target.endswith("in_proj_qkvz.weight")
                parts = ("in_proj_qkv", "in_proj_z") if qkvz else ("in_proj_b", "in_proj_a")
                pieces = split_rows(reader.value(src), split_qkvz if qkvz else split_ba, config)
                for part, piece in zip(parts, pieces, strict=True):
                    yield from placed(f"{base}.{part}.weight", piece)
            else:
                prefix, i, part = target
                leaf = "down_proj" if part == "down_proj" else "gate_up_proj"
                name = f"{prefix}.{leaf}"
                if quantized or placer.wants(name):
                    placer.expert(name, i, part, reader.value(src), count)
                    continue
                dev = torch.device(dev_of(name))
                if name not in buffers:
                    shape = (
                        count,
                        *(
                            (config.hidden_size, inter)
                            if leaf == "down_proj"
                            else (2 * inter, config.hidden_size)
                        ),
                    )
                    buffers[name] = torch.empty(shape, dtype=dtype, device=dev)
                    left[name] = count * (1 if leaf == "down_proj" else 2)
                rows = {"gate_proj": slice(0, inter), "up_proj": slice(inter, 2 * inter)}.get(
                    part, slice(None)
                )
                dst = buffers[name][i, rows]  # contiguous: whole rows of one expert
                if direct(src.info, dev):
                    read_into(reader.handle(src.path), src.info, dst)
                else:
                    dst.copy_(reader.tensor(src))
                left[name] -= 1
                if not left[name]:
                    yield name, buffers.pop(name)
    finally:
        reader.close()


def _set_param(model: nn.Module, name: str, value: Tensor) -> None:
    module_name, _, leaf = name.rpartition(".")
    module = model.get_submodule(module_name)
    module._parameters[leaf] = nn.Parameter(value, requires_grad=module._parameters[leaf].requires_grad)


def load_checkpoint(
    directory: str | Path,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    device_map: DeviceMap | str | None = None,
    quantize: str | None = None,
) -> Loaded:
    """(model in eval mode, config, chat template or None). `dtype` None: `default_dtype` for the
    device (the activations' dtype, also of a quantized model). `device_map`: {module prefix:
    device} (see model/loading/placement.py) or "auto" (every visible GPU, layers split by size); it
    overrides `device`. `quantize` ("int4", "int8" or None): quantize the checkpoint's floating-point
    matrices on load (model/loading/load_quant.py); a quantized checkpoint (config.json quantization_config:
    GPTQ, AWQ, block-wise FP8) loads quantized whatever it says."""
    d = Path(directory)
    if not d.is_dir():
        raise CheckpointError(f"checkpoint directory {d} does not exist")
    try:
        config = CloverConfig.load(d)
        scheme = scheme_from_config(json.loads((d / "config.json").read_text(encoding="utf-8")))
    except ValueError as e:  # QuantConfigError too
        raise CheckpointError(str(e)) from None
    files = shard_files(d)
    with torch.device("meta"), _SkipRandomInit():
        model = CloverForCausalLM(config)
    if device_map == "auto":
        device_map = auto_device_map(model)
    elif isinstance(device_map, str):
        raise CheckpointError(f"device_map must be a mapping or 'auto', not {device_map!r}")
    default = str(device)
    dtype = dtype or default_dtype(config, device_map.get("lm_head", default) if device_map else default)
    expected = {n: p.shape for n, p in model.named_parameters(remove_duplicate=False)}
    plan = _plan(_index(files, scheme), expected, config)

    def dev_of(name: str) -> str:
        return device_for(name, device_map, default) if device_map else default

    try:
        placer = Placer(model, quantize, dtype, dev_of)
    except ValueError as e:
        raise CheckpointError(str(e)) from None
    try:
        for name, t in _stream(plan, config, dtype, dev_of, placer):
            _set_param(model, name, t)
    except (SafetensorsError, OSError) as e:  # a shard changed or cut since its header was read
        raise CheckpointError(f"cannot read the weights in {d}: {_first_line(e)}") from None
    except QuantConfigError as e:  # found only in the values (a GPTQ g_idx of act-order)
        raise CheckpointError(str(e)) from None
    if placer.unfinished():  # pragma: no cover - _plan checks every expert has every piece
        raise CheckpointError(f"experts left incomplete: {placer.unfinished()[:3]}")
    for name, p in list(model.named_parameters()):  # absent block-mode parameters: neutral defaults
        if p.is_meta and name.endswith(BLOCK_PARAMS):
            fill = 1.0 if name.endswith("block_size_calibration") else 0.0
            _set_param(model, name, torch.full(p.shape, fill, dtype=dtype, device=dev_of(name)))
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    still = [n for n, p in model.named_parameters() if p.is_meta]
    if still:  # pragma: no cover - _plan guarantees every parameter a source
        raise CheckpointError(f"weights left unloaded: {still[:3]}")
    rope_dev = model.model.layers[0].input_layernorm.weight.device
    model.model.rotary_emb = RotaryEmbedding(config.rotary_dim, config.rope_theta).to(rope_dev)
    if device_map:
        attach_device_hooks(model)
    try:
        use_cpu_kernels(model)
    except ValueError as e:  # CLOVER_CPU_KERNELS names no choice
        raise CheckpointError(str(e)) from None
    from clover.model.loading.cpu_fusion import fuse_shared_experts

    fuse_shared_experts(model)
    from clover.model.text.tokenizer import read_chat_template

    try:
        template = read_chat_template(d)
    except ValueError:
        template = None
    return Loaded(model.eval(), config, template)


def save_checkpoint(model: CloverForCausalLM, directory: str | Path) -> None:
    """config.json + model.safetensors in Clover's own (fused-expert) names."""
    from safetensors.torch import save_file

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    model.config.save(d / "config.json")
    sd = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        sd.pop("lm_head.weight", None)
    # a new file renamed over the old one: a model mapping the old file keeps its own inode intact
    tmp = d / "model.safetensors.tmp"
    save_file(sd, str(tmp), metadata={"format": "pt"})
    os.replace(tmp, d / "model.safetensors")
