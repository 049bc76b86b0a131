"""The same weights for llama.cpp: a GPTQ-Int4 Clover checkpoint (benchmarks/write_realsize.py) as a
GGUF of architecture `qwen35moe` (llama.cpp's Qwen3.5-MoE), streamed tensor by tensor and row block by
row block, so neither form is ever whole in memory.

    python -m benchmarks.gguf_write --model /work/big/clover-35b-gptq --out /work/big/clover-35b-q4_0.gguf

Type: Q4_0 for every int4 matrix. The random checkpoint's codes sit around zero point 8 with one fp16
scale per group of 128 (benchmarks/quant_ckpt.py `random_quantized`), so Q4_0's w = (q - 8) * d with
d = that scale on each of the group's four blocks of 32 is the same matrix, value for value; it is
also the 4-bit type whose x86 kernels llama.cpp tunes most (Q4_0 x Q8_0 on integer dot products, and
its repacked layouts). Q4_K would requantize (6-bit sub-scales), so its weights would not be the
same. A checkpoint whose zero points are not all 8 is refused. Q4_0 costs 4.5 bits a weight against
Clover's 4.25 (bf16 scale and minimum per 128). The bf16 tensors (embedding, lm_head, routers, GDN's
a / b projections) stay bf16; norms and the GDN's small vectors are float32, in llama.cpp's
convention (zero-centred norms stored as 1 + w, A as -exp(A_log)). Clover's block-diffusion GDN
parameters have no place in llama.cpp and are left out. The tokenizer is the checkpoint's BPE
(its ids are the same in both programs), padded with unused tokens to the embedding's rows.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch

ROW_CHUNK = 4096  # rows of a bf16 matrix read and written at a time
Q4_BLOCK = 32


class NotSameWeights(ValueError):
    """The checkpoint's int4 codes cannot be written as Q4_0 without changing them."""


class Source:
    """A safetensors checkpoint read one tensor (or one row range) at a time."""

    def __init__(self, model: Path) -> None:
        from safetensors import safe_open

        self._files = {}
        self.where: dict[str, Path] = {}
        for path in sorted(model.glob("*.safetensors")):
            f = safe_open(str(path), "pt")
            self._files[path] = f
            for name in f.keys():  # noqa: SIM118 - a safe_open handle is no dict
                self.where[name] = path

    def has(self, name: str) -> bool:
        return name in self.where

    def get(self, name: str) -> torch.Tensor:
        return self._files[self.where[name]].get_tensor(name)

    def rows(self, name: str, start: int, stop: int) -> torch.Tensor:
        return self._files[self.where[name]].get_slice(name)[start:stop]

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._files[self.where[name]].get_slice(name).get_shape())


