"""Clover as a vLLM model: vLLM's Qwen3-Next with Clover's checkpoint names and layout
(engines/weights.py). Imported by vLLM through the plugin's lazy registration, never by Clover.

Qwen3-Next rather than vLLM's Qwen3.5 class: the latter builds its layers by `model_type`
("qwen3_5_moe_text") and imports the vision stack (torchvision); Qwen3-Next is the same network at
block size 1 and needs neither. vLLM's Qwen3-Next does not tie embeddings; Clover's small models do.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from vllm.config import VllmConfig
from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead
from vllm.model_executor.models.qwen3_next import Qwen3NextForCausalLM

from clover.engines.weights import clover_to_qwen3_next


class CloverForCausalLM(Qwen3NextForCausalLM):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        if self.config.tie_word_embeddings and isinstance(self.lm_head, ParallelLMHead):
            self.lm_head = self.lm_head.tie_weights(self.model.embed_tokens)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        tied = self.config.tie_word_embeddings
        weights = ((n, t) for n, t in weights if not (tied and n == "lm_head.weight"))
        # the HF config carries the GDN head counts under the same names as CloverConfig
        loaded = super().load_weights(clover_to_qwen3_next(weights, self.config))
        return loaded | ({"lm_head.weight"} if tied else set())
