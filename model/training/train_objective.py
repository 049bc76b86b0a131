"""The block-diffusion training objective (BD3-LM's x_t ⊕ x_0 layout): a step's block size, its
noised input, and its loss.

Per step: one block size B for the batch from BLOCK_SIZES (weighted toward 32 and 1); per block a
mask rate t ~ U(0, 1]; every target position of the block (assistant output, or code) is replaced
by `<|mask|>` with probability t; context positions stay clean, as prompt tokens do at inference.
The loss is the plain mean cross-entropy over the masked target positions. BD3-LM's 1/t weighting
makes the loss an ELBO, but with batches of one or two rows a block with small t and one masked
token would get a weight up to 1/t ~ 100: the mean is the lower-variance choice for a short run.
B = 1 is autoregressive: `forward_train` then takes each prediction from the clean stream, so the
plain causal `forward` gives the same logits at half the cost and is used instead.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from clover.model.modeling import CloverForCausalLM

BLOCK_SIZES = (1, 2, 4, 8, 16, 32)
BLOCK_WEIGHTS = (0.3, 0.04, 0.08, 0.12, 0.16, 0.3)


def step_generator(seed: int, step: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


def sample_block_size(
    gen: torch.Generator, seq_len: int, block_weights: tuple[float, ...] | list[float] = BLOCK_WEIGHTS
) -> int:
    sizes = [b for b in BLOCK_SIZES if seq_len % b == 0 and block_weights[BLOCK_SIZES.index(b)] > 0]
    weights = torch.tensor([block_weights[BLOCK_SIZES.index(b)] for b in sizes])
    return sizes[int(torch.multinomial(weights, 1, generator=gen))]


def add_noise(
    x0: torch.Tensor,
    target: torch.Tensor,
    block: int,
    mask_id: int,
    gen: torch.Generator,
    suffix_fraction: float = 0.0,
) -> torch.Tensor:
    """x_t: each target position masked with its block's rate t ~ U(0, 1].

    With `suffix_fraction` > 0, that share of the blocks is masked from a cut c ~ U{0..B-1} to the
    block's end instead: the pattern left-order decoding meets (the block's tokens left of the
    frontier known, all right of it masked). Random masks mostly show a masked token with known
    tokens on its right, which decoding never does; a model trained only on them is seldom sure of a
    token two places right of the frontier, so each round keeps few tokens."""
    n, length = x0.shape
    t = 1.0 - torch.rand(n, length // block, 1, generator=gen)  # (0, 1]
    t = t.expand(-1, -1, block).reshape(n, length)
    masked = torch.rand(n, length, generator=gen) < t
    if suffix_fraction > 0:  # drawn only when used: older runs' masks stay as they were
        blocks = length // block
        cut = torch.randint(0, block, (n, blocks, 1), generator=gen)
        suffix = (torch.arange(block).view(1, 1, block) >= cut).reshape(n, length)
        use = (
            (torch.rand(n, blocks, 1, generator=gen) < suffix_fraction)
            .expand(-1, -1, block)
            .reshape(n, length)
        )
        masked = torch.where(use, suffix, masked)
    masked &= target
    return torch.where(masked, torch.full_like(x0, mask_id), x0)


def diffusion_step_loss(
    model: CloverForCausalLM,
    x0: torch.Tensor,
    target: torch.Tensor,
    block: int,
    gen: torch.Generator,
    suffix_fraction: float = 0.0,
    distill: bool = False,
) -> tuple[torch.Tensor, int]:
    """(mean CE over the masked target positions, their count). Position 0 predicts nothing.

    `distill` (B > 1 only): the targets are the model's own causal argmax at those positions given
    the row's tokens before them (the same pass's clean stream, no gradient through it), so the
    denoiser learns to draft what the causal pass that verifies it would write, not the data where
    the two differ."""
    mask_id = model.config.mask_token_id
    if block == 1:  # autoregressive: every target position, inputs clean
        x_t, use = x0, target.clone()
    else:
        x_t = add_noise(x0, target, block, mask_id, gen, suffix_fraction)
        use = (x_t == mask_id) & target
    use[:, 0] = False
    count = int(use.sum())
    if count == 0:
        return sum(p.sum() for p in model.parameters()) * 0.0, 0
    if distill and block > 1:  # the clean stream of the same pass is the causal path
        logits, teacher = model.forward_train(x_t, x0, block, select=use, causal=True)
        return F.cross_entropy(logits.float(), teacher.argmax(-1)), count
    logits = model.forward_train(x_t, x0, block, select=use)
    return F.cross_entropy(logits.float(), x0[use]), count
