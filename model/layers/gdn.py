"""Gated DeltaNet (Qwen3.5 names) with Clover's block mode.

Clean stream: the ordinary causal gated delta rule (chunked), continuing the committed state.
Noisy blocks: memory readout of the committed state plus one softmax over the block (see
kernels/reference/block_gdn.py). The three block-mode parameters per value head are the
"additional learned GDN parameters"; an autoregressive Qwen checkpoint lacks them and keeps the
neutral defaults below (scale e^0 = 1, memory logit 0, calibration 1: memory weighs as much as the
whole block at equal scores, whatever B is).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from clover.kernels import cpu, dispatch
from clover.model.config import CloverConfig
from clover.model.layers.context import ForwardContext
from clover.model.layers.norms import GatedRMSNorm

TRAIN_CHUNK = 64  # delta-rule chunk of the clean stream in training


CPU_TOKENS = 8  # causal tokens per forward taken token by token on CPU (a verify check's width)


def cpu_step_ok(state: Tensor) -> bool:
    """Take the one-token CPU kernel? (CPU, no gradient, numba present)."""
    return state.device.type == "cpu" and not torch.is_grad_enabled() and cpu.available()


def l2norm(x: Tensor, eps: float = 1e-6) -> Tensor:
    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) + eps)


class GatedDeltaNet(nn.Module):
    def __init__(self, config: CloverConfig) -> None:
        super().__init__()
        h = config.hidden_size
        self.num_k_heads, self.num_v_heads = config.linear_num_key_heads, config.linear_num_value_heads
        self.dk, self.dv = config.linear_key_head_dim, config.linear_value_head_dim
        self.key_dim, self.value_dim = self.num_k_heads * self.dk, self.num_v_heads * self.dv
        self.conv_dim = 2 * self.key_dim + self.value_dim
        self.kernel = config.linear_conv_kernel_dim
        self.in_proj_qkv = nn.Linear(h, self.conv_dim, bias=False)
        self.in_proj_z = nn.Linear(h, self.value_dim, bias=False)
        self.in_proj_b = nn.Linear(h, self.num_v_heads, bias=False)
        self.in_proj_a = nn.Linear(h, self.num_v_heads, bias=False)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, self.kernel, groups=self.conv_dim, bias=False)
        self.A_log = nn.Parameter(torch.log(torch.empty(self.num_v_heads).uniform_(1, 16)))
        self.dt_bias = nn.Parameter(torch.ones(self.num_v_heads))
        self.block_logit_scale = nn.Parameter(torch.zeros(self.num_v_heads))
        self.memory_logit = nn.Parameter(torch.zeros(self.num_v_heads))
        self.block_size_calibration = nn.Parameter(torch.ones(self.num_v_heads))
        self.norm = GatedRMSNorm(self.dv, config.rms_norm_eps)
        self.out_proj = nn.Linear(self.value_dim, h, bias=False)

    # ---------------------------------------------------------------- pieces shared by both streams

    def _conv(self, u: Tensor) -> Tensor:
        """u [M, C, K-1+T] (tail then new inputs) -> silu(causal depthwise conv) [M, T, C]."""
        return F.silu(F.conv1d(u, self.conv1d.weight, groups=self.conv_dim)).transpose(1, 2)

    def _heads(self, qkv: Tensor, x: Tensor, valid: Tensor | None = None):
        """Post-conv qkv [M, T, C] and the layer input x [M, T, D] -> normalised q, k (value heads),
        v, gate z, log decay g, beta."""
        m, t, _ = qkv.shape
        q, k, v = qkv.split([self.key_dim, self.key_dim, self.value_dim], dim=-1)
        rep = self.num_v_heads // self.num_k_heads
        q = l2norm(q.reshape(m, t, self.num_k_heads, self.dk)).repeat_interleave(rep, dim=2)
        k = l2norm(k.reshape(m, t, self.num_k_heads, self.dk)).repeat_interleave(rep, dim=2)
        v = v.reshape(m, t, self.num_v_heads, self.dv)
        beta = torch.sigmoid(self.in_proj_b(x).float())
        g = -self.A_log.float().exp() * F.softplus(self.in_proj_a(x).float() + self.dt_bias.float())
        if valid is not None:  # padding neither decays nor writes the state
            beta, g = beta * valid[..., None], g * valid[..., None]
        return q, k, v, g, beta

    def _finish(self, o: Tensor, x: Tensor) -> Tensor:
        z = self.in_proj_z(x).view(*x.shape[:-1], self.num_v_heads, self.dv)
        return self.out_proj(self.norm(o, z).flatten(-2))

    # ---------------------------------------------------------------- forward

    def forward(
        self, clean: Tensor | None, noisy: Tensor | None, ctx: ForwardContext, cache: GDNCache | None
    ) -> tuple[Tensor | None, Tensor | None]:
        ref = clean if clean is not None else noisy
        n = ref.shape[0]
        if cache is not None:
            state, tail = cache.state, cache.conv
        else:
            state = torch.zeros(n, self.num_v_heads, self.dk, self.dv, device=ref.device)
            tail = ref.new_zeros(n, self.conv_dim, self.kernel - 1)

        # several tokens on the float32 kernel only where the model is no more precise than that
        few = clean is not None and (clean.shape[1] == 1 or clean.dtype in (torch.float32, torch.bfloat16))
        if (
            noisy is None
            and few
            and clean.shape[1] <= CPU_TOKENS
            and ctx.clean_valid is None
            and cpu_step_ok(state)
        ):
            return self._cpu_token(clean, ctx, cache, state, tail), None

        clean_out, starts, u, state0 = None, None, tail, state
        # one block at the clean stream's start (a check and a denoising round in one forward)
        # reads the state before the stream: no chunk states needed
        at_start = noisy is not None and ctx.noisy_offset == 0 and noisy.shape[1] == 1
        if clean is not None:
            pre = self.in_proj_qkv(clean)
            if ctx.clean_valid is not None:
                pre = pre * ctx.clean_valid[..., None].to(pre.dtype)
            u = torch.cat([tail, pre.transpose(1, 2)], dim=2)
            q, k, v, g, beta = self._heads(self._conv(u), clean, ctx.clean_valid)
            want_starts = noisy is not None and ctx.noisy_offset != ctx.clean_len and not at_start
            # Block starts come from one 64-token-chunk pass whatever the block size (B = 1 would
            # otherwise be a loop over every token).
            chunk, every = ctx.chunk_size, None
            if want_starts and ctx.chunk_size < TRAIN_CHUNK and TRAIN_CHUNK % ctx.chunk_size == 0:
                chunk, every = TRAIN_CHUNK, ctx.chunk_size
            elif not want_starts:  # decoding commits 1 or B tokens: a 64-token chunk is mostly padding
                chunk = min(chunk, 1 << max(clean.shape[1] - 1, 0).bit_length())
            if chunk == 1 and clean.shape[1] == 1 and cpu_step_ok(state):
                # one token on CPU: the recurrence in one pass (in place only when it commits)
                from clover.kernels.cpu.delta_rule import step

                own = state if ctx.commit and cache is not None else state.clone()
                res = step(q * self.dk**-0.5, k, v, g, beta, own)
            elif chunk == 1:  # one token (autoregressive decoding): the recurrence itself, ~10x cheaper
                res = dispatch.recurrent_gated_delta_rule(q * self.dk**-0.5, k, v, g, beta, state)
            else:
                res = dispatch.chunk_gated_delta_rule(
                    q * self.dk**-0.5,
                    k,
                    v,
                    g,
                    beta,
                    state,
                    chunk_size=chunk,
                    return_chunk_states=want_starts,
                    states_every=every,
                )
            o, state = res[0], res[1]
            starts = res[2] if want_starts else None
            clean_out = self._finish(o.to(clean.dtype), clean)
            if ctx.commit and cache is not None:
                cache.state, cache.conv = state, u[:, :, -(self.kernel - 1) :]

        noisy_out = None
        if noisy is not None:
            n, nb, b, dim = noisy.shape
            if at_start:
                block_states = state0[:, None]
            elif starts is None:  # one block right after the clean stream
                assert nb == 1 and ctx.noisy_offset == ctx.clean_len
                block_states = state[:, None]
            else:  # training: blocks tile the clean stream, chunk = block
                assert ctx.noisy_offset == 0 and ctx.chunk_size == b and nb * b == ctx.clean_len
                block_states = starts
            # each block's conv tail: the K-1 clean inputs just before its start
            idx = ctx.noisy_offset + b * torch.arange(nb, device=noisy.device)[:, None]
            idx = idx + torch.arange(self.kernel - 1, device=noisy.device)
            tails = u[:, :, idx].permute(0, 2, 1, 3)  # [N, nb, C, K-1]
            pre = self.in_proj_qkv(noisy).transpose(-1, -2)  # [N, nb, C, B]
            uu = torch.cat([tails, pre], dim=-1).reshape(n * nb, self.conv_dim, -1)
            x = noisy.reshape(n * nb, b, dim)
            q, k, v, _, _ = self._heads(self._conv(uu), x)
            shape = (n, nb, b, self.num_v_heads)
            o = dispatch.block_gdn_attention(
                q.view(*shape, self.dk),
                k.view(*shape, self.dk),
                v.view(*shape, self.dv),
                block_states,
                self.block_logit_scale,
                self.memory_logit,
                self.block_size_calibration,
            )
            noisy_out = self._finish(o.reshape(n * nb, b, self.num_v_heads, self.dv).to(noisy.dtype), x)
            noisy_out = noisy_out.view(n, nb, b, dim)
        return clean_out, noisy_out

    def _cpu_token(self, x: Tensor, ctx: ForwardContext, cache, state: Tensor, tail: Tensor) -> Tensor:
        """A few tokens of causal decoding on CPU (B = 1, or a verify check of up to CPU_TOKENS):
        the projections in torch for all of them at once, then token after token the rest in one
        kernel call each (kernels/cpu/gdn_token.py); the state is updated in place only when the
        step commits. For so few tokens this beats the chunked form's ~100 small ops."""
        from clover.kernels.cpu.gdn_token import gdn_token

        n, width = x.shape[0], x.shape[1]
        flat = x.reshape(n * width, -1)
        commits = ctx.commit and cache is not None
        # one committed token updates the state in place (B = 1's hot path); several start from a
        # copy, so a snapshot taken before (model/cache.py keeps references) stays as it was
        in_place = commits and width == 1 and state.dtype == torch.float32 and state.is_contiguous()
        own = state if in_place else state.float().clone()
        pre, z = self.in_proj_qkv(flat).view(n, width, -1), self.in_proj_z(flat).view(n, width, -1)
        b, a = self.in_proj_b(flat).view(n, width, -1), self.in_proj_a(flat).view(n, width, -1)
        outs = []
        for i in range(width):
            out, tail = gdn_token(
                pre[:, i],
                z[:, i],
                b[:, i],
                a[:, i],
                tail,
                self.conv1d.weight[:, 0],
                self.A_log,
                self.dt_bias,
                self.norm.weight,
                self.norm.eps,
                own,
                self.key_dim,
                self.num_v_heads // self.num_k_heads,
            )
            outs.append(out)
        if commits:
            cache.state, cache.conv = own, tail
        out = torch.stack(outs, dim=1).reshape(n * width, -1)
        return self.out_proj(out.to(x.dtype)).view(n, width, -1)


class GDNCache:
    """Committed recurrent state (fp32) and the last K-1 conv inputs of one GDN layer."""

    def __init__(self, batch: int, layer: GatedDeltaNet, dtype: torch.dtype, device: torch.device) -> None:
        self.state = torch.zeros(batch, layer.num_v_heads, layer.dk, layer.dv, device=device)
        self.conv = torch.zeros(batch, layer.conv_dim, layer.kernel - 1, dtype=dtype, device=device)
