"""Loading a local checkpoint: where it is, on which device, with how many CPU threads; errors as
one-line ModelErrors."""

from __future__ import annotations

import os
from pathlib import Path

from clover.core.stops import ModelError
from clover.model import EMBEDDED_DIR

DEFAULT_CONTEXT = 32768


def checkpoint_dir(spec: str) -> Path:
    """settings.model -> the checkpoint directory ("embedded": the shipped weights)."""
    if spec == "embedded":
        return EMBEDDED_DIR  # shipped inside the package (package-data)
    d = Path(spec).expanduser()
    if not d.is_dir():
        raise ModelError(f"checkpoint directory not found: {d}")
    return d


def pick_device(asked: str | None) -> str:
    import torch

    name = (asked or "cpu").strip().lower()
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {asked!r} was asked for, but CUDA is not available here")
    try:
        torch.device(name)
    except RuntimeError:
        raise ModelError(f"unknown device {asked!r} (use cpu, cuda, cuda:N or auto)") from None
    return name


SMALL_MODEL_PARAMS = 100_000_000


def cpu_threads(asked: int, params: int) -> int | None:
    """Torch threads for decoding on CPU, or None to keep torch's default. `asked` > 0 wins; else a
    small model gets 1: its matrices are too small to split, and on a busy machine OpenMP threads
    spin-wait for each other (the 9M embedded model decoded ~60x slower with 2 threads than with 1
    on a 2-core machine running other work). OMP_NUM_THREADS, when set, is the user's choice."""
    if asked > 0:
        return asked
    if os.environ.get("OMP_NUM_THREADS") or params >= SMALL_MODEL_PARAMS:
        return None
    return 1


def load_model(directory: Path, device: str, quantize: str = "none"):
    """load_checkpoint's (network, config, chat template or None); errors as one-line ModelErrors.
    `quantize`: int4 / int8 quantize the checkpoint's floating-point matrices on load; none: as stored."""
    from clover.model.loading.load import CheckpointError, load_checkpoint

    try:  # the loader picks the dtype: bf16 on a GPU, fp32 on CPU only for a small model
        return load_checkpoint(directory, device=device, quantize=None if quantize == "none" else quantize)
    except CheckpointError as exc:
        raise ModelError(one_line(exc)) from None
    except Exception as exc:  # e.g. safetensors' error on a truncated file: still one line
        raise ModelError(f"cannot load the checkpoint in {directory}: {one_line(exc)}") from None


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


__all__ = [
    "DEFAULT_CONTEXT",
    "checkpoint_dir",
    "cpu_threads",
    "load_model",
    "one_line",
    "pick_device",
]
