"""The Hugging Face config class for `model_type: clover`, so that engines which read configs with
transformers' AutoConfig (vLLM, SGLang) can open a Clover checkpoint. Needs transformers >= 5;
imported only by the engine plugins."""

from __future__ import annotations

from transformers import Qwen3NextConfig


class CloverHFConfig(Qwen3NextConfig):
    """Clover's config.json read as a Qwen3-Next config: the same network at block size 1 (every
    layer MoE, `rope_theta` / `partial_rotary_factor` become `rope_parameters`). Clover's own keys
    (block_size, mask_token_id, eos_token_ids, tool_prompt) ride along as attributes."""

    model_type = "clover"

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        eos = getattr(self, "eos_token_ids", None)
        if self.eos_token_id is None and eos:
            self.eos_token_id = list(eos) if len(eos) > 1 else eos[0]
        if getattr(self, "mamba_ssm_dtype", None) is None:
            self.mamba_ssm_dtype = "float32"  # Clover keeps the GDN state in fp32