def q4_0_bytes(src: Source, base: str, zero_offset: int) -> np.ndarray:
    """GPTQ matrix `base` (qweight [K/8, N], qzeros, scales [K/G, N]) -> Q4_0 blocks uint8
    [N, K/32 * 18]: per block of 32 columns the fp16 scale, then 16 bytes (column j low, j + 16 high)."""
    kw, zw, scales = src.get(f"{base}.qweight"), src.get(f"{base}.qzeros"), src.get(f"{base}.scales")
    k8, n = kw.shape
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    zeros = ((zw[..., None] >> shifts) & 15) + zero_offset
    if not bool((zeros == 8).all()):
        raise NotSameWeights(f"{base}: zero points other than 8; Q4_0 would not hold the same weights")
    codes = ((kw[:, None, :] >> shifts[None, :, None]) & 15).to(torch.uint8)  # [K/8, 8, N]
    codes = codes.permute(2, 0, 1).reshape(n, k8 * 8)  # [N, K]
    blocks = codes.view(n, -1, Q4_BLOCK)
    qs = blocks[..., :16] | (blocks[..., 16:] << 4)
    group = k8 * 8 // scales.shape[0]
    d = scales.t().to(torch.float16).repeat_interleave(group // Q4_BLOCK, dim=1).contiguous()
    out = torch.cat([d.view(torch.uint8).view(n, -1, 2), qs], dim=-1)  # [N, K/32, 18]
    return out.reshape(n, -1).numpy()


def _plan(src: Source, raw: dict) -> list[tuple[str, tuple[int, ...], object, Callable[[], Iterator]]]:
    """Every GGUF tensor in file order: (name, numpy byte shape, ggml type, a producer of its bytes)."""
    from gguf import GGMLQuantizationType as T

    layers, experts = raw["num_hidden_layers"], raw["num_experts"]
    offset = 1 if (raw["quantization_config"].get("checkpoint_format", "gptq") == "gptq") else 0
    p = "model.language_model."
    plan = []

    def bf16(gname: str, name: str) -> None:
        shape = src.shape(name)
        rows = shape[0]

        def produce(name=name, rows=rows):
            for a in range(0, rows, ROW_CHUNK):
                yield src.rows(name, a, min(rows, a + ROW_CHUNK)).contiguous().view(torch.uint8).numpy()

        plan.append((gname, (*shape[:-1], shape[-1] * 2), T.BF16, produce))

    def f32(gname: str, name: str, fn=lambda t: t) -> None:
        t = fn(src.get(name).float()).contiguous()
        plan.append((gname, tuple(t.shape), T.F32, lambda t=t: iter([t.numpy()])))

    def q4(gname: str, bases: list[str]) -> None:
        n, k = src.shape(f"{bases[0]}.scales")[1], src.shape(f"{bases[0]}.qweight")[0] * 8
        shape = ((len(bases),) if len(bases) > 1 else ()) + (n, k // Q4_BLOCK * 18)
        plan.append((gname, shape, T.Q4_0, lambda b=bases: (q4_0_bytes(src, x, offset) for x in b)))

    plus_one = lambda t: t + 1  # noqa: E731 - zero-centred RMSNorm (1 + w) as llama.cpp stores it
    bf16("token_embd.weight", p + "embed_tokens.weight")
    f32("output_norm.weight", p + "norm.weight", plus_one)
    bf16("output.weight", "lm_head.weight")
    for i in range(layers):
        lp, b = f"{p}layers.{i}.", f"blk.{i}."
        f32(b + "attn_norm.weight", lp + "input_layernorm.weight", plus_one)
        f32(b + "post_attention_norm.weight", lp + "post_attention_layernorm.weight", plus_one)
        if src.has(lp + "linear_attn.A_log"):
            la = lp + "linear_attn."
            q4(b + "attn_qkv.weight", [la + "in_proj_qkv"])
            q4(b + "attn_gate.weight", [la + "in_proj_z"])
            bf16(b + "ssm_beta.weight", la + "in_proj_b.weight")
            bf16(b + "ssm_alpha.weight", la + "in_proj_a.weight")
            f32(b + "ssm_conv1d.weight", la + "conv1d.weight", lambda t: t.squeeze(1))
            f32(b + "ssm_a", la + "A_log", lambda t: -torch.exp(t))
            f32(b + "ssm_dt.bias", la + "dt_bias")
            f32(b + "ssm_norm.weight", la + "norm.weight")
            q4(b + "ssm_out.weight", [la + "out_proj"])
        else:
            sa = lp + "self_attn."
            for g, h in (
                ("attn_q", "q_proj"),
                ("attn_k", "k_proj"),
                ("attn_v", "v_proj"),
                ("attn_output", "o_proj"),
            ):
                q4(f"{b}{g}.weight", [sa + h])
            f32(b + "attn_q_norm.weight", sa + "q_norm.weight", plus_one)
            f32(b + "attn_k_norm.weight", sa + "k_norm.weight", plus_one)
        mp = lp + "mlp."
        bf16(b + "ffn_gate_inp.weight", mp + "gate.weight")
        for g, h in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
            q4(f"{b}ffn_{g}_exps.weight", [f"{mp}experts.{e}.{h}" for e in range(experts)])
        f32(b + "ffn_gate_inp_shexp.weight", mp + "shared_expert_gate.weight", lambda t: t.reshape(-1))
        for g, h in (("gate", "gate_proj"), ("up", "up_proj"), ("down", "down_proj")):
            q4(f"{b}ffn_{g}_shexp.weight", [f"{mp}shared_expert.{h}"])
    return plan


def _metadata(w, raw: dict, vocab_rows: int, tokenizer: dict) -> None:
    arch = "qwen35moe"
    head_dim = raw["head_dim"]
    w.add_context_length(raw.get("max_position_embeddings", 32768))
    w.add_embedding_length(raw["hidden_size"])
    w.add_block_count(raw["num_hidden_layers"])
    w.add_head_count(raw["num_attention_heads"])
    w.add_head_count_kv(raw["num_key_value_heads"])
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(raw["rope_theta"])
    rope = int(head_dim * raw["partial_rotary_factor"])
    w.add_rope_dimension_count(rope)
    # Qwen3.5's interleaved MRoPE sections, [11, 11, 10] at its 64 rotary dims (text uses one
    # position for all three); smaller test shapes get the same split of rope / 2
    third = rope // 2 // 3
    w.add_rope_dimension_sections([rope // 2 - 2 * third, third, third, 0])
    w.add_layer_norm_rms_eps(raw["rms_norm_eps"])
    w.add_expert_count(raw["num_experts"])
    w.add_expert_used_count(raw["num_experts_per_tok"])
    w.add_expert_feed_forward_length(raw["moe_intermediate_size"])
    w.add_expert_shared_feed_forward_length(raw["shared_expert_intermediate_size"])
    w.add_ssm_conv_kernel(raw["linear_conv_kernel_dim"])
    w.add_ssm_state_size(raw["linear_key_head_dim"])
    w.add_ssm_group_count(raw["linear_num_key_heads"])
    w.add_ssm_time_step_rank(raw["linear_num_value_heads"])
    w.add_ssm_inner_size(raw["linear_value_head_dim"] * raw["linear_num_value_heads"])
    w.add_full_attention_interval(raw["full_attention_interval"])
    w.add_file_type(2)  # LLAMA_FTYPE_MOSTLY_Q4_0
    assert w.arch == arch
    # the tokenizer: byte-level BPE (the checkpoint's), padded to the embedding's rows
    vocab = tokenizer["model"]["vocab"]
    added = {t["id"]: t["content"] for t in tokenizer.get("added_tokens", [])}
    by_id = {i: s for s, i in vocab.items()} | added
    tokens = [by_id.get(i, f"[PAD{i}]") for i in range(vocab_rows)]
    types = [
        3 if i in added else (1 if i in by_id else 5) for i in range(vocab_rows)
    ]  # control / normal / unused
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    ids = {c: i for i, c in added.items()}
    w.add_eos_token_id(ids.get("<|im_end|>", 0))
    w.add_pad_token_id(ids.get("<|endoftext|>", 0))
    w.add_add_bos_token(False)


def write_gguf(model: Path, out: Path) -> dict:
    """Write `out` from the GPTQ checkpoint `model`; returns {tensors, bytes}."""
    from gguf import GGUFWriter

    raw = json.loads((model / "config.json").read_text())
    qc = raw.get("quantization_config") or {}
    if qc.get("quant_method") != "gptq" or qc.get("bits") != 4:
        raise NotSameWeights("the checkpoint is not GPTQ-Int4: nothing to write as Q4_0 unchanged")
    src = Source(model)
    plan = _plan(src, raw)
    writer = GGUFWriter(str(out), "qwen35moe")
    _metadata(writer, raw, src.shape("model.language_model.embed_tokens.weight")[0],
              json.loads((model / "tokenizer.json").read_text()))  # fmt: skip
    for name, shape, kind, _ in plan:
        writer.add_tensor_info(name, shape, np.dtype(np.uint8 if kind.name != "F32" else np.float32),
                               int(np.prod(shape)) * (4 if kind.name == "F32" else 1), raw_dtype=kind)  # fmt: skip
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    fout = writer.fout[0]
    align = writer.data_alignment
    for name, shape, kind, produce in plan:  # GGUFWriter.write_tensor_data, one piece at a time
        fout.write(b"\0" * (-fout.tell() % align))
        want = int(np.prod(shape)) * (4 if kind.name == "F32" else 1)
        written = 0
        for piece in produce():
            piece.tofile(fout)
            written += piece.nbytes
        if written != want:
            raise RuntimeError(f"{name}: wrote {written} bytes, expected {want}")
        writer.tensors[0].pop(name)
    fout.write(b"\0" * (-fout.tell() % align))
    writer.close()
    return {"tensors": len(plan), "bytes": out.stat().st_size}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, required=True, help="a GPTQ checkpoint from write_realsize")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    if a.out.exists():
        print(f"gguf_write: {a.out} exists", file=sys.stderr)
        return 2
    try:
        r = write_gguf(a.model, a.out)
    except (NotSameWeights, OSError, KeyError) as e:
        a.out.unlink(missing_ok=True)
        print(f"gguf_write: {e}", file=sys.stderr)
        return 1
    print(f"wrote {a.out}: {r['tensors']} tensors, {r['bytes'] / 1e9:.2f} GB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
