"""model/training/copy_warmup.py: an untied checkpoint is tied from its input embeddings, the copying phase
trains and writes a model directory that loads, and bad input is one line and exit 2."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from clover.model.loading.load import load_checkpoint  # noqa: E402
from clover.model.training.copy_warmup import main, tied_copy, warm_up  # noqa: E402
from tests.tiny_checkpoint import tiny_checkpoint_dir  # noqa: E402


def test_an_untied_checkpoint_is_tied_from_its_input_embeddings():
    source = load_checkpoint(tiny_checkpoint_dir())
    assert not source.config.tie_word_embeddings
    model = tied_copy(tiny_checkpoint_dir())
    assert model.config.tie_word_embeddings
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert torch.equal(model.model.embed_tokens.weight, source.model.model.embed_tokens.weight.float())
    ids = torch.tensor([[201, 202, 203, 201]])
    assert model(ids).shape == (1, 4, model.config.vocab_size)


def test_warm_up_trains_the_copy_targets():
    model = tied_copy(tiny_checkpoint_dir())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    probs = torch.zeros(model.config.vocab_size)
    probs[250:260] = 0.1
    acc = warm_up(
        model, probs, steps=6, target=1.0, lr=1e-3, batch=2, lengths=(4, 6), seed=0, log=lambda _: None
    )
    assert 0.0 <= acc <= 1.0 and not model.training
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert "model.embed_tokens.weight" in changed and len(changed) > 10


def test_cli_writes_a_tied_model_that_loads(tmp_path, capsys):
    out = tmp_path / "warm"
    argv = [
        "--init-from",
        str(tiny_checkpoint_dir()),
        "--out",
        str(out),
        "--steps",
        "3",
        "--lengths",
        "4,8",
        "--tool-prompt",
        "compact",
    ]
    assert main(argv) == 0
    assert "copy accuracy" in capsys.readouterr().out
    loaded = load_checkpoint(out)
    assert loaded.config.tie_word_embeddings and loaded.config.tool_prompt == "compact"
    assert (out / "tokenizer.json").is_file()


@pytest.mark.parametrize(
    "args,message",
    [
        (["--lengths", "8"], "--lengths"),
        (["--lengths", "9,3"], "--lengths"),
        (["--target", "0"], "--target"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as exc:
        main(["--init-from", str(tiny_checkpoint_dir()), "--out", str(tmp_path / "o"), *args])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_a_missing_checkpoint_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["--init-from", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1 and not (tmp_path / "o").exists()
