"""Clover: a hybrid Gated-DeltaNet / gated-attention MoE language model with block diffusion.

Names follow Qwen3.5 checkpoints (`model.embed_tokens`, `model.layers.N.linear_attn.*` or
`.self_attn.*`, `.mlp.*`, `.input_layernorm`, `.post_attention_layernorm`, `model.norm`, `lm_head`).

Two conventions hold everywhere:
- Shifted prediction: the logits for token i come from the hidden state at i-1, as in the
  autoregressive base. A block's first position reads them from the committed prefix
  (`cache.next_logits`); the others from the block's own positions. Block size 1 is therefore
  plain autoregressive decoding, and an AR Qwen3.5 checkpoint runs unchanged.
- Causal prefix: committed tokens are processed causally (attention and delta rule), exactly as in
  the AR base; only the block being denoised is bidirectional. So the committed cache does not
  depend on the block size.

Entry points: `forward` (plain causal logits), `forward_train` (BD3-LM x_t ⊕ x_0), and for the
decoder `prefill`, `denoise`, `commit`, `commit_and_denoise` on a `CloverCache`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from clover.model.cache import CloverCache
from clover.model.config import FULL_ATTENTION, CloverConfig
from clover.model.layers.attention import GatedAttention, build_masks
from clover.model.layers.context import ForwardContext
from clover.model.layers.gdn import GatedDeltaNet
from clover.model.layers.moe import SparseMoE
from clover.model.layers.norms import RMSNorm
from clover.model.layers.rope import RotaryEmbedding

DELTA_CHUNK = 64  # chunk of the delta rule when committing / prefilling
PREFILL_CHUNK = 2048  # tokens per prefill forward (bounds activation memory)


class DecoderLayer(nn.Module):
    def __init__(self, config: CloverConfig, layer_type: str) -> None:
        super().__init__()
        self.layer_type = layer_type
        if layer_type == FULL_ATTENTION:
            self.self_attn = GatedAttention(config)
        else:
            self.linear_attn = GatedDeltaNet(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = SparseMoE(config)

    @property
    def mixer(self) -> GatedAttention | GatedDeltaNet:
        return self.self_attn if self.layer_type == FULL_ATTENTION else self.linear_attn

    def forward(self, clean: Tensor | None, noisy: Tensor | None, ctx: ForwardContext, cache) -> tuple:
        norm = self.input_layernorm
        a_clean, a_noisy = self.mixer(
            norm(clean) if clean is not None else None, norm(noisy) if noisy is not None else None, ctx, cache
        )
        clean = clean + a_clean if clean is not None else None
        noisy = noisy + a_noisy if noisy is not None else None
        # the MoE is per token: run both streams through it together
        parts = [t for t in (clean, noisy) if t is not None]
        flat = torch.cat([t.reshape(-1, t.shape[-1]) for t in parts])
        flat = flat + self.mlp(self.post_attention_layernorm(flat))
        outs = iter(flat.split([t.numel() // t.shape[-1] for t in parts]))
        clean = next(outs).view(clean.shape) if clean is not None else None
        noisy = next(outs).view(noisy.shape) if noisy is not None else None
        return clean, noisy


class CloverModel(nn.Module):
    def __init__(self, config: CloverConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, t) for t in config.layer_types)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(config.rotary_dim, config.rope_theta)


def _shifted(h: Tensor) -> Tensor:
    """h [N, T, D] moved one place right (row i holds h[:, i - 1], row 0 zeros): the state that predicts token i."""
    return torch.cat([torch.zeros_like(h[:, :1]), h[:, :-1]], dim=1)


class CloverForCausalLM(nn.Module):
    def __init__(self, config: CloverConfig) -> None:
        super().__init__()
        self.config = config
        self.model = CloverModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.apply(self._init_weights)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.forward_count = 0  # network forwards run, for the decoder's counters

    def _init_weights(self, m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=self.config.initializer_range)

    @property
    def device(self) -> torch.device:
        """Where the logits come out (lm_head's device; the last one of a model split over several)."""
        return self.model.norm.weight.device

    @property
    def dtype(self) -> torch.dtype:
        """The activations' dtype (the embedding's), also of a model whose matrices are quantized."""
        return self.model.embed_tokens.weight.dtype

    def new_cache(self, batch_size: int = 1) -> CloverCache:
        return CloverCache(self, batch_size)

    # ------------------------------------------------------------------ the one network pass

    def _run(
        self,
        clean_ids: Tensor | None,
        noisy_ids: Tensor | None,
        cache: CloverCache | None,
        *,
        commit: bool,
        noisy_offset: int = 0,
        chunk_size: int = DELTA_CHUNK,
    ) -> tuple[Tensor | None, Tensor | None]:
        """clean_ids [N, Tc]; noisy_ids [N, nb, B]. Returns final-normed hidden states per stream."""
        self.forward_count += 1
        ref = clean_ids if clean_ids is not None else noisy_ids
        dev = ref.device
        past = cache.pos if cache is not None else 0
        tc = clean_ids.shape[1] if clean_ids is not None else 0
        nb, b = noisy_ids.shape[1:] if noisy_ids is not None else (0, 1)
        pad = cache.pad[:, None] if cache is not None else torch.zeros(1, 1, dtype=torch.long, device=dev)
        key_valid = cache.key_valid(past + tc) if cache is not None else None
        clean_mask, noisy_mask = build_masks(past, tc, noisy_offset, nb, b, key_valid, dev)
        rope = self.model.rotary_emb
        ctx = ForwardContext(
            past=past,
            clean_len=tc,
            noisy_offset=noisy_offset,
            commit=commit,
            chunk_size=chunk_size,
            clean_mask=clean_mask,
            noisy_mask=noisy_mask,
            clean_valid=key_valid[:, past:] if key_valid is not None else None,
        )
        if tc:
            ctx.clean_rope = rope((past + torch.arange(tc, device=dev) - pad).clamp(min=0))
        if nb:
            ctx.noisy_rope = rope((past + noisy_offset + torch.arange(nb * b, device=dev) - pad).clamp(min=0))

        embed = self.model.embed_tokens
        clean = embed(clean_ids) if clean_ids is not None else None
        noisy = embed(noisy_ids) if noisy_ids is not None else None
        for i, layer in enumerate(self.model.layers):
            clean, noisy = layer(clean, noisy, ctx, cache.layers[i] if cache is not None else None)
        if commit and cache is not None:
            cache.pos += tc
        norm = self.model.norm
        return (norm(clean) if clean is not None else None), (norm(noisy) if noisy is not None else None)

    # ------------------------------------------------------------------ training / scoring

    def forward(self, input_ids: Tensor) -> Tensor:
        """Plain causal forward: logits [N, T, V]; logits[:, t] predicts token t+1."""
        h, _ = self._run(input_ids, None, None, commit=False)
        return self.lm_head(h)

    def forward_train(
        self, x_t: Tensor, x_0: Tensor, block_size: int, select: Tensor | None = None, causal: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Block-diffusion training forward (BD3-LM x_t ⊕ x_0). x_t, x_0 [N, T], T a multiple of
        block_size. Returns logits [N, T, V] where logits[:, i] predicts x_0[:, i] (row 0 is zeros:
        nothing precedes it). A block's first row comes from the clean stream (the committed
        prefix), the others from the noisy block itself, matching `denoise` exactly; at block_size 1
        every row comes from the clean stream, so the noisy one is not run.
        `select` (bool [N, T]): only those rows, logits [K, V], with lm_head run on them alone (in
        training most rows are context, and lm_head is a third of the FLOPs).
        `causal` (with `select`): also the clean stream's logits at the same rows, detached: what the
        causal (B = 1) path predicts there from the clean tokens before, at no extra pass."""
        n, t = x_0.shape
        if t % block_size:
            raise ValueError(f"sequence length {t} is not a multiple of block_size {block_size}")
        if block_size == 1:
            clean, _ = self._run(x_0, None, None, commit=False)
            src = _shifted(clean)
        else:
            clean, noisy = self._run(
                x_0, x_t.view(n, t // block_size, block_size), None, commit=False, chunk_size=block_size
            )
            noisy = noisy.reshape(n, t, -1)
            src = _shifted(noisy)
            starts = torch.arange(block_size, t, block_size, device=x_0.device)
            src[:, starts] = clean[:, starts - 1]
        if select is not None:
            if causal:
                prev = _shifted(clean)[select].detach()
                with torch.no_grad():
                    teacher = self.lm_head(prev)
                return self.lm_head(src[select]), teacher
            return self.lm_head(src[select])
        if causal:
            raise ValueError("forward_train(causal=True) needs `select`")
        logits = self.lm_head(src)
        logits[:, 0] = 0
        return logits

    # ------------------------------------------------------------------ inference on a cache

    def _block_logits(
        self, noisy_h: Tensor | None, cache: CloverCache, n: int, b: int, need: Tensor | None = None
    ) -> Tensor:
        """Logits [N, B, V] of a block's positions. `need` [N, B] (bool): only those positions'
        rows are computed, the others are zeros (a denoising round reads only its masked
        positions; lm_head is about a third of a round's work)."""
        first = cache.next_logits
        if first is None:  # nothing committed: position 0 must be a fixed token
            first = torch.zeros(n, self.config.vocab_size, device=self.device)
        first = first[:, None].to(self.dtype)
        if b == 1:
            return first
        h = noisy_h[:, 0, :-1]
        if need is None:
            return torch.cat([first, self.lm_head(h)], dim=1)
        rows = need[:, 1:].to(h.device)
        rest = torch.zeros(n, b - 1, self.config.vocab_size, dtype=first.dtype, device=first.device)
        if rows.any():
            rest[rows] = self.lm_head(h[rows]).to(first.dtype)
        return torch.cat([first, rest], dim=1)

    @torch.no_grad()
    def prefill(self, ids: Tensor, cache: CloverCache, pad: Tensor | None = None) -> None:
        """Commit a prompt [N, T] (left-padded by `pad` [N] columns when batched), in chunks."""
        if pad is not None:
            if cache.pos:
                raise ValueError("padding can only be set on an empty cache")
            cache.pad = pad.to(cache.pad.device, torch.long)
        for start in range(0, ids.shape[1], PREFILL_CHUNK):
            self.commit(ids[:, start : start + PREFILL_CHUNK], cache)

    @torch.no_grad()
    def commit(self, block_ids: Tensor, cache: CloverCache) -> None:
        """Append finished tokens [N, T] to the cache (causal pass)."""
        if block_ids.shape[1] == 0:
            return
        h, _ = self._run(block_ids, None, cache, commit=True)
        cache.next_logits = self.lm_head(h[:, -1])

    @torch.no_grad()
    def peek(self, ids: Tensor, cache: CloverCache) -> Tensor:
        """Final hidden states [N, T, D] of a causal pass over `ids` after the cache, which is left
        as it was: the autoregressive reading of tokens not committed yet (a draft's check)."""
        h, _ = self._run(ids, None, cache, commit=False)
        return h

    @torch.no_grad()
    def peek_and_denoise(
        self, ids: Tensor, block_ids: Tensor, cache: CloverCache, need: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """`peek(ids)` and `denoise(block_ids)` in one forward, both starting right after the cache:
        (hidden [N, B, D], logits [N, B, V]). The noisy block sees the cache and itself, never
        `ids` (the training layout x_t ⊕ x_0 with one block), so each result equals its own pass.
        `ids` may be shorter than the block (a check reads up to its window's end)."""
        n, b = block_ids.shape
        if ids.shape[0] != n or not 0 < ids.shape[1] <= b or b < 2:
            raise ValueError("peek_and_denoise needs ids [N, T] and a block [N, B] with 0 < T <= B, B > 1")
        clean, noisy = self._run(ids, block_ids[:, None], cache, commit=False, noisy_offset=0, chunk_size=b)
        return clean, self._block_logits(noisy, cache, n, b, need)

    @torch.no_grad()
    def denoise(self, block_ids: Tensor, cache: CloverCache, need: Tensor | None = None) -> Tensor:
        """One denoising round for the block [N, B] after the cache; logits [N, B, V] (`need`: the
        positions whose logits are wanted, the others zeros). The cache is not changed."""
        n, b = block_ids.shape
        noisy = None
        if b > 1:  # with B = 1 the only prediction comes from the committed prefix
            _, noisy = self._run(None, block_ids[:, None], cache, commit=False)
        return self._block_logits(noisy, cache, n, b, need)

    @torch.no_grad()
    def commit_and_denoise(
        self, done_block: Tensor, next_block: Tensor, cache: CloverCache, need: Tensor | None = None
    ) -> Tensor:
        """Commit `done_block` and run the first round of `next_block` in one forward (commit fusion)."""
        n, b = next_block.shape
        if b == 1:
            self.commit(done_block, cache)
            return self._block_logits(None, cache, n, b)
        clean, noisy = self._run(
            done_block, next_block[:, None], cache, commit=True, noisy_offset=done_block.shape[1]
        )
        cache.next_logits = self.lm_head(clean[:, -1])
        return self._block_logits(noisy, cache, n, b, need)
