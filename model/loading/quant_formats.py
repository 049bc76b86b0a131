"""Quantized checkpoints as they are published: config.json's `quantization_config` and the tensors
that stand for one weight.

- GPTQ (AutoGPTQ / GPTQModel, `quant_method: gptq`, 4 bits, no act-order): for a weight [N, K],
  `qweight` int32 [K/8, N] (8 codes down a column, lowest nibble first), `qzeros` int32 [K/G, N/8]
  (8 zero points along a row), `scales` fp16 [K/G, N], `g_idx` [K] (k // G). checkpoint_format
  "gptq" (v1) stores each zero point minus one, "gptq_v2" stores it as is.
- AWQ (AutoAWQ GEMM, `quant_method: awq`, 4 bits, zero point): `qweight` int32 [K, N/8] and
  `qzeros` int32 [K/G, N/8], 8 codes along a row in the nibble order 0 2 4 6 1 3 5 7; `scales` [K/G, N].
- Block-wise FP8 (`quant_method: fp8`, DeepSeek-V3 / Qwen3-FP8 style): `weight` float8_e4m3fn [N, K]
  and `weight_scale_inv` float32 [ceil(N/bn), ceil(K/bk)], w = fp8 * scale_inv of its block; fused
  experts carry `gate_up_proj` / `down_proj` [E, N, K] with `{name}_scale_inv` [E, ., .].

All three decode to `Int4Codes` (GPTQ, AWQ) or a float32 matrix (FP8) per weight; model/loading/load.py
decides how each runs. Which weights are quantized is read off the tensors themselves (a `qweight`,
a `weight_scale_inv`), not off the config's module lists, which differ between tools.
Anything else a config asks for (other bit widths, act-order, AWQ's GEMV packing, static FP8
activation scales, other methods) is refused in one line rather than run wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import Tensor

from clover.model.loading.quant_codes import Int4Codes
from clover.model.loading.safetensors_read import TensorInfo

METHODS = ("gptq", "awq", "fp8")
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)  # nibble i of a word holds column AWQ_ORDER[i] of its 8
INT_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool)
FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


class QuantConfigError(ValueError):
    """A quantization_config this loader cannot run; one line."""


@dataclass(frozen=True)
class QuantScheme:
    method: str  # gptq | awq | fp8
    group_size: int = 0  # gptq / awq
    zero_offset: int = 0  # gptq v1: stored zero points are one less than the real ones
    block: tuple[int, int] = (0, 0)  # fp8: (rows, columns) per scale

    @property
    def parts(self) -> tuple[str, ...]:
        """The companion tensors of one quantized weight `X`: X.<part>."""
        return (
            ("weight", "weight_scale_inv")
            if self.method == "fp8"
            else ("qweight", "qzeros", "scales", "g_idx")
        )


def scheme_from_config(raw: dict[str, Any]) -> QuantScheme | None:
    """The config.json (outer or text_config) `quantization_config`, checked; None when absent."""
    qc = raw.get("quantization_config")
    if qc is None and isinstance(raw.get("text_config"), dict):
        qc = raw["text_config"].get("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, dict):
        raise QuantConfigError("quantization_config must be a JSON object")
    method = str(qc.get("quant_method", "")).lower()
    if method not in METHODS:
        raise QuantConfigError(
            f"quantization_config: quant_method {qc.get('quant_method')!r} is not supported (gptq, awq or fp8)"
        )
    if method == "fp8":
        return _fp8_scheme(qc)
    bits = qc.get("bits", qc.get("w_bit"))
    if bits != 4:
        raise QuantConfigError(
            f"quantization_config: {method} with {bits} bits is not supported (only 4-bit)"
        )
    group = qc.get("group_size", qc.get("q_group_size", 128))
    if not isinstance(group, int) or group <= 0:
        raise QuantConfigError(
            f"quantization_config: group_size {group!r} is not supported (a positive group)"
        )
    if method == "awq":
        version = str(qc.get("version", "gemm")).lower()
        if version != "gemm":
            raise QuantConfigError(
                f"quantization_config: AWQ version {version!r} is not supported (only gemm)"
            )
        if qc.get("zero_point", True) is not True:
            raise QuantConfigError("quantization_config: AWQ without zero points is not supported")
        return QuantScheme("awq", group_size=group)
    if qc.get("desc_act"):
        raise QuantConfigError("quantization_config: GPTQ act-order (desc_act) is not supported")
    fmt = str(qc.get("checkpoint_format", "gptq")).lower()
    if fmt not in ("gptq", "gptq_v2"):
        raise QuantConfigError(f"quantization_config: GPTQ checkpoint_format {fmt!r} is not supported")
    return QuantScheme("gptq", group_size=group, zero_offset=1 if fmt == "gptq" else 0)


def _fp8_scheme(qc: dict[str, Any]) -> QuantScheme:
    fmt = str(qc.get("fmt", "e4m3")).lower()
    if fmt != "e4m3":
        raise QuantConfigError(f"quantization_config: fp8 format {fmt!r} is not supported (only e4m3)")
    if str(qc.get("activation_scheme", "dynamic")).lower() != "dynamic":
        raise QuantConfigError(
            "quantization_config: static fp8 activation scales are not supported (only dynamic)"
        )
    block = qc.get("weight_block_size")
    ok = isinstance(block, list) and len(block) == 2 and all(isinstance(b, int) and b > 0 for b in block)
    if not ok:
        raise QuantConfigError(
            f"quantization_config: fp8 weight_block_size {block!r} is not supported ([rows, cols])"
        )
    return QuantScheme("fp8", block=(block[0], block[1]))


# ---------------------------------------------------------------------- grouping a checkpoint's tensors


class Part(NamedTuple):
    path: Path
    info: TensorInfo


class QuantSource(NamedTuple):
    """One quantized weight as the checkpoint stores it: its companion tensors by part name."""

    scheme: QuantScheme
    parts: dict[str, Part]
    shape: tuple[int, ...]  # the dense weight's shape ([N, K], or [E, N, K] for fused fp8 experts)

    @property
    def first(self) -> Part:
        return min(self.parts.values(), key=lambda p: (str(p.path), p.info.start))


def _fp8_names(name: str) -> tuple[str, str] | None:
    """(base, part) of an fp8 checkpoint name: X.weight / X.weight_scale_inv, and the fused experts'
    X.experts.gate_up_proj / X.experts.gate_up_proj_scale_inv (base keeps the leaf)."""
    if name.endswith(".weight_scale_inv"):
        return name[: -len("_scale_inv")], "weight_scale_inv"
    if name.endswith(("experts.gate_up_proj_scale_inv", "experts.down_proj_scale_inv")):
        return name[: -len("_scale_inv")], "weight_scale_inv"
    if name.endswith(("experts.gate_up_proj", "experts.down_proj")):
        return name, "weight"
    if name.endswith(".weight"):
        return name, "weight"
    return None


def group_tensors(
    tensors: dict[str, tuple[Part, tuple[int, ...]]], scheme: QuantScheme
) -> dict[str, tuple[Part | QuantSource, tuple[int, ...]]]:
    """The checkpoint's tensors with each quantized weight's companions folded into one entry named
    like the dense weight (`X.weight`, or the fused expert leaf) with the dense shape."""
    groups: dict[str, dict[str, Part]] = {}
    out: dict[str, tuple[Part | QuantSource, tuple[int, ...]]] = {}
    for name, (part, shape) in tensors.items():
        if scheme.method == "fp8":
            split = _fp8_names(name)
            if split and (split[1] == "weight_scale_inv" or part.info.dtype in FP8_DTYPES):
                groups.setdefault(split[0], {})[split[1]] = part
                continue
        else:
            base, _, leaf = name.rpartition(".")
            if leaf in scheme.parts:
                groups.setdefault(base + ".weight", {})[leaf] = part
                continue
        out[name] = (part, shape)
    for name, parts in groups.items():
        source = _source(name, parts, scheme)
        out[name] = (source, source.shape)
    return out


def _source(name: str, parts: dict[str, Part], scheme: QuantScheme) -> QuantSource:
    need = ("weight", "weight_scale_inv") if scheme.method == "fp8" else ("qweight", "qzeros", "scales")
    missing = [p for p in need if p not in parts]
    if missing:
        raise QuantConfigError(f"{name}: quantized weight without its {', '.join(missing)}")
    if scheme.method == "fp8":
        shape = parts["weight"].info.shape
        if parts["weight"].info.dtype != torch.float8_e4m3fn:
            raise QuantConfigError(
                f"{name}: fp8 weight stored as {parts['weight'].info.dtype}, not float8_e4m3fn"
            )
        bn, bk = scheme.block
        want = (*shape[:-2], math.ceil(shape[-2] / bn), math.ceil(shape[-1] / bk))
        if parts["weight_scale_inv"].info.shape != want:
            raise QuantConfigError(
                f"{name}: weight_scale_inv shape {parts['weight_scale_inv'].info.shape}, {want} expected"
            )
        return QuantSource(scheme, parts, shape)
    qw = parts["qweight"].info
    if qw.dtype != torch.int32 or len(qw.shape) != 2:
        raise QuantConfigError(
            f"{name}: qweight must be a 2-D int32 tensor, found {qw.dtype} {list(qw.shape)}"
        )
    n, k = (qw.shape[1], qw.shape[0] * 8) if scheme.method == "gptq" else (qw.shape[1] * 8, qw.shape[0])
    g = scheme.group_size
    if k % g or n % 8:
        raise QuantConfigError(f"{name}: a [{n}, {k}] weight does not split into groups of {g}")
    want = {"qzeros": (k // g, n // 8), "scales": (k // g, n)}
    for part, shape in want.items():
        if parts[part].info.shape != shape:
            raise QuantConfigError(f"{name}: {part} shape {parts[part].info.shape}, {shape} expected")
    if "g_idx" in parts and parts["g_idx"].info.shape != (k,):
        raise QuantConfigError(f"{name}: g_idx shape {parts['g_idx'].info.shape}, {(k,)} expected")
    return QuantSource(scheme, parts, (n, k))


# ---------------------------------------------------------------------- decoding


def _nibbles(words: Tensor) -> Tensor:
    """int32 [..., W] -> uint8 [..., W, 8]: nibble i (bits 4i..4i+3) of each word."""
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    return ((words[..., None] >> shifts) & 0xF).to(torch.uint8)


def decode_gptq(
    qweight: Tensor, qzeros: Tensor, scales: Tensor, g_idx: Tensor | None, scheme: QuantScheme
) -> Int4Codes:
    kw, n = qweight.shape
    k, g = kw * 8, scheme.group_size
    if g_idx is not None and not torch.equal(g_idx.long(), torch.arange(k) // g):
        raise QuantConfigError("GPTQ g_idx is not k // group_size (act-order weights are not supported)")
    zeros = _nibbles(qzeros).reshape(k // g, n).t().float() + scheme.zero_offset
    # qweight is Int4Codes' `kwords` as it is: word i of a column holds rows 8i..8i+7
    return Int4Codes(
        None, scales.float().t().contiguous(), zeros.contiguous(), g, kwords=qweight.contiguous()
    )


def decode_awq(qweight: Tensor, qzeros: Tensor, scales: Tensor, scheme: QuantScheme) -> Int4Codes:
    k, nw = qweight.shape
    codes = torch.empty(k, nw, 8, dtype=torch.uint8)  # [K, N] in memory, as the CPU packer reads it
    for i, column in enumerate(AWQ_ORDER):  # one nibble plane at a time
        codes[:, :, column] = torch.bitwise_and(torch.bitwise_right_shift(qweight, 4 * i), 15)
    order = torch.tensor(AWQ_ORDER).argsort()  # column c sits in nibble order.index(c)
    zeros = _nibbles(qzeros)[..., order].reshape(-1, nw * 8).t().float().contiguous()
    codes = codes.view(k, nw * 8).t()
    return Int4Codes(codes, scales.float().t().contiguous(), zeros, scheme.group_size)


def decode_fp8(weight: Tensor, scale_inv: Tensor, scheme: QuantScheme) -> Tensor:
    """float32 of the same shape: each [bn, bk] block times its scale (edge blocks cropped)."""
    bn, bk = scheme.block
    n, k = weight.shape[-2:]
    s = scale_inv.float().repeat_interleave(bn, dim=-2)[..., :n, :].repeat_interleave(bk, dim=-1)[..., :k]
    return weight.float() * s


def decode(source: QuantSource, read) -> Int4Codes | Tensor:
    """The weight of `source`, its parts read by read(part) -> Tensor."""
    p = {name: read(part) for name, part in source.parts.items()}
    s = source.scheme
    if s.method == "fp8":
        return decode_fp8(p["weight"], p["weight_scale_inv"], s)
    if s.method == "gptq":
        return decode_gptq(p["qweight"], p["qzeros"], p["scales"], p.get("g_idx"), s)
    return decode_awq(p["qweight"], p["qzeros"], p["scales"], s)


def expert_slice(source: QuantSource, e: int) -> QuantSource:
    """Expert e of a fused fp8 expert tensor [E, N, K] (its scale [E, ., .]) as a source of its own:
    each part's bytes for one expert are contiguous, so it is read alone."""
    parts = {}
    for name, part in source.parts.items():
        info = part.info
        each = info.nbytes // info.shape[0]
        parts[name] = Part(part.path, TensorInfo(info.dtype, info.shape[1:], info.start + e * each, each))
    return QuantSource(source.scheme, parts, source.shape[1:])


