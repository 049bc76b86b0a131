"""What one forward pass carries besides hidden states: the two token streams' positions and masks.

Every layer sees two streams (the BD3-LM x_0 / x_t layout, reused for inference):
- clean [N, Tc, D]: tokens processed causally — the clean sequence in training, the tokens being
  committed at inference. Their K/V and GDN state become (or extend) the committed history.
- noisy [N, nb, B, D]: blocks in block-diffusion mode. Block b starts at clean-relative offset
  `noisy_offset + b*B`; it sees the committed history before its start and itself (bidirectional).
  Training: noisy_offset = 0 and the blocks tile the clean stream. Inference: one block right after
  the clean stream (noisy_offset = Tc; Tc = 0 for a plain denoising round).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class ForwardContext:
    past: int  # committed columns in the cache before this forward (P)
    clean_len: int  # Tc
    noisy_offset: int
    commit: bool  # write the clean stream's K/V, GDN state and conv tail into the cache
    chunk_size: int  # chunk of the clean stream's delta rule (= block size in training)
    clean_rope: tuple[Tensor, Tensor] | None = None  # cos, sin [N, Tc, rd]
    noisy_rope: tuple[Tensor, Tensor] | None = None  # cos, sin [N, nb*B, rd]
    clean_mask: Tensor | None = None  # [N, 1, Tc, P+Tc] bool
    noisy_mask: Tensor | None = None  # [N, 1, nb*B, P+Tc+nb*B] bool
    clean_valid: Tensor | None = None  # [N, Tc] bool, False on left padding; None = all valid
