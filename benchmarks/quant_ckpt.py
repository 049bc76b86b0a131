"""Clover checkpoints in the quantized formats they are published in (GPTQ-Int4, AWQ, block-wise FP8),
for the tests and the real-size benchmarks: from a model's own tensors (quantized here, round to
nearest), or random codes written straight away at any size (benchmarks/write_realsize.py).

What is quantized follows the published Qwen MoE checkpoints: every projection of the attention /
GDN mixers and of the experts (routed and shared); the router (`mlp.gate`), the shared expert's gate,
GDN's `in_proj_b` / `in_proj_a`, the embedding and lm_head stay in bf16. GPTQ and AWQ store experts
one by one under Qwen3.5 names (`model.language_model.layers.N.mlp.experts.I.gate_proj.qweight`); FP8
keeps Clover's fused expert tensors with a `_scale_inv` beside each.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch import Tensor

from clover.model.loading.load_quant import KEEP_DENSE
from clover.model.loading.quant_codes import Int4Codes, quantize_int4
from clover.model.loading.quant_formats import encode_awq, encode_fp8, encode_gptq

FORMATS = ("gptq", "awq", "fp8")
EXPERT_LEAVES = ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")


def quantization_config(
    method: str, group_size: int = 128, block: tuple[int, int] = (128, 128)
) -> dict[str, Any]:
    """config.json's quantization_config as the publishing tools write it."""
    if method == "gptq":
        return {
            "quant_method": "gptq",
            "bits": 4,
            "group_size": group_size,
            "desc_act": False,
            "sym": False,
            "checkpoint_format": "gptq",
            "true_sequential": True,
        }
    if method == "awq":
        return {
            "quant_method": "awq",
            "bits": 4,
            "group_size": group_size,
            "zero_point": True,
            "version": "gemm",
        }
    if method == "fp8":
        return {
            "quant_method": "fp8",
            "fmt": "e4m3",
            "activation_scheme": "dynamic",
            "weight_block_size": list(block),
        }
    raise ValueError(f"format must be one of {', '.join(FORMATS)}")


def is_quantized(name: str) -> bool:
    """Does the published format quantize Clover tensor `name` (a projection matrix of a layer)?"""
    if name.endswith(EXPERT_LEAVES):
        return True
    projection = name.endswith(("_proj.weight", "in_proj_qkv.weight", "in_proj_z.weight"))
    return projection and ".layers." in name and not name.endswith(KEEP_DENSE)


def hf_name(name: str) -> str:
    return "model.language_model." + name[len("model.") :] if name.startswith("model.") else name


def _int4_parts(method: str, base: str, q: Int4Codes) -> Iterator[tuple[str, Tensor]]:
    parts = encode_gptq(q) if method == "gptq" else encode_awq(q)
    for part, t in parts.items():
        yield f"{base}.{part}", t


def _experts(name: str, t: Tensor) -> Iterator[tuple[str, Tensor]]:
    """A fused expert leaf [E, N, K] -> (Qwen3.5 per-expert weight base name, [N, K]) pairs."""
    base = hf_name(name).rsplit(".", 1)[0]  # '...mlp.experts'
    if name.endswith("gate_up_proj"):
        inter = t.shape[1] // 2
        for i in range(t.shape[0]):
            yield f"{base}.{i}.gate_proj", t[i, :inter]
            yield f"{base}.{i}.up_proj", t[i, inter:]
    else:
        for i in range(t.shape[0]):
            yield f"{base}.{i}.down_proj", t[i]


def quantize_tensors(
    tensors: Iterable[tuple[str, Tensor]],
    method: str,
    group_size: int = 128,
    block: tuple[int, int] = (128, 128),
) -> Iterator[tuple[str, Tensor]]:
    """Clover-named float tensors -> the checkpoint tensors of `method` (round to nearest; the others
    in bf16). The dequantized reference of what is written: `dequantized_reference`."""
    for name, t in tensors:
        if not is_quantized(name):
            yield hf_name(name) if method != "fp8" else name, t.to(torch.bfloat16)
        elif method == "fp8":
            w, s = encode_fp8(t, block)
            yield name, w
            yield (
                f"{name}_scale_inv",
                s,
            )  # X.weight_scale_inv, or a fused expert leaf's X.gate_up_proj_scale_inv
        elif name.endswith(EXPERT_LEAVES):
            for base, piece in _experts(name, t):
                yield from _int4_parts(method, base, quantize_int4(piece, group_size))
        else:
            yield from _int4_parts(method, hf_name(name)[: -len(".weight")], quantize_int4(t, group_size))


