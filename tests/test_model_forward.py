"""The network's invariants on a tiny random Clover (fp32, CPU): cached = from scratch, commit fusion
= separate commit, training forward = inference round, batching with padding = one by one."""

from __future__ import annotations

import pytest
import torch

from clover.model.config import tiny
from clover.model.modeling import CloverForCausalLM
from clover.model.training.train_objective import diffusion_step_loss


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = CloverForCausalLM(tiny()).eval()
    with torch.no_grad():  # move every norm and block-mode parameter off its neutral init
        for name, p in m.named_parameters():
            if "norm" in name or name.endswith(
                ("block_logit_scale", "memory_logit", "block_size_calibration")
            ):
                p.add_(0.3 * torch.randn_like(p))
    return m


def _ids(n, t, seed):
    return torch.randint(2, 120, (n, t), generator=torch.Generator().manual_seed(seed))


def test_cached_prefix_equals_scratch(model):
    ids = _ids(2, 41, 1)
    with torch.no_grad():
        full = model(ids)
    cache = model.new_cache(2)
    pos = 0
    for piece in (7, 1, 13, 4, 16):  # uneven pieces exercise conv tails and state carry
        model.commit(ids[:, pos : pos + piece], cache)
        pos += piece
        torch.testing.assert_close(cache.next_logits, full[:, pos - 1], atol=1e-5, rtol=1e-4)
    assert cache.pos == 41


@pytest.mark.parametrize("block", [1, 3, 4, 8])
def test_training_forward_equals_denoise(model, block):
    t = 4 * block
    x0 = _ids(2, t, 2)
    xt = x0.clone()
    xt[torch.rand(2, t, generator=torch.Generator().manual_seed(3)) < 0.5] = model.config.mask_token_id
    with torch.no_grad():
        train = model.forward_train(xt, x0, block)
    for k in range(4):
        cache = model.new_cache(2)
        model.prefill(x0[:, : k * block], cache)
        got = model.denoise(xt[:, k * block : (k + 1) * block], cache)
        torch.testing.assert_close(got, train[:, k * block : (k + 1) * block], atol=1e-5, rtol=1e-4)


def test_commit_fusion_equals_separate_commit(model):
    ids, nxt = _ids(2, 14, 4), _ids(2, 4, 5)
    nxt[:, 1:3] = model.config.mask_token_id
    a, b = model.new_cache(2), model.new_cache(2)
    model.prefill(ids[:, :10], a)
    model.prefill(ids[:, :10], b)
    fused = model.commit_and_denoise(ids[:, 10:], nxt, a)
    model.commit(ids[:, 10:], b)
    separate = model.denoise(nxt, b)
    torch.testing.assert_close(fused, separate, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(a.next_logits, b.next_logits, atol=1e-5, rtol=1e-4)
    assert a.pos == b.pos == 14


def test_denoise_leaves_cache_alone_and_snapshot_restores(model):
    ids, blk = _ids(1, 12, 6), _ids(1, 4, 7)
    cache = model.new_cache(1)
    model.prefill(ids[:, :8], cache)
    first = model.denoise(blk, cache)
    snap = cache.snapshot()
    model.commit(ids[:, 8:], cache)  # advance, then roll back
    cache.restore(snap)
    torch.testing.assert_close(model.denoise(blk, cache), first)
    assert cache.pos == 8


def test_left_padded_batch_equals_single(model):
    a, b = _ids(1, 11, 8)[0], _ids(1, 5, 9)[0]
    batch = torch.zeros(2, 11, dtype=torch.long)
    batch[0], batch[1, 6:] = a, b
    cache = model.new_cache(2)
    model.prefill(batch, cache, pad=torch.tensor([0, 6]))
    blk = torch.full((2, 4), model.config.mask_token_id)
    got = model.denoise(blk, cache)
    for i, seq in enumerate((a, b)):
        single = model.new_cache(1)
        model.prefill(seq[None], single)
        torch.testing.assert_close(got[i : i + 1], model.denoise(blk[:1], single), atol=1e-5, rtol=1e-4)


def test_training_loss_backprops_into_block_parameters(model):
    x0 = _ids(2, 16, 10)
    xt = x0.clone()
    xt[:, 1::2] = model.config.mask_token_id
    model.zero_grad()
    target = torch.ones_like(x0, dtype=torch.bool)
    loss, _count = diffusion_step_loss(model, x0, target, 4, torch.Generator().manual_seed(0))
    assert torch.isfinite(loss)
    loss.backward()
    gdn = next(layer.linear_attn for layer in model.model.layers if layer.layer_type == "linear_attention")
    for p in (gdn.block_logit_scale, gdn.memory_logit, gdn.block_size_calibration, gdn.A_log):
        assert p.grad is not None and p.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="multiple of block_size"):
        model.forward_train(xt[:, :15], x0[:, :15], 4)
