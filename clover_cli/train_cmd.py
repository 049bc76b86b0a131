"""`clover train`: a thin front end to model/training/train.py for the CLI.

The lead wires `run_train` into the typer app; torch is imported only when it runs, so
`clover --help` stays light. Returns a process exit code (0 ok, 2 usage error).
"""

from __future__ import annotations

from pathlib import Path


def train_argv(
    *,
    out: Path,
    config: Path | None = None,
    data: Path | None = None,
    steps: int | None = None,
    batch: int | None = None,
    seq: int | None = None,
    lr: float | None = None,
    device: str = "cpu",
    resume: bool = False,
    init_from: str | Path | None = None,
    time_limit: float | None = None,
    export_to: Path | None = None,
    tokenizer: Path | None = None,
) -> list[str]:
    """The `python -m clover.model.training.train` arguments for these options (None: the script's default)."""
    argv = ["--out", str(out), "--device", device]
    if export_to is not None:
        argv += ["--export-to", str(export_to)]
        if tokenizer is not None:
            argv += ["--tokenizer", str(tokenizer)]
        return argv
    for flag, value in (
        ("--config", config),
        ("--data", data),
        ("--steps", steps),
        ("--batch", batch),
        ("--seq", seq),
        ("--lr", lr),
        ("--time-limit", time_limit),
    ):
        if value is not None:
            argv += [flag, str(value)]
    if resume:
        argv.append("--resume")
    if init_from is not None:
        argv += ["--init-from", str(_model_dir(init_from))]
    return argv


def _model_dir(name: str | Path) -> Path:
    from clover.model import EMBEDDED_DIR

    return EMBEDDED_DIR if str(name) == "embedded" else Path(name)


def run_train(**options) -> int:
    """Train (or export with `export_to=`) a Clover checkpoint; see model/training/train.py for the options."""
    from clover.model.training.train import main

    try:
        return main(train_argv(**options))
    except SystemExit as exc:  # argparse's usage errors: already printed as one line
        return int(exc.code or 0)
