"""vLLM plugin: serve a Clover checkpoint with vLLM, out of tree (no fork).

pyproject.toml declares it as the `vllm.general_plugins` entry point `clover`; vLLM calls `register()`
in every process it starts. It registers the `clover` config type with transformers' AutoConfig and
the `CloverForCausalLM` architecture with vLLM's ModelRegistry (lazily, as a "module:class" string,
so nothing touches CUDA at registration). The model is vLLM's own Qwen3-Next (tensor, expert and
pipeline parallel, its GDN and MoE kernels) with Clover's weights mapped (engines/weights.py):
autoregressive decoding, block size 1 — exactly Clover's causal mode.

    pip install vllm           # beside clover-cli, in the same environment
    vllm serve /path/to/clover-checkpoint --tensor-parallel-size 2
    clover chat --base-url http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import contextlib

ARCH = "CloverForCausalLM"
MODEL = "clover.engines.vllm_model:CloverForCausalLM"


def register_config() -> None:
    from transformers import AutoConfig

    from clover.engines.hf_config import CloverHFConfig

    with contextlib.suppress(ValueError):  # already registered in this process
        AutoConfig.register("clover", CloverHFConfig)


def register() -> None:
    from vllm import ModelRegistry

    register_config()
    if ARCH not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model(ARCH, MODEL)
    try:  # vLLM's text-only Qwen3.5 config hook: the GDN state dtype from the config (fp32, as Clover)
        from vllm.model_executor.models.config import MODELS_CONFIG_MAP, Qwen3_5ForCausalLMConfig
    except ImportError:  # an older or newer vLLM without it: its defaults apply
        return
    MODELS_CONFIG_MAP.setdefault(ARCH, Qwen3_5ForCausalLMConfig)
