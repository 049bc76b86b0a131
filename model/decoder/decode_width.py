"""The default decode width (block size) for a big mixture-of-experts checkpoint. Torch-free.

A block decoder pays for its tokens per forward (TPF) with wider forwards. On a dense model a wider
forward costs little more where weight traffic bounds it (a GPU; a CPU at small widths). A MoE is
different: every token of the forward routes to its own top-k experts, so the experts read grow with
the width, E (1 - (1 - k/E)^W) distinct ones for W tokens routed independently (256 experts, top 8:
8 at W = 1, 31 at 4, 60 at 8, 163 at 32). For Clover-35B-A3B the experts are a third of a token's
weight bytes at W = 1 and most of them at W = 8, on a CPU and on a GPU alike (both read weights at
their memory bandwidth). A block decoder at width W beats B = 1 only where its TPF exceeds
traffic(W) / traffic(1), the break-even (docs/performance.md has the measured curve).

`choose_width` compares that break-even with the TPF a Clover decoder reaches at each width
(EXPECTED_TPF: the embedded model's verify decoding, benchmarks/verify.py; a checkpoint whose own
measured TPF is higher should set decode_block_size and be decoded with --block-size) and keeps the
best width, 1 where none pays. Small or dense-dominated checkpoints keep their own default.
"""

from __future__ import annotations

from dataclasses import dataclass

from clover.model.config import CloverConfig

# Tokens per forward of a Clover decoder in verify order at each block size, over B = 1's on the same
# turns: the embedded model on 20 held-out oracle turns (`python -m benchmarks.verify --count 4
# --block-size B --orders verify`: B = 1 1.15 tokens per forward with the grammar's placements; B = 2
# 1.03, 4 1.69, 8 2.18, 16 2.32, 32 2.50).
EXPECTED_TPF = {2: 1.03 / 1.15, 4: 1.69 / 1.15, 8: 2.18 / 1.15, 16: 2.32 / 1.15, 32: 2.50 / 1.15}
# A forward of W tokens over one token's on a CPU, measured at real width with the int8-dot int4 and
# bf16-dot kernels (docs/performance.md: 4 real-size layers extrapolated to 40, one core's CPU time,
# `python -m benchmarks.realsize --model DIR --full-layers 40 --threads 1 --clock cpu`): 160.3 /
# 207.8 / 284.3 / 555.8 ms at W = 1 / 2 / 4 / 8, the layers' routing touching 8 / 14 / 23 / 39
# experts (the 40-layer random checkpoint routes deeper tokens alike, 8 / 9 / 10 / 11, so its curve,
# 1.12 / 1.44 / 2.61x, is a lower bound). These are the break-even tokens per forward.
CPU_COST = {2: 207.8 / 160.3, 4: 284.3 / 160.3, 8: 555.8 / 160.3}
BIG_MOE_EXPERTS = 64  # fewer experts than this: routing barely widens the forward
BIG_MOE_PARAMS = 1_000_000_000
MARGIN = 1.1  # a width must beat B = 1 by this much on paper to be the default


@dataclass(frozen=True)
class WidthChoice:
    width: int
    reason: str


def experts_touched(config: CloverConfig, width: int) -> float:
    """Expected distinct experts per layer for `width` tokens routed independently."""
    e, k = config.num_experts, config.num_experts_per_tok
    return e * (1 - (1 - k / e) ** width)


def traffic_ratio(config: CloverConfig, width: int, expert_share: float | None = None) -> float:
    """Weight bytes of a forward of `width` tokens over those of one token: the break-even TPF of a
    bandwidth-bound device. `expert_share`: the routed experts' share of one token's bytes (None:
    from the parameter counts, every matrix at the same bytes per parameter)."""
    if expert_share is None:
        per_expert = 3 * config.hidden_size * config.moe_intermediate_size
        experts = config.num_hidden_layers * config.num_experts_per_tok * per_expert
        expert_share = experts / config.param_counts()["active"]
    k = config.num_experts_per_tok
    return (1 - expert_share) + expert_share * experts_touched(config, width) / k


def forward_cost(config: CloverConfig, width: int, device: object = "cpu", measured=None) -> float:
    """A forward of `width` tokens over one of a single token: `measured` (width -> ratio) where
    given, else CPU_COST on a CPU (measured at real size), else the weight-traffic ratio (a GPU's
    forwards at these widths are bound by reading the weights)."""
    if measured and width in measured:
        return float(measured[width])
    if str(device).startswith("cpu") and width in CPU_COST:
        return CPU_COST[width]
    return traffic_ratio(config, width)


def choose_width(config: CloverConfig, device: object = "cpu", measured=None) -> WidthChoice:
    """The decode width to use when the user did not choose one (see the module docstring): the
    width whose expected tokens per forward over its forward cost is best, 1 unless one beats B = 1
    by MARGIN. `measured`: forward costs over one token's, by width (a benchmark's own curve)."""
    own = config.default_block() if config.block_size > 1 else 1
    if config.num_experts < BIG_MOE_EXPERTS or config.param_counts()["total"] < BIG_MOE_PARAMS:
        return WidthChoice(own, "the checkpoint's own (not a big MoE)")
    best, gain = 1, 1.0
    for w, tpf in EXPECTED_TPF.items():
        if w <= own:
            g = tpf / forward_cost(config, w, device, measured)
            if g > gain:
                best, gain = w, g
    c4, c8 = forward_cost(config, 4, device, measured), forward_cost(config, 8, device, measured)
    if gain < MARGIN:
        return WidthChoice(
            1,
            f"big MoE: forwards of 4 / 8 tokens cost {c4:.2f}x / {c8:.2f}x one token's, against a "
            f"Clover decoder's {EXPECTED_TPF[4]:.2f}x / {EXPECTED_TPF[8]:.2f}x tokens per forward there",
        )
    cost = forward_cost(config, best, device, measured)
    return WidthChoice(
        best, f"big MoE: expected {gain:.2f}x B = 1 at width {best} (forward cost {cost:.2f}x)"
    )