# ---------------------------------------------------------------------- encoding (benchmarks, tests)


def _words(nibbles: Tensor) -> Tensor:
    """[..., 8] values 0..15 -> int32 [...]: value i in bits 4i..4i+3 (the inverse of _nibbles)."""
    v = nibbles.to(torch.int32)
    out = v[..., 0]
    for i in range(1, 8):
        out = out | (v[..., i] << (4 * i))
    return out


def encode_gptq(q: Int4Codes, zero_offset: int = 1) -> dict[str, Tensor]:
    """Int4Codes [N, K] -> GPTQ tensors (qweight, qzeros, scales fp16, g_idx); the inverse of decode_gptq."""
    n, k = q.codes.shape
    g = q.group_size
    qweight = _words(q.codes.t().reshape(k // 8, 8, n).transpose(1, 2))
    z = (q.zeros.round().to(torch.int32) - zero_offset).clamp(0, 15).t().reshape(k // g, n // 8, 8)
    qzeros = _words(z)
    return {
        "qweight": qweight,
        "qzeros": qzeros,
        "scales": q.scales.t().to(torch.float16).contiguous(),
        "g_idx": (torch.arange(k) // g).to(torch.int32),
    }


def encode_awq(q: Int4Codes) -> dict[str, Tensor]:
    """Int4Codes [N, K] -> AWQ GEMM tensors (qweight, qzeros, scales fp16); the inverse of decode_awq."""
    n, k = q.codes.shape
    order = torch.tensor(AWQ_ORDER)

    def pack(rows: Tensor) -> Tensor:  # [R, N] -> [R, N/8]
        return _words(rows.to(torch.int32).reshape(rows.shape[0], n // 8, 8)[..., order])

    return {
        "qweight": pack(q.codes.t()),
        "qzeros": pack(q.zeros.round().t()),
        "scales": q.scales.t().to(torch.float16).contiguous(),
    }


def encode_fp8(w: Tensor, block: tuple[int, int]) -> tuple[Tensor, Tensor]:
    """float [..., N, K] -> (float8_e4m3fn weight, float32 scale_inv per block): the inverse of
    decode_fp8 up to fp8 rounding."""
    bn, bk = block
    n, k = w.shape[-2:]
    pn, pk = math.ceil(n / bn) * bn, math.ceil(k / bk) * bk
    padded = torch.nn.functional.pad(w.float(), (0, pk - k, 0, pn - n))
    blocks = padded.unflatten(-1, (pk // bk, bk)).unflatten(-3, (pn // bn, bn))  # [..., nb, bn, kb, bk]
    amax = blocks.abs().amax(dim=(-3, -1)).clamp(min=1e-12)
    scale_inv = amax / torch.finfo(torch.float8_e4m3fn).max
    s = scale_inv.repeat_interleave(bn, dim=-2)[..., :n, :].repeat_interleave(bk, dim=-1)[..., :k]
    return (w.float() / s).to(torch.float8_e4m3fn), scale_inv
