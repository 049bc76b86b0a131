"""Block-diffusion decoding on top of CloverForCausalLM (generation lives apart from the network).

Prompt rule: blocks are aligned to absolute positions (multiples of B). The prompt's whole blocks are
committed by `prefill`; its tail (len % B tokens) sits as fixed tokens at the start of the first
generated block. A batch is left-padded so every prompt's whole blocks end on the same column
(padding is a multiple of B, so each sequence keeps its own absolute alignment).

Each block starts as mask tokens (plus fixed tokens) and is denoised in rounds: every round predicts
all still-masked positions and the policy accepts some of them. A finished block is committed in
the same forward as the next block's first round (commit fusion). With B = 1 and greedy decoding
this is exactly autoregressive greedy decoding.

A `constraint` (e.g. a tool-call grammar) sees the block after it is built and after every round;
it may place tokens on open masked positions, re-mask open positions it did not get as fixed
tokens, hold positions back for the round (`frozen`) and ban tokens per position. Its placements
cost no forward.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import torch
from torch import Tensor

from clover.model.cache import CacheSnapshot, CloverCache
from clover.model.config import DECODE_ORDERS
from clover.model.drafts import DraftIndex
from clover.model.modeling import CloverForCausalLM
from clover.model.repetition import RepetitionStop, first_runaway
from clover.model.verify import needs_draft, speculate, verified_round, windows

POLICIES = ("threshold", "margin", "entropy", "fixed-k")
ORDERS = DECODE_ORDERS


@dataclass
class DecodeSettings:
    block_size: int | None = None  # None: the model config's block_size
    policy: str = "threshold"
    # threshold: accept confidence >= threshold; margin: top1 - top2 >= threshold;
    # entropy: entropy <= threshold. Each round accepts at least the single best position.
    threshold: float = 0.9
    k: int = 1  # fixed-k: positions accepted per round
    # any: accept every masked position that passes, wherever it is in the block; left: only the
    # run of passing positions from the leftmost masked one (a token is kept only when every
    # token before it is known or kept with it), so a confident guess far right, made while its
    # left context was still masked, cannot be committed early.
    order: str | None = None  # None: the model config's decode_order
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 512
    stop_token_ids: Sequence[int] | None = None  # None: the config's eos_token_ids
    seed: int | None = None
    commit_last: bool = False  # also commit the final block (keeps the cache complete)
    repetition: RepetitionStop | None = RepetitionStop()  # runaway n-gram -> finish "repetition"; None: off
    # > 0: drafts from the prompt (model/drafts.py): a run of masked positions whose predictions
    # match what followed the last `draft_ngram` tokens in the prompt is accepted at once
    draft_ngram: int = 0
    # verify: each round's checking forward also denoises a guess of the next round's block
    # (model/verify.py `speculate`), so a round after a block's first costs one forward, not two
    fused_rounds: bool = False

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy {self.policy!r}; expected one of {', '.join(POLICIES)}")
        if self.order is not None and self.order not in ORDERS:
            raise ValueError(f"unknown order {self.order!r}; expected one of {', '.join(ORDERS)}")
        if self.block_size is not None and self.block_size < 1:
            raise ValueError("block_size must be >= 1")
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.k < 1 or self.draft_ngram < 0:
            raise ValueError("need temperature >= 0, 0 < top_p <= 1, k >= 1, draft_ngram >= 0")


@dataclass
class RoundEvent:
    block: int  # index of the generated block (0 = first)
    round: int  # denoising round within the block (0-based)
    tokens: list[list[int | None]]  # per sequence: the block's generated positions, None = masked


class BlockConstraint(Protocol):
    """constraint(block_index, block [N, B], open_ [N, B], fixed [N, B]) -> (block, frozen [N, B] |
    None, ban [N, B, V] | None[, bias [N, B, V] | None]). `open_`: generated positions; `fixed`:
    those given by the caller's `fixed`; `bias`, when returned: added to the round's logits (a
    prior, not a ban). `verify_rows(i, row, open_row, f, e)`: the (ban, bias) rows a verified round
    steers by along a draft (model/verify.py); None for a constraint that gives none."""

    verify_rows: Callable[[int, list[int], list[bool], int, int], list[tuple[Any, Any]]] | None

    def __call__(self, blk: int, block: Tensor, open_: Tensor, fixed: Tensor) -> tuple[Tensor, ...]: ...


@dataclass
class GenerateResult:
    tokens: list[list[int]]  # per sequence, up to and including the stop token
    finish_reasons: list[str]  # "stop", "length" or "repetition"
    stats: dict[str, float] = field(default_factory=dict)
    cache: CloverCache | None = None  # complete up to the last block when settings.commit_last
    prompt_snapshot: CacheSnapshot | None = None  # the cache right after the prompt's prefill


# ---------------------------------------------------------------------- sampling and policies


def _filter(logits: Tensor, top_k: int, top_p: float) -> Tensor:
    if top_k > 0:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)
        drop = cum - sorted_logits.softmax(-1) >= top_p  # keep the smallest prefix reaching top_p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return logits


def propose(logits: Tensor, s: DecodeSettings, gen: torch.Generator | None) -> tuple[Tensor, Tensor]:
    """logits [..., V] (already masked) -> (token, score); a higher score means more certain.

    Scores are read off the model's own distribution softmax(logits), whatever the sampling
    temperature / top-k / top-p, so thresholds mean the same thing in every sampling mode."""
    probs = logits.float().softmax(-1)
    if s.temperature > 0:
        sample = _filter(logits.float() / s.temperature, s.top_k, s.top_p).softmax(-1)
        tok = torch.multinomial(sample.reshape(-1, sample.shape[-1]), 1, generator=gen).view(probs.shape[:-1])
    else:
        tok = probs.argmax(-1)
    if s.policy == "margin":
        top2 = probs.topk(2, dim=-1).values
        score = top2[..., 0] - top2[..., 1]
    elif s.policy == "entropy":
        score = (probs * probs.clamp_min(1e-30).log()).sum(-1)  # = -entropy
    else:
        score = probs.gather(-1, tok[..., None])[..., 0]
    return tok, score


def select(
    score: Tensor, masked: Tensor, s: DecodeSettings, held: Tensor | None = None, agree: Tensor | None = None
) -> Tensor:
    """Which masked positions to accept this round [N, B]; at least one per sequence with masks.
    `held`: masked positions that may not be accepted this round (they end a left-order run).
    `agree`: masked positions whose prediction matches the context's draft; the run of them from
    the leftmost masked position is accepted whatever its scores (model/drafts.py)."""
    score = score.masked_fill(~masked, float("-inf"))
    if s.policy == "fixed-k":
        k = min(s.k, score.shape[-1])
        accept = torch.zeros_like(masked).scatter(-1, score.topk(k, dim=-1).indices, True)
    else:
        thr = -s.threshold if s.policy == "entropy" else s.threshold
        accept = score >= thr
    if agree is not None:  # a draft's run ends at the first unknown position that disagrees
        unknown = masked | held if held is not None else masked
        agree = agree & masked
        accept = accept | (agree & ((unknown & ~agree).int().cumsum(-1) == 0))
    if s.order == "left":
        first = torch.zeros_like(masked).scatter(-1, masked.int().argmax(-1, keepdim=True), True) & masked
        accept = accept & masked
        unknown = masked | held if held is not None else masked
        breaks = unknown & ~accept  # the first still-unknown position ends the run
        return (accept & (breaks.int().cumsum(-1) == 0)) | first  # a forced first one ends it too
    best = torch.zeros_like(masked).scatter(-1, _leftmost_best(score), True)
    return (accept | best) & masked


# Scores closer than this (relative) are a tie. A batch runs other matmul kernels than one sequence,
# so scores differ in their last bits; on a nearly flat distribution two positions' entropies can
# be equal up to that noise, and a plain argmax then picked a different position in a batch.
TIE = 1e-5


def _leftmost_best(score: Tensor) -> Tensor:
    """[N, 1]: per row, the leftmost position whose score ties the best (within TIE)."""
    top = score.max(-1, keepdim=True).values
    near = score >= top - TIE * (1 + top.abs())
    return near.int().argmax(-1, keepdim=True)  # argmax returns the first of equal values


# ---------------------------------------------------------------------- the decoder


@torch.no_grad()
def generate(
    model: CloverForCausalLM,
    prompts: Sequence[Sequence[int]],
    settings: DecodeSettings | None = None,
    *,
    fixed: Sequence[dict[int, int]] | None = None,
    allowed: Sequence[dict[int, Sequence[int]]] | None = None,
    on_round: Callable[[RoundEvent], None] | None = None,
    constraint: BlockConstraint | None = None,
    cache: CloverCache | None = None,
) -> GenerateResult:
    """Decode a batch of prompts. `fixed[i]` maps a generated-token offset of sequence i to a forced
    token; `allowed[i]` maps an offset to the only token ids allowed there; `constraint` steers
    each block as it is denoised; `cache` (one prompt only) already holds the prompt's first
    `cache.pos` tokens (see the module docstring)."""
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("every prompt needs at least one token")
    run = _Run(model, prompts, settings or DecodeSettings(), fixed, allowed, on_round, constraint)
    run.prefill(cache)
    while not all(run.done):
        run.block()
    return run.result()


class _Run:
    """One call of `generate`: the prompts' prefill, then block after block until every sequence
    is done. A block's rounds go one of two ways: the threshold family (accept what the policy
    accepts; with n-gram drafts, also what the prompt's draft agrees with) or verify (a greedy
    draft checked causally, model/verify.py)."""

    def __init__(self, model, prompts, s, fixed, allowed, on_round, constraint) -> None:
        cfg = model.config
        self.model, self.prompts, self.cfg = model, prompts, cfg
        self.n, self.b, self.mask_id = len(prompts), s.block_size or cfg.block_size, cfg.mask_token_id
        if s.order is None:
            s = replace(s, order=cfg.decode_order)
        # verify is greedy; with sampling its rounds keep tokens as left does
        self.verify = s.order == "verify" and s.temperature == 0 and self.b > 1
        if s.order == "verify" and not self.verify:
            s = replace(s, order="left")
        self.s, self.fixed, self.allowed, self.on_round, self.constraint = (
            s,
            fixed,
            allowed,
            on_round,
            constraint,
        )
        self.dev = model.device
        stops = set(cfg.eos_token_ids if s.stop_token_ids is None else s.stop_token_ids)
        self.stop_ids = torch.tensor(sorted(stops), dtype=torch.long, device=self.dev)
        self.gen = torch.Generator(device=self.dev).manual_seed(s.seed) if s.seed is not None else None
        self.filler = cfg.pad_token_id if cfg.pad_token_id is not None else 0
        self.out: list[list[int]] = [[] for _ in range(self.n)]
        self.reasons = ["length"] * self.n
        self.done = [False] * self.n  # stopped or out of budget
        self.pending: list[Tensor] = []  # finished blocks not yet committed
        self.drafts = (
            [DraftIndex(p, s.draft_ngram) for p in prompts]
            if s.draft_ngram and self.b > 1 and not self.verify
            else None
        )
        self.rows_for = constraint.verify_rows if self.verify and constraint is not None else None
        self.drafted = 0  # tokens accepted on a draft's agreement below the threshold
        self.rounds_per_block: list[int] = []
        self.blk = 0

    # ------------------------------------------------------------------ the prompt

    def prefill(self, cache: CloverCache | None) -> None:
        """The prompts' whole blocks into the cache (tails go to the first block)."""
        model, b, n, dev = self.model, self.b, self.n, self.dev
        self.t0 = time.perf_counter()
        self.whole = [len(p) // b for p in self.prompts]
        kmax = max(self.whole)
        pad = torch.tensor([b * (kmax - w) for w in self.whole], device=dev)
        prefix = torch.full((n, b * kmax), self.filler, dtype=torch.long, device=dev)
        for i, p in enumerate(self.prompts):
            prefix[i, int(pad[i]) :] = torch.tensor(
                list(p[: self.whole[i] * b]), dtype=torch.long, device=dev
            )
        self.tails = [list(p[self.whole[i] * b :]) for i, p in enumerate(self.prompts)]
        prefill_forwards0, self.cached = model.forward_count, 0  # cached: prompt tokens already in `cache`
        if cache is None:
            cache = model.new_cache(n)
            model.prefill(prefix, cache, pad=pad)
        else:
            if n != 1 or cache.batch_size != 1 or cache.has_padding:
                raise ValueError("a given cache needs exactly one prompt (batch size 1, no padding)")
            self.cached = cache.pos
            if self.cached > prefix.shape[1]:
                raise ValueError(
                    f"the cache holds {self.cached} tokens, more than the prompt's {prefix.shape[1]} in whole blocks"
                )
            model.prefill(prefix[:, self.cached :], cache)
        self.cache, self.prompt_snapshot = cache, cache.snapshot()
        self.t_prefill = time.perf_counter() - self.t0
        self.forwards0 = model.forward_count
        self.prefill_forwards = self.forwards0 - prefill_forwards0

    # ------------------------------------------------------------------ one block

    def block(self) -> None:
        """Build the next block, denoise it round by round, keep its output, queue its commit."""
        s, b, mask_id = self.s, self.b, self.mask_id
        block, open_, ban = _new_block(
            self.blk,
            b,
            self.tails,
            self.out,
            self.done,
            s,
            self.fixed,
            self.allowed,
            mask_id,
            self.filler,
            self.cfg.vocab_size,
            self.dev,
        )
        steer = _Steering(open_ & (block != mask_id))  # the caller's fixed tokens
        block = self._steered(block, open_, steer)
        block, stop_at = _fill_after_stop(block, open_, self.stop_ids, mask_id)
        rnd = 0
        guess: Tensor | None = (
            None  # verify, fused rounds: this round's logits, from the last round's forward
        )
        while (block == mask_id).any():
            masked = block == mask_id
            if self.verify:
                accept, tok, guess = self._verify_round(block, masked, open_, ban, steer, rnd, guess)
            else:
                accept, tok = self._threshold_round(block, masked, open_, ban, steer, rnd)
            block = torch.where(accept, tok, block)
            block = self._steered(block, open_, steer)
            block, stop_at = _fill_after_stop(block, open_, self.stop_ids, mask_id)
            if self.on_round is not None:
                shown = open_ & (torch.arange(b, device=self.dev)[None, :] <= stop_at[:, None])
                self.on_round(RoundEvent(self.blk, rnd, _visible(block, shown, mask_id)))
            rnd += 1
        self.rounds_per_block.append(rnd)
        self._keep(block, open_, stop_at)
        self.pending.append(block)
        self.blk += 1

    def _steered(self, block: Tensor, open_: Tensor, steer: _Steering) -> Tensor:
        if self.constraint is None:
            return block
        block, steer.frozen, steer.ban, steer.bias = _steer(
            self.constraint(self.blk, block, open_, steer.given)
        )
        return block

    def _logits(self, block: Tensor, masked: Tensor, rnd: int) -> Tensor:
        """A round's logits: the first round of a block also commits the blocks before it."""
        if rnd == 0 and self.pending:  # only the masked positions' logits are read
            logits = self.model.commit_and_denoise(
                torch.cat(self.pending, dim=1), block, self.cache, need=masked
            )
            self.pending = []
            return logits
        return self.model.denoise(block, self.cache, need=masked)

    def _proposed(self, logits: Tensor, banned: Tensor, steer: _Steering) -> tuple[Tensor, Tensor]:
        steered = logits.masked_fill(banned, float("-inf"))
        return propose(
            steered if steer.bias is None else steered + steer.bias.to(steered.dtype), self.s, self.gen
        )

    def _threshold_round(self, block, masked, open_, ban, steer, rnd) -> tuple[Tensor, Tensor]:
        logits = self._logits(block, masked, rnd)
        banned = ban if steer.ban is None else ban | steer.ban
        tok, score = self._proposed(logits, banned, steer)
        choosable = masked if steer.frozen is None else masked & ~steer.frozen
        accept = select(score, choosable, self.s, steer.frozen)
        if self.drafts is not None:
            plain = accept
            agree = _agreement(self.drafts, self.out, block, open_, masked, tok)
            accept = select(score, choosable, self.s, steer.frozen, agree)
            self.drafted += int((accept & ~plain).sum())
        return accept, tok

    def _verify_round(self, block, masked, open_, ban, steer, rnd, guess):
        # without a grammar's rows a constraint's rules are known at the frontier only
        spans = windows(masked, None if self.rows_for is not None else steer.frozen)
        if self.constraint is not None and self.rows_for is None:
            spans = [None if sp is None else (sp[0], sp[0] + 1) for sp in spans]
        logits = None
        if not needs_draft(masked, spans):  # a lone frontier: one causal step
            if rnd == 0 and self.pending:
                self.model.commit(torch.cat(self.pending, dim=1), self.cache)
                self.pending = []
        elif guess is not None:  # denoised in the last round's checking forward
            logits = guess
        else:
            logits = self._logits(block, masked, rnd)
        banned = ban if steer.ban is None else ban | steer.ban
        draft = spec = given = None
        if logits is not None:
            draft, score = self._proposed(logits, banned, steer)
            if self.s.fused_rounds:
                spec, given = speculate(block, masked, draft, score, spans)
        accept, tok, nxt = verified_round(
            self.model,
            self.cache,
            block,
            masked,
            spans,
            draft,
            banned,
            steer.bias,
            _rows(self.rows_for, open_),
            ban,
            spec=spec,
        )
        # kept only when the check kept every guessed token: a guess made after a token the check
        # rejected drafts worse than a fresh round
        keep_guess = spec is not None and not (given & ~(accept & (tok == draft))).any()
        return accept, tok, nxt if keep_guess else None

    def _keep(self, block: Tensor, open_: Tensor, stop_at: Tensor) -> None:
        """The block's output positions up to a stop join each sequence; a loop ends it."""
        keep = open_ & (torch.arange(self.b, device=self.dev)[None, :] <= stop_at[:, None])
        for i in range(self.n):
            if self.done[i]:
                continue
            before = len(self.out[i])
            self.out[i].extend(block[i][keep[i]].tolist())
            looped = first_runaway(self.out[i], before, self.s.repetition)
            if looped is not None:  # what followed the loop inside this block is dropped with it
                del self.out[i][looped:]
                self.done[i], self.reasons[i] = True, "repetition"
            elif int(stop_at[i]) < self.b:
                self.done[i], self.reasons[i] = True, "stop"
            elif len(self.out[i]) >= self.s.max_new_tokens:
                self.done[i] = True

    # ------------------------------------------------------------------ the end

    def result(self) -> GenerateResult:
        if self.s.commit_last and self.pending:
            self.model.commit(torch.cat(self.pending, dim=1), self.cache)
        seconds = time.perf_counter() - self.t0
        forwards = self.model.forward_count - self.forwards0
        n_tokens = sum(len(o) for o in self.out)
        decode_s = max(seconds - self.t_prefill, 1e-9)
        stats = {
            "forwards": float(forwards),
            "tokens": float(n_tokens),
            "tokens_per_forward": n_tokens / max(forwards, 1) / self.n,  # per sequence
            "rounds_per_block": sum(self.rounds_per_block) / max(len(self.rounds_per_block), 1),
            "blocks": float(len(self.rounds_per_block)),
            "tok_per_s": n_tokens / decode_s,
            "prefill_seconds": self.t_prefill,
            "seconds": seconds,
            "prompt_tokens": float(sum(len(p) for p in self.prompts)),
            "prefill_tokens": float(sum(w * self.b for w in self.whole) - self.cached),  # run now
            "cached_prompt_tokens": float(self.cached),  # taken from the given cache
            "prefill_forwards": float(self.prefill_forwards),
            "drafted_tokens": float(self.drafted),
        }
        return GenerateResult(self.out, self.reasons, stats, self.cache, self.prompt_snapshot)


@dataclass
class _Steering:
    """What the constraint said about the block last: positions held back this round (`frozen`),
    tokens banned per position, a logit bias; `given`: the caller's fixed tokens."""

    given: Tensor
    frozen: Tensor | None = None
    ban: Tensor | None = None
    bias: Tensor | None = None


def _agreement(
    drafts: list[DraftIndex], out: list[list[int]], block: Tensor, open_: Tensor, masked: Tensor, tok: Tensor
) -> Tensor:
    """[N, B]: masked positions whose prediction equals the prompt's draft for them. The draft
    continues the output from its leftmost masked position (everything left of it is known)."""
    draft = torch.full_like(block, -1)
    rows, opens, masks = block.tolist(), open_.tolist(), masked.tolist()
    for i, index in enumerate(drafts):
        if True not in masks[i]:
            continue
        f = masks[i].index(True)
        recent = out[i][-index.n :] + [t for t, o in zip(rows[i][:f], opens[i][:f], strict=True) if o]
        guess = index.draft(recent, len(rows[i]) - f)
        if guess:
            draft[i, f : f + len(guess)] = torch.tensor(guess, dtype=block.dtype, device=block.device)
    return (tok == draft) & masked


def _rows(rows_for: Callable | None, open_: Tensor) -> Callable | None:
    """A grammar's per-position rows for a verified round, with the block's output positions."""
    if rows_for is None:
        return None
    opens = open_.tolist()
    return lambda i, row, f, e: rows_for(i, row, opens[i], f, e)


def _steer(res: tuple[Tensor, ...]) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor | None]:
    """A constraint's answer with its optional logit bias (None when it gave none)."""
    return (res[0], res[1], res[2], res[3] if len(res) > 3 else None)


