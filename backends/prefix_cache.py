"""Prompt prefix caching for the local backend: an agent turn only prefills what is new.

An agent conversation grows by one assistant turn and its tool results per step, so each prompt
starts with most of the previous one. We keep one `CloverCache` per conversation and snapshots of
it at a few committed prompt positions, with the prompt tokens they hold. A new prompt restores
the longest snapshot whose tokens it shares and prefills only the rest.

Why several snapshots, and one a little before the end of each prompt: a GDN state cannot be
rewound, so a snapshot is usable only if the new prompt shares all of its tokens. The previous
prompt ends with the generation prompt (`<|im_start|>assistant\\n<think>\\n`), while the next one
renders that turn from history (thinking dropped), so the two diverge a few tokens before the old
prompt's end, often before its last whole block. Each turn therefore snapshots at the end of its
prefill and, when that lies within `margin` tokens of the prompt's end, also at the last block
boundary at least `margin` tokens before it (the prefill runs in two pieces then).

Why this is safe with references, not copies: attention K/V are only written at positions >= the
cache's `pos` and GDN states are replaced, never mutated (model/cache.py). Restoring a snapshot at
P and prefilling overwrites K/V columns >= P, so every snapshot beyond P is dropped at that moment;
the ones at or before P stay valid. The committed cache does not depend on the block size, so a
snapshot serves any block size. Batch size 1 only; a call that finds the cache busy (another
thread) decodes without it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import torch

from clover.model.cache import CacheSnapshot, CloverCache
from clover.model.decoder.generate import DecodeSettings, GenerateResult, generate

DEFAULT_KEEP = 4  # snapshots kept: the last two turns (end of prefill + the margin point)
DEFAULT_MARGIN = 16  # tokens before the prompt's end where the next prompt may diverge


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class PrefixCache:
    """One conversation's committed prompt prefixes for one network (see the module docstring)."""

    def __init__(self, keep: int = DEFAULT_KEEP, margin: int = DEFAULT_MARGIN) -> None:
        if keep < 1 or margin < 0:
            raise ValueError("need keep >= 1 and margin >= 0")
        self.keep, self.margin = keep, margin
        self._lock = threading.Lock()
        self.clear()

    def clear(self) -> None:
        """Forget everything (e.g. after the network's weights changed)."""
        self._model: Any = None
        self._cache: CloverCache | None = None
        self._ids: list[int] = []  # prompt tokens every kept snapshot agrees with (up to its pos)
        self._snaps: list[CacheSnapshot] = []  # sorted by pos; all of self._cache

    @property
    def positions(self) -> list[int]:
        """Committed positions of the kept snapshots (for tests and diagnostics)."""
        return [s.pos for s in self._snaps]

    def generate(
        self, model: Any, ids: Sequence[int], settings: DecodeSettings | None = None, **kwargs: Any
    ) -> GenerateResult:
        """`model.generate.generate(model, [ids], settings, **kwargs)`, resuming from the longest
        usable snapshot. Stats gain `cached_prompt_tokens`, `prefill_tokens`, `prefill_forwards`."""
        if not self._lock.acquire(blocking=False):  # another thread holds the conversation
            return generate(model, [ids], settings, **kwargs)
        try:
            return self._generate(model, list(ids), settings or DecodeSettings(), kwargs)
        finally:
            self._lock.release()

    def _generate(self, model: Any, ids: list[int], s: DecodeSettings, kwargs: dict) -> GenerateResult:
        b = s.block_size or model.config.block_size
        whole = len(ids) // b * b  # the prompt's committed part; its tail goes to the first block
        cache, start = self._resume(model, ids, whole)
        self._ids = ids[:whole]  # kept snapshots agree with it up to their pos (<= start)
        t0, f0 = time.perf_counter(), model.forward_count
        mark = (len(ids) - self.margin) // b * b
        if start < mark < whole:  # the end of the prefill is near the prompt's end: split it
            dev = model.device
            model.prefill(torch.tensor([ids[start:mark]], dtype=torch.long, device=dev), cache)
            self._add(cache.snapshot())
        piece_s, piece_f = time.perf_counter() - t0, model.forward_count - f0
        piece_tokens = cache.pos - start
        result = generate(model, [ids], s, cache=cache, **kwargs)
        if result.prompt_snapshot is not None:
            self._add(result.prompt_snapshot)
        st = result.stats
        st["cached_prompt_tokens"] = float(start)
        st["prefill_tokens"] = st.get("prefill_tokens", 0.0) + piece_tokens
        st["prefill_forwards"] = st.get("prefill_forwards", 0.0) + piece_f
        st["prefill_seconds"] = st.get("prefill_seconds", 0.0) + piece_s
        st["seconds"] = st.get("seconds", 0.0) + piece_s
        return result

    def _resume(self, model: Any, ids: list[int], whole: int) -> tuple[CloverCache, int]:
        """The cache restored to the longest snapshot the prompt can use (pos <= the tokens it
        shares and <= its whole blocks), or a fresh cache."""
        if model is self._model and self._cache is not None:
            limit = min(common_prefix(self._ids, ids), whole)
            usable = [snap for snap in self._snaps if snap.pos <= limit]
            if usable:
                self._cache.restore(usable[-1])
                self._snaps = usable  # the later ones' K/V columns are about to be overwritten
                return self._cache, usable[-1].pos
        self.clear()
        self._model, self._cache = model, model.new_cache(1)
        return self._cache, 0

    def _add(self, snap: CacheSnapshot) -> None:
        if snap.pos == 0:
            return
        # The conv tail is a view into the whole prefill's conv input: copy the few columns so the
        # snapshot does not keep that buffer alive.
        gdn = [None if g is None else (g[0], g[1].clone()) for g in snap.gdn]
        snap = CacheSnapshot(snap.pos, snap.next_logits, gdn)
        self._snaps = [s for s in self._snaps if s.pos < snap.pos] + [snap]
        del self._snaps[: -self.keep]


__all__ = ["PrefixCache", "common_prefix"]
