"""benchmarks/copy_probe.py: the copying metric itself, and the CLI on a real tiny checkpoint."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from benchmarks.copy_probe import copy_accuracy, main  # noqa: E402


class PerfectCopier(torch.nn.Module):
    """Predicts, at each position, the token that followed the previous occurrence of this token."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab

    def forward(self, ids):
        seq = ids[0].tolist()
        logits = torch.zeros(1, len(seq), self.vocab)
        for i, tok in enumerate(seq):
            earlier = [j for j in range(i) if seq[j] == tok]
            if earlier and earlier[-1] + 1 < len(seq):
                logits[0, i, seq[earlier[-1] + 1]] = 1.0
        return logits


def test_metric_is_one_for_a_copier_and_low_for_a_constant() -> None:
    assert copy_accuracy(PerfectCopier(50_000), 50_000, 10, length=20, trials=3) == 1.0
    constant = lambda ids: torch.zeros(1, ids.shape[1], 500)  # noqa: E731 - always predicts token 0
    assert copy_accuracy(constant, 500, 10, length=20, trials=3) == 0.0


def test_cli_on_a_tiny_checkpoint(capsys, tmp_path) -> None:
    from tests.tiny_checkpoint import tiny_checkpoint_dir

    assert main(["--model", str(tiny_checkpoint_dir()), "--length", "8", "--trials", "2"]) == 0
    out = capsys.readouterr().out
    assert "copy accuracy" in out and 0.0 <= float(out.split("accuracy ")[1].split()[0]) <= 1.0
    assert main(["--model", str(tmp_path / "missing")]) == 2
    assert "error:" in capsys.readouterr().err