def dequantized_reference(
    tensors: Iterable[tuple[str, Tensor]],
    method: str,
    group_size: int = 128,
    block: tuple[int, int] = (128, 128),
) -> dict[str, Tensor]:
    """Clover-named float32 tensors holding exactly what `quantize_tensors` stores, dequantized
    independently of the loader (the reference a quantized load must match)."""
    from clover.model.loading.quant_formats import QuantScheme, decode_fp8

    out = {}
    for name, t in tensors:
        if not is_quantized(name):
            out[name] = t.to(torch.bfloat16).float()
        elif method == "fp8":
            out[name] = decode_fp8(*encode_fp8(t, block), QuantScheme("fp8", block=block))
        else:
            q = quantize_int4(t, group_size)
            # the format stores scales in fp16: the reference uses those
            out[name] = Int4Codes(q.codes, q.scales.half().float(), q.zeros, group_size).dequantize()
    return out


def _randn_bf16(shape: tuple[int, ...], gen: torch.Generator, std: float, chunk: int = 1 << 24) -> Tensor:
    """N(0, std) in bf16, drawn in chunks (the 248320 x 2048 embedding never exists in fp32)."""
    out = torch.empty(shape, dtype=torch.bfloat16)
    flat = out.view(-1)
    for start in range(0, flat.numel(), chunk):
        piece = flat[start : start + chunk]
        piece.copy_(torch.randn(piece.numel(), generator=gen) * std)
    return out


def random_quantized(
    name: str,
    shape: tuple[int, ...],
    method: str,
    gen: torch.Generator,
    group_size: int = 128,
    std: float = 0.02,
) -> Iterator[tuple[str, Tensor]]:
    """Random checkpoint tensors of `method` for Clover tensor `name` of `shape`, made straight in
    the stored form (no float matrix first: a 35B-shaped checkpoint is written in minutes). Weights
    come out near N(0, std); a quantized one's codes are uniform, its zero point 8."""
    if not is_quantized(name):
        yield (hf_name(name) if method != "fp8" else name), _randn_bf16(shape, gen, std)
        return
    if method == "fp8":  # a fused expert leaf one expert at a time: never [E, N, K] in fp32
        pieces = [
            encode_fp8(_randn_bf16(shape[-2:], gen, std).float(), (128, 128))
            for _ in range(shape[0] if len(shape) == 3 else 1)
        ]
        stack = (lambda ts: torch.stack(ts)) if len(shape) == 3 else (lambda ts: ts[0])
        yield name, stack([w for w, _ in pieces])
        yield f"{name}_scale_inv", stack([s for _, s in pieces])
        return
    experts = name.endswith(EXPERT_LEAVES)
    mats = (
        list(_experts(name, torch.empty(shape, device="meta")))
        if experts
        else [(hf_name(name)[: -len(".weight")], torch.empty(shape, device="meta"))]
    )
    # uniform codes 0..15 around zero point 8 have std ~4.6: scale so the weights have std `std`
    scale = std / 4.6
    for base, meta in mats:
        n, k = meta.shape
        groups = k // group_size
        words = torch.randint(
            -(2**31),
            2**31 - 1,
            (k // 8, n) if method == "gptq" else (k, n // 8),
            generator=gen,
            dtype=torch.int32,
        )
        zero = 8 - (1 if method == "gptq" else 0)  # GPTQ v1 stores zero - 1
        word = 0x11111111 * zero  # the zero point in all 8 nibbles, as a signed int32
        yield f"{base}.qweight", words
        yield (
            f"{base}.qzeros",
            torch.full((groups, n // 8), word - (1 << 32) if word >= 1 << 31 else word, dtype=torch.int32),
        )
        yield f"{base}.scales", torch.full((groups, n), scale, dtype=torch.float16)
        if method == "gptq":
            yield f"{base}.g_idx", (torch.arange(k) // group_size).to(torch.int32)
