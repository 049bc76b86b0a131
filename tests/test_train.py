"""Training objective, loop, checkpoint/resume and data packing of model/training/train.py and model/training/data.py
on a tiny config (CPU, seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from clover.model.config import tiny
from clover.model.modeling import CloverForCausalLM
from clover.model.training.data import encode_doc, end_aligned, pack
from clover.model.training.train import export
from clover.model.training.train_objective import (
    add_noise,
    diffusion_step_loss,
    sample_block_size,
    step_generator,
)
from clover.model.training.trainer import TrainArgs, Trainer

SEQ = 32


def _data(rows: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Learnable rows: a repeating pattern with random offsets; the second half is the target."""
    g = torch.Generator().manual_seed(seed)
    base = torch.arange(SEQ) % 7 + 10
    ids = torch.stack([(base + int(torch.randint(0, 5, (1,), generator=g))) for _ in range(rows)])
    target = torch.zeros(rows, SEQ, dtype=torch.bool)
    target[:, SEQ // 2 :] = True
    return ids, target


def _args(**kw) -> TrainArgs:
    base = dict(steps=30, batch=2, lr=1e-2, warmup=2, log_every=100, ckpt_minutes=1e9)
    base.update(kw)
    return TrainArgs(**base)


def test_noise_masks_only_targets() -> None:
    ids, target = _data()
    x_t = add_noise(ids, target, 8, 127, torch.Generator().manual_seed(1))
    masked = x_t == 127
    assert masked.any()
    assert not (masked & ~target).any()  # context never masked
    assert torch.equal(x_t[~masked], ids[~masked])


def test_suffix_masks_are_left_order_patterns() -> None:
    """suffix_fraction 1: in every block the masked targets are all targets from a cut to the end."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(10, 100, (16, 64), generator=g)
    target = torch.rand(16, 64, generator=g) < 0.8
    x_t = add_noise(ids, target, 8, 127, torch.Generator().manual_seed(2), suffix_fraction=1.0)
    masked = (x_t == 127).view(16, 8, 8)
    tgt = target.view(16, 8, 8)
    assert not (masked & ~tgt).any()
    cuts = set()
    for row in range(16):
        for blk in range(8):
            m, t = masked[row, blk], tgt[row, blk]
            first = int(m.nonzero()[0]) if m.any() else 8
            assert torch.equal(m, t & (torch.arange(8) >= first)), (row, blk)
            cuts.add(first)
    assert len(cuts) > 3  # the cut varies
    # fraction 0 draws nothing extra: the masks are the random ones, bit for bit
    plain = add_noise(ids, target, 8, 127, torch.Generator().manual_seed(2))
    assert torch.equal(
        plain, add_noise(ids, target, 8, 127, torch.Generator().manual_seed(2), suffix_fraction=0.0)
    )
    mixed = add_noise(ids, target, 8, 127, torch.Generator().manual_seed(2), suffix_fraction=0.5)
    assert not torch.equal(mixed, plain)


def test_suffix_masks_share_is_checked() -> None:
    import pytest

    with pytest.raises(ValueError, match="suffix-masks"):
        TrainArgs(suffix_masks=1.5).weights()


def test_loss_only_on_masked_targets() -> None:
    """Changing a context token's label cannot change the loss; the count is the masked targets."""
    torch.manual_seed(0)
    model = CloverForCausalLM(tiny())
    ids, target = _data()
    loss, count = diffusion_step_loss(model, ids, target, 8, torch.Generator().manual_seed(3))
    x_t = add_noise(ids, target, 8, model.config.mask_token_id, torch.Generator().manual_seed(3))
    expect = (x_t == model.config.mask_token_id) & target
    expect[:, 0] = False
    assert count == int(expect.sum()) > 0
    # a loss on no targets is zero (and still backpropagates)
    zero, n = diffusion_step_loss(model, ids, torch.zeros_like(target), 8, torch.Generator().manual_seed(3))
    assert n == 0 and float(zero.detach()) == 0.0
    zero.backward()


def test_selected_rows_match_the_full_forward_train() -> None:
    torch.manual_seed(0)
    model = CloverForCausalLM(tiny()).eval()
    ids, target = _data()
    x_t = add_noise(ids, target, 4, model.config.mask_token_id, torch.Generator().manual_seed(2))
    use = (x_t == model.config.mask_token_id) & target
    with torch.no_grad():
        full = model.forward_train(x_t, ids, 4)[use]
        fast = model.forward_train(x_t, ids, 4, select=use)
        ar_use = target.clone()
        ar_use[:, 0] = False
        ar_full = torch.cat([torch.zeros_like(model(ids)[:, :1]), model(ids)[:, :-1]], 1)[ar_use]
        ar_fast = model.forward_train(ids, ids, 1, select=ar_use)
        torch.testing.assert_close(model.forward_train(ids, ids, 1)[ar_use], ar_full, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(fast, full, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(ar_fast, ar_full, rtol=1e-4, atol=1e-4)


def test_distill_targets_are_the_causal_paths_argmax() -> None:
    """The teacher a B > 1 pass gives (its clean stream) is what B = 1 predicts at the same rows, and a
    distilled loss moves the denoiser's argmax towards it."""
    torch.manual_seed(0)
    model = CloverForCausalLM(tiny())
    ids, target = _data()
    x_t = add_noise(ids, target, 4, model.config.mask_token_id, torch.Generator().manual_seed(2))
    use = (x_t == model.config.mask_token_id) & target
    logits, teacher = model.forward_train(x_t, ids, 4, select=use, causal=True)
    assert not teacher.requires_grad and logits.requires_grad
    with torch.no_grad():
        torch.testing.assert_close(
            teacher, model.forward_train(ids, ids, 1, select=use), rtol=1e-4, atol=1e-4
        )
    with pytest.raises(ValueError, match="needs `select`"):
        model.forward_train(x_t, ids, 4, causal=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def agreement() -> float:
        with torch.no_grad():
            draft, causal = model.forward_train(x_t, ids, 4, select=use, causal=True)
            return float((draft.argmax(-1) == causal.argmax(-1)).float().mean())

    before = agreement()
    for _ in range(15):
        gen = torch.Generator().manual_seed(2)  # the same masks as x_t
        loss, _ = diffusion_step_loss(model, ids, target, 4, gen, distill=True)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert before < 0.5 < 0.75 < agreement()
    with pytest.raises(ValueError, match="--distill"):
        TrainArgs(distill=1.5).weights()


def test_few_steps_reduce_loss_on_fixed_batch(tmp_path) -> None:
    ids, target = _data()
    trainer = Trainer(tiny(), ids, target, tmp_path, _args())

    def fixed_loss() -> float:
        with torch.no_grad():
            return float(diffusion_step_loss(trainer.model, ids, target, 4, step_generator(99, 0))[0])

    before = fixed_loss()
    for _ in range(30):
        trainer.train_step()
    after = fixed_loss()
    assert after < before * 0.7, (before, after)


def test_checkpoint_resume_reproduces_next_step(tmp_path) -> None:
    ids, target = _data()
    a = Trainer(tiny(), ids, target, tmp_path / "a", _args())
    for _ in range(3):
        a.train_step()
    a.save()
    expected = a.train_step()

    b = Trainer(tiny(), ids, target, tmp_path / "b", _args(seed=0))
    b.load(tmp_path / "a" / "ckpt" / "last.pt")
    assert b.step == 3
    got = b.train_step()
    assert got["block"] == expected["block"]
    assert abs(got["loss"] - expected["loss"]) < 1e-6


def test_run_loop_stops_and_exports(tmp_path) -> None:
    ids, target = _data()
    trainer = Trainer(tiny(), ids, target, tmp_path, _args(steps=4, log_every=2))
    logged: list[dict] = []
    trainer.run(logged.append)
    assert [r["step"] for r in logged] == [2, 4]
    assert (tmp_path / "ckpt" / "last.pt").is_file()
    info = export(tmp_path, tmp_path / "weights")
    assert info["step"] == 4
    from clover.model.loading.load import load_checkpoint

    loaded = load_checkpoint(tmp_path / "weights")
    ref = trainer.model.state_dict()["lm_head.weight"]
    got = loaded.model.state_dict()["lm_head.weight"]
    torch.testing.assert_close(got, ref.to(torch.bfloat16).float())  # bf16 storage, fp32 compute


def test_block_weights_choose_the_block_sizes() -> None:
    gen = torch.Generator().manual_seed(0)
    ar_only = TrainArgs(block_weights="1,0,0,0,0,0").weights()
    assert {sample_block_size(gen, 64, ar_only) for _ in range(20)} == {1}
    mixed = {sample_block_size(gen, 64, TrainArgs(block_weights="1,0,0,0,0,1").weights()) for _ in range(50)}
    assert mixed == {1, 32}
    for bad in ("1,2", "1,0,0,0,0,-1", "0,0,0,0,0,0"):
        try:
            TrainArgs(block_weights=bad).weights()
        except ValueError as exc:
            assert "--block-weights" in str(exc)
        else:
            raise AssertionError(f"accepted {bad!r}")


def test_pack_and_end_align() -> None:
    docs = [([5, 6, 7], [False, True, True]), ([8, 9], [True, True])]
    ids, tgt = pack(docs, 4, 0)
    assert ids.tolist() == [[5, 6, 7, 0], [8, 9, 0, 0]][:1] and tgt.tolist() == [[False, True, True, True]]
    ids, tgt = end_aligned(docs, 3, 0)
    assert ids.tolist() == [[0, 6, 7], [0, 8, 9]]  # every row opens with the pad, a cut one too
    assert tgt.tolist() == [[False, True, True], [False, True, True]]


def test_encode_doc_marks_span_tokens() -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"a": 0, "b": 1, "c": 2, "[UNK]": 3}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    ids, target = encode_doc(tok, "a b c a", [(2, 5)])
    assert ids == [0, 1, 2, 0]
    assert target == [False, True, True, False]


def test_train_cmd_runs_and_exports(tmp_path) -> None:
    """The CLI front end: build argv, train two steps from a packed dir, export, bad input -> code 2."""
    from clover.train_cmd import run_train, train_argv

    ids, target = _data()
    torch.save({"ids": ids.int(), "target": target, "meta": {"rows": 4}}, tmp_path / "packed.pt")
    (tmp_path / "cfg.json").write_text(tiny().to_json())
    assert train_argv(out=tmp_path, steps=2, resume=True)[-1] == "--resume"
    code = run_train(out=tmp_path / "run", config=tmp_path / "cfg.json", data=tmp_path, steps=2, batch=1)
    assert code == 0 and (tmp_path / "run" / "ckpt" / "last.pt").is_file()
    assert run_train(out=tmp_path / "run", export_to=tmp_path / "w") == 0
    assert (tmp_path / "w" / "model.safetensors").is_file()
    assert run_train(out=tmp_path / "missing", config=tmp_path / "cfg.json", data=tmp_path / "nope") == 2
    # fine-tuning starts from the exported weights, not from a fresh init
    assert (
        run_train(
            out=tmp_path / "ft",
            config=tmp_path / "cfg.json",
            data=tmp_path,
            steps=1,
            batch=1,
            lr=1e-12,
            init_from=tmp_path / "w",
        )
        == 0
    )
    export(tmp_path / "ft", tmp_path / "w2")
    from safetensors.torch import load_file

    before, after = (
        load_file(str(tmp_path / "w" / "model.safetensors")),
        load_file(str(tmp_path / "w2" / "model.safetensors")),
    )
    torch.testing.assert_close(after["lm_head.weight"], before["lm_head.weight"])
    assert (
        run_train(
            out=tmp_path / "ft2",
            config=tmp_path / "cfg.json",
            data=tmp_path,
            steps=1,
            init_from=tmp_path / "nope",
        )
        == 2
    )


def test_build_marks_assistant_spans_or_every_token(tmp_path) -> None:
    import json

    from clover.model.training.data import build, load_packed

    text = "<|im_start|>user\nfix it<|im_end|>\n<|im_start|>assistant\nDone.<|im_end|>\n"
    start = text.index("Done.")
    (tmp_path / "t.jsonl").write_text(json.dumps({"text": text, "spans": [[start, len(text) - 1]]}) + "\n")
    tok = Path(__file__).resolve().parents[1] / "model" / "weights" / "tokenizer.json"
    counts = {}
    for all_targets in (False, True):
        out = tmp_path / f"p{all_targets}"
        meta = build(
            tok,
            [tmp_path / "t.jsonl"],
            out,
            seq_len=64,
            code_fraction=0.0,
            align="end",
            all_targets=all_targets,
        )
        ids, target, _ = load_packed(out)
        counts[all_targets] = int(target.sum())
        assert meta["trajectories"] == 1 and ids.shape == (1, 64)
    n_tokens = meta["trajectory_tokens"]
    assert 2 <= counts[False] < counts[True] == n_tokens + 1  # + the closing <|endoftext|>
    # copying rows: half the rows here, made of the (non-special) tokens the trajectory uses
    meta = build(
        tok,
        [tmp_path / "t.jsonl"],
        tmp_path / "c",
        seq_len=64,
        code_fraction=0.0,
        align="end",
        copy_fraction=0.5,
    )
    ids, target, _ = load_packed(tmp_path / "c")
    assert meta["copy_rows"] == 1 and ids.shape == (2, 64)
    traj_row = int((ids == 1).any(1).int().argmax())  # the row with <|im_start|>
    used = set(ids[traj_row].tolist()) - set(range(10))
    assert set(ids[1 - traj_row].tolist()) <= used


def test_copy_rows_repeat_each_chunk_and_target_the_repeat() -> None:
    from clover.model.training.data import copy_rows

    ids, target = copy_rows(3, 256, 10, 500, seed=0)
    assert ids.shape == target.shape == (3, 256) and int(ids.min()) >= 10 and int(ids.max()) < 500
    for row, tgt in zip(ids.tolist(), target.tolist(), strict=True):
        at = 0
        while at < len(row):  # chunks: a run of non-targets followed by its copy
            size = next((i for i, t in enumerate(tgt[at:]) if t), len(row) - at)
            copy = row[at + size : at + 2 * size]
            assert copy == row[at : at + len(copy)] and all(tgt[at + size : at + size + len(copy)])
            at += size + len(copy)
    assert copy_rows(1, 64, 10, 500, seed=1)[0].tolist() != copy_rows(1, 64, 10, 500, seed=2)[0].tolist()


def test_a_time_limited_run_is_not_cut_at_the_default_step_count() -> None:
    from clover.model.training.train import resolve_steps
    from clover.model.training.trainer import TrainArgs

    assert resolve_steps(None, 0.0) == TrainArgs.steps
    assert resolve_steps(None, 90.0) > 10**6  # the clock ends it, and drives the cosine
    assert resolve_steps(500, 90.0) == 500


def test_short_rows_mix_into_the_long_rows_steps(tmp_path) -> None:
    ids, target = _data(rows=4)
    long_ids, long_target = torch.cat([ids, ids], 1), torch.cat([target, target], 1)  # rows of 64
    short = _data(rows=6, seed=1)  # rows of 32
    args = _args(short_share=0.5, short_batch=3)
    trainer = Trainer(tiny(), long_ids, long_target, tmp_path / "a", args, short=short)
    recs = [trainer.train_step() for _ in range(20)]
    sizes = [r["tokens"] for r in recs]
    assert set(sizes) == {2 * 64, 3 * 32} and 4 <= sizes.count(3 * 32) <= 16
    assert trainer.tokens == sum(sizes)
    trainer.save()
    expected = trainer.train_step()
    again = Trainer(tiny(), long_ids, long_target, tmp_path / "b", args, short=short)
    again.load(tmp_path / "a" / "ckpt" / "last.pt")
    got = again.train_step()
    assert (got["tokens"], got["block"]) == (expected["tokens"], expected["block"])
    assert abs(got["loss"] - expected["loss"]) < 1e-6


def test_without_a_short_share_the_batches_are_the_long_rows_as_before(tmp_path) -> None:
    ids, target = _data()
    plain = Trainer(tiny(), ids, target, tmp_path / "a", _args())
    unused = Trainer(tiny(), ids, target, tmp_path / "b", _args(), short=_data(rows=2, seed=1))
    for _ in range(3):
        a, b = plain.train_step(), unused.train_step()
        assert (a["block"], a["tokens"]) == (b["block"], b["tokens"]) and abs(a["loss"] - b["loss"]) < 1e-6
    with pytest.raises(ValueError, match="short-share"):
        _args(short_share=1.5).weights()
