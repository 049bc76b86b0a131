"""Clover's configuration: one dataclass that round-trips config.json. Torch-free.

`CloverConfig.from_dict` also accepts Qwen3.5 / Qwen3.6 (and Qwen3-Next) Hugging Face configs: a nested
`text_config`, `layer_types` or `full_attention_interval`, `rope_theta` at top level or inside
`rope_parameters`. Such an autoregressive checkpoint runs as Clover with block_size 1; its block-mode
GDN parameters are absent and keep their neutral defaults (see model/layers/gdn.py).

Precedence with a nested `text_config`: the text config describes the network, so its values win for
every architecture key; the outer config describes the saved checkpoint as a whole, so its
CHECKPOINT_KEYS (dtype, tied embeddings) win when it sets them (transformers reads them there too).

RoPE: only the default (unscaled) rotary embedding is implemented. `rope_type`/`type` other than
"default", or a scaling `factor`, is refused with one clear line rather than silently ignored (YaRN
and friends would change every position's angle). M-RoPE sections (`mrope_section`) are accepted:
for text the three position streams are equal, which is exactly 1-D RoPE.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# How a diffusion round keeps tokens (model/decoder/generate.py): every confident position, only the run of
# confident positions from the leftmost masked one, or the run of the round's draft that a causal
# pass confirms (greedy: exactly the autoregressive output, in fewer rounds; model/decoder/verify.py).
DECODE_ORDERS = ("any", "left", "verify")

FULL_ATTENTION = "full_attention"
LINEAR_ATTENTION = "linear_attention"
# keys that describe the whole saved checkpoint: the outer config wins over its text_config
CHECKPOINT_KEYS = ("torch_dtype", "dtype", "tie_word_embeddings")
ROPE_TYPES = ("default",)
# what config.json's torch_dtype / dtype may say (transformers writes the torch name without "torch.")
TORCH_DTYPES = ("bfloat16", "float16", "float32", "float64")


@dataclass
class CloverConfig:
    vocab_size: int = 248320
    hidden_size: int = 2048
    num_hidden_layers: int = 40
    layer_types: list[str] = field(default_factory=list)  # empty: derived from full_attention_interval
    full_attention_interval: int = 4
    # gated full attention
    num_attention_heads: int = 16
    num_key_value_heads: int = 2
    head_dim: int = 256
    partial_rotary_factor: float = 0.25
    rope_theta: float = 10_000_000.0
    # gated delta net (linear attention)
    linear_num_key_heads: int = 16
    linear_num_value_heads: int = 32
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    linear_conv_kernel_dim: int = 4
    # mixture of experts (every layer)
    num_experts: int = 256
    num_experts_per_tok: int = 8
    moe_intermediate_size: int = 512
    shared_expert_intermediate_size: int = 512
    norm_topk_prob: bool = True
    # misc
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 131072
    initializer_range: float = 0.02
    torch_dtype: str = "bfloat16"
    # block diffusion: block_size is the largest block the checkpoint was trained on (1: an
    # autoregressive checkpoint); decode_block_size (0: block_size) and decode_order are the
    # decoder's defaults, the ones the checkpoint scores best with. A diffusion checkpoint may
    # score best at 1 and still be decoded in blocks on request.
    block_size: int = 32
    decode_block_size: int = 0
    decode_order: str = "any"
    mask_token_id: int = 248319
    eos_token_ids: list[int] = field(default_factory=list)
    pad_token_id: int | None = None
    # ids every prompt starts with, the way the checkpoint's training rows started: the embedded
    # model's rows open with <|endoftext|> (left padding, or the separator of packed documents);
    # its first token became the one attention rests on, and a prompt without it miswrites tokens
    prompt_start_ids: list[int] = field(default_factory=list)
    # chat rendering: "compact" lists tools as name(params) lines, for small models whose context
    # and capacity a full JSON-ish tool section would swamp
    tool_prompt: str = "full"
    # str_replace's new_str taken from one-site repairs of old_str by likelihood, not free-written
    # (steering/edit_choice.py): for a small model that finds bugs but garbles fixes
    edit_repairs: bool = False
    # the answer's `code spans` copy what the user wrote or a tool showed (steering/
    # answer_spans.py): for a small model that invents the names it quotes; a model that writes
    # its own inline code leaves it off
    grounded_spans: bool = False
    # text those spans may also copy: what the checkpoint's own taught replies quote (the embedded
    # one's "For a bigger task, a larger model (`clover chat --model ...`) will do better.")
    answer_quotes: list[str] = field(default_factory=list)
    # at the agent's step limit, a last turn without tools for a reply (agent.py): off for a model
    # that answers such a request with garbage (the embedded one wrote its calls out as text)
    wrap_up: bool = True
    # `clover fix`: answers given before any file edit are redone, this many per run, as a turn
    # that must call a tool (agent.py): for a model that often stops before it edits
    early_answer_redos: int = 0
    # `clover fix` rolls back a change that breaks a test that passed before (clover_cli/
    # test_guard.py): for a model whose edits are mutations more often than fixes
    rolls_back_test_breaks: bool = False
    # what a small checkpoint was made for (steering/competence.py): past a prompt this
    # long, a workspace with more files, or a reply it scores lower (mean log-probability per
    # token), it answers that the request needs a larger model; 0 leaves each unlimited
    max_prompt_tokens: int = 0
    max_repo_files: int = 0
    min_reply_logprob: float = 0.0

    def __post_init__(self) -> None:
        _check_types(self)
        if not self.layer_types:
            n = self.full_attention_interval
            self.layer_types = [
                FULL_ATTENTION if (i + 1) % n == 0 else LINEAR_ATTENTION
                for i in range(self.num_hidden_layers)
            ]
        if len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(
                f"layer_types has {len(self.layer_types)} entries, num_hidden_layers is {self.num_hidden_layers}"
            )
        bad = set(self.layer_types) - {FULL_ATTENTION, LINEAR_ATTENTION}
        if bad:
            raise ValueError(f"unknown layer types: {sorted(bad)}")
        if self.linear_num_value_heads % self.linear_num_key_heads:
            raise ValueError("linear_num_value_heads must be a multiple of linear_num_key_heads")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        if self.torch_dtype not in TORCH_DTYPES:
            raise ValueError(
                f"torch_dtype {self.torch_dtype!r} is not a dtype Clover knows ({', '.join(TORCH_DTYPES)})"
            )
        if self.decode_order not in DECODE_ORDERS:
            raise ValueError(
                f"decode_order must be one of {', '.join(DECODE_ORDERS)}, not {self.decode_order!r}"
            )
        if not 0 <= self.decode_block_size <= self.block_size:
            raise ValueError(
                f"decode_block_size must be 0 (block_size) to {self.block_size}, not {self.decode_block_size}"
            )
        if self.early_answer_redos < 0:
            raise ValueError(f"early_answer_redos must be 0 (none) or more, not {self.early_answer_redos}")
        if not 0 <= self.mask_token_id < self.vocab_size:
            raise ValueError(f"mask_token_id {self.mask_token_id} outside the vocabulary ({self.vocab_size})")
        for token in self.prompt_start_ids:
            if not 0 <= token < self.vocab_size:
                raise ValueError(f"prompt_start_ids: {token} outside the vocabulary ({self.vocab_size})")

    # ------------------------------------------------------------------ derived sizes

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def num_full_attention_layers(self) -> int:
        return self.layer_types.count(FULL_ATTENTION)

    def param_counts(self) -> dict[str, int]:
        """Total and per-token active parameter counts, computed from the shapes alone."""
        h = self.hidden_size
        kd = self.linear_num_key_heads * self.linear_key_head_dim
        vd = self.linear_num_value_heads * self.linear_value_head_dim
        hv = self.linear_num_value_heads
        gdn = (
            h * (2 * kd + vd)
            + h * vd
            + 2 * h * hv  # in_proj_qkv, z, b, a
            + (2 * kd + vd) * self.linear_conv_kernel_dim  # conv1d
            + 2 * hv
            + 3 * hv  # A_log, dt_bias, block-mode parameters
            + self.linear_value_head_dim  # gated norm
            + vd * h  # out_proj
        )
        qd = self.num_attention_heads * self.head_dim
        kvd = self.num_key_value_heads * self.head_dim
        attn = h * 2 * qd + 2 * h * kvd + qd * h + 2 * self.head_dim
        expert = 3 * h * self.moe_intermediate_size
        shared = 3 * h * self.shared_expert_intermediate_size + h
        router = h * self.num_experts
        n_full = self.num_full_attention_layers
        n_lin = self.num_hidden_layers - n_full
        mixers = n_full * attn + n_lin * gdn
        norms = self.num_hidden_layers * 2 * h + h
        embed = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        dense = mixers + norms + embed + self.num_hidden_layers * (shared + router)
        total = dense + self.num_hidden_layers * self.num_experts * expert
        # a token touches top-k experts, and one row of the input embedding (a lookup, not a matmul)
        active = dense - self.vocab_size * h + h + self.num_hidden_layers * self.num_experts_per_tok * expert
        if self.tie_word_embeddings:  # the tied table is still read whole by lm_head
            active += self.vocab_size * h - h
        return {"total": total, "active": active}

    # ------------------------------------------------------------------ (de)serialisation

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["model_type"] = "clover"
        d["architectures"] = ["CloverForCausalLM"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CloverConfig:
        """Build from a Clover config.json or a Qwen3.5/3.6-style HF config (unknown keys are ignored)."""
        if not isinstance(d, dict):
            raise ValueError("config must be a JSON object")
        outer = d
        if isinstance(d.get("text_config"), dict):
            d = {**{k: v for k, v in outer.items() if k != "text_config"}, **d["text_config"]}
            d.update({k: outer[k] for k in CHECKPOINT_KEYS if outer.get(k) is not None})
            outer_dtype = outer.get("dtype") or outer.get("torch_dtype")
            if isinstance(outer_dtype, str):
                d["torch_dtype"] = outer_dtype
        d = dict(d)
        is_clover = outer.get("model_type") == "clover"
        _check_supported(d)
        for rope in (d.get("rope_parameters"), d.get("rope_scaling")):
            if isinstance(rope, dict):
                for key in ("rope_theta", "partial_rotary_factor"):
                    if key not in d and key in rope:
                        d[key] = rope[key]
        if "eos_token_ids" not in d and "eos_token_id" in d:
            eos = d["eos_token_id"]
            d["eos_token_ids"] = [eos] if isinstance(eos, int) else list(eos or [])
        if "torch_dtype" not in d and isinstance(d.get("dtype"), str):
            d["torch_dtype"] = d["dtype"]
        if not is_clover:
            # An autoregressive checkpoint of the family: plain AR decoding unless told otherwise.
            d.setdefault("block_size", 1)
            if "mask_token_id" not in d and "vocab_size" in d:
                d["mask_token_id"] = int(d["vocab_size"]) - 1
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in names}
        try:
            return cls(**kwargs)
        except TypeError as e:  # pragma: no cover - dataclass rejects a malformed value
            raise ValueError(f"bad config: {e}") from None

    def default_block(self) -> int:
        """The block size the decoder uses unless told otherwise."""
        return self.decode_block_size or self.block_size

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def save(self, path: str | Path) -> None:
        p = Path(path)
        if p.is_dir():
            p = p / "config.json"
        p.write_text(self.to_json() + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> CloverConfig:
        p = Path(path)
        if p.is_dir():
            p = p / "config.json"
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ValueError(f"no config.json at {p}") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{p} is not valid JSON: {e}") from None
        try:
            return cls.from_dict(data)
        except ValueError as e:
            raise ValueError(f"{p}: {e}") from None


# A config.json value of the wrong JSON type must not pass as another: bool("false") is True, and a
# string block size fails deep inside the decoder. Keyed by the annotations' text (postponed).
_TYPE_CHECKS: dict[str, tuple[str, Any]] = {
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "int": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "float": ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
    "str": ("a string", lambda v: isinstance(v, str)),
    "int | None": (
        "an integer or null",
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
    ),
    "list[str]": ("a list of strings", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "list[int]": (
        "a list of integers",
        lambda v: isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v),
    ),
}


def _check_types(config: CloverConfig) -> None:
    for f in dataclasses.fields(config):
        check = _TYPE_CHECKS.get(str(f.type))
        value = getattr(config, f.name)
        if check is not None and not check[1](value):
            raise ValueError(f"config field {f.name} must be {check[0]}, not {value!r}")


def _check_supported(d: dict[str, Any]) -> None:
    """Refuse, in one line each, what this implementation would otherwise get silently wrong."""
    for key in ("rope_parameters", "rope_scaling"):
        rope = d.get(key)
        if rope is None:
            continue
        if not isinstance(rope, dict):
            raise ValueError(f"{key} must be an object, got {rope!r}")
        kind = rope.get("rope_type", rope.get("type", "default"))
        if kind not in ROPE_TYPES:
            raise ValueError(f"{key}: rope type {kind!r} is not supported (only default RoPE)")
        factor = rope.get("factor")
        if factor not in (None, 1, 1.0):
            raise ValueError(f"{key}: RoPE scaling factor {factor} is not supported (only unscaled RoPE)")
    # Qwen3-Next can make some layers dense MLPs; every Clover layer is MoE.
    if d.get("mlp_only_layers") or d.get("decoder_sparse_step", 1) != 1:
        raise ValueError("dense MLP layers (mlp_only_layers / decoder_sparse_step) are not supported")
    if d.get("attention_bias"):
        raise ValueError("attention_bias=true is not supported (Clover's projections have no bias)")
    if d.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {d['hidden_act']!r} is not supported (only silu)")


# ---------------------------------------------------------------------- presets


def clover_35b_a3b() -> CloverConfig:
    """The published Clover-35B-A3B-Preview shape (Qwen3.5/3.6-35B-A3B base)."""
    return CloverConfig()


def tiny(**overrides: Any) -> CloverConfig:
    """A few-hundred-thousand-parameter model for tests: every code path, CPU-fast."""
    base: dict[str, Any] = dict(
        vocab_size=128,
        hidden_size=64,
        num_hidden_layers=4,
        full_attention_interval=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        partial_rotary_factor=0.5,
        rope_theta=10_000.0,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        max_position_embeddings=4096,
        torch_dtype="float32",
        block_size=4,
        mask_token_id=127,
        eos_token_ids=[1],
        pad_token_id=0,
    )
    base.update(overrides)
    return CloverConfig(**base)


PRESETS = {
    "clover-35b-a3b": clover_35b_a3b,
    "tiny": tiny,
}


def preset(name: str) -> CloverConfig:
    try:
        return PRESETS[name]()
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None
