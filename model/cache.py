"""The inference cache: everything committed so far, for every layer, plus where we are.

- attention layers: K/V of the committed columns (`KVCache`);
- GDN layers: the fp32 recurrent state and the last K-1 conv inputs (`GDNCache`);
- `pos`: committed columns; `pad`: left-padding columns per sequence (batched prompts);
- `next_logits`: logits that predict column `pos`, read off the last committed hidden state
  (Clover predicts token i from the hidden state at i-1, so a block's first position takes its
  logits from here; with block size 1 this is exactly autoregressive decoding).

Committed K/V are only ever written beyond `pos` and states are replaced, never mutated in place,
so a snapshot is cheap: it keeps references, not copies.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from clover.model.layers.attention import KVCache
from clover.model.layers.gdn import GatedDeltaNet, GDNCache


@dataclass
class CacheSnapshot:
    pos: int
    next_logits: Tensor | None
    gdn: list[tuple[Tensor, Tensor] | None]


class CloverCache:
    def __init__(self, model, batch_size: int) -> None:
        self.batch_size = batch_size
        self.layers: list[KVCache | GDNCache] = []
        for layer in model.model.layers:
            mixer = layer.mixer
            dev = layer.input_layernorm.weight.device  # beside its layer (a model split over devices)
            if isinstance(mixer, GatedDeltaNet):
                self.layers.append(GDNCache(batch_size, mixer, model.dtype, dev))
            else:
                self.layers.append(KVCache(batch_size, mixer.num_kv_heads, mixer.head_dim, model.dtype, dev))
        self.pos = 0
        self.pad = torch.zeros(batch_size, dtype=torch.long, device=model.device)
        self.next_logits: Tensor | None = None

    @property
    def has_padding(self) -> bool:
        return bool((self.pad > 0).any())

    def key_valid(self, length: int) -> Tensor | None:
        """[N, length] bool: False on left-padding columns; None when there is no padding."""
        if not self.has_padding:
            return None
        return torch.arange(length, device=self.pad.device)[None, :] >= self.pad[:, None]

    def snapshot(self) -> CacheSnapshot:
        gdn = [(c.state, c.conv) if isinstance(c, GDNCache) else None for c in self.layers]
        return CacheSnapshot(self.pos, self.next_logits, gdn)

    def restore(self, snap: CacheSnapshot) -> None:
        self.pos, self.next_logits = snap.pos, snap.next_logits
        for c, saved in zip(self.layers, snap.gdn, strict=True):
            if saved is not None:
                c.state, c.conv = saved