def _new_block(blk, b, tails, out, done, s, fixed, allowed, mask_id, filler, vocab, dev):
    """A fresh block: tokens (mask, prompt tail, forced or filler tokens), which positions are
    generated output (`open_`), and the tokens banned at each position (always the mask id)."""
    n = len(tails)
    tokens = [[mask_id] * b for _ in range(n)]
    open_ = [[True] * b for _ in range(n)]
    ban = torch.zeros(n, b, vocab, dtype=torch.bool, device=dev)
    for i in range(n):
        for j in range(b):
            o = blk * b + j - len(tails[i])  # generated-token offset of this position
            if o < 0:  # the prompt's tail
                tokens[i][j], open_[i][j] = tails[i][blk * b + j], False
            elif done[i] or o >= s.max_new_tokens:  # past the end: filler, not output
                tokens[i][j], open_[i][j] = (out[i][-1] if out[i] else filler), False
            elif fixed is not None and o in fixed[i]:
                tokens[i][j] = fixed[i][o]
            elif allowed is not None and o in allowed[i]:
                ban[i, j] = True
                ban[i, j, list(allowed[i][o])] = False
    ban[..., mask_id] = True
    block = torch.tensor(tokens, dtype=torch.long, device=dev)
    return block, torch.tensor(open_, dtype=torch.bool, device=dev), ban


def _fill_after_stop(block: Tensor, open_: Tensor, stop_ids: Tensor, mask_id: int) -> tuple[Tensor, Tensor]:
    """Find each row's first stop token among its output positions; fill the masks after it with
    that token (the block then finishes). Returns the block and the stop position (B: none)."""
    b = block.shape[1]
    hit = torch.isin(block, stop_ids) & open_
    stop_at = torch.where(hit.any(-1), hit.int().argmax(-1), b)
    after = torch.arange(b, device=block.device)[None, :] > stop_at[:, None]
    stop_tok = block.gather(1, stop_at.clamp(max=b - 1)[:, None])
    return torch.where(after & (block == mask_id), stop_tok, block), stop_at


def _visible(block: Tensor, show: Tensor, mask_id: int) -> list[list[int | None]]:
    return [
        [None if t == mask_id else t for t in row[keep].tolist()]
        for row, keep in zip(block, show, strict=True)
    ]
