"""Test-wide setup. Triton's interpreter must be chosen before any kernel module imports."""

from __future__ import annotations

import os
import shutil

# No GPU here: Triton kernels run under the interpreter (parity tests on tiny shapes).
if not shutil.which("nvidia-smi"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

try:  # property tests draw the same examples on every run: a red CI run reproduces locally
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("clover", derandomize=True, print_blob=True)
    _hypothesis_settings.load_profile("clover")
except ImportError:
    pass

try:
    import torch
except ImportError:  # the torch-free install: model tests skip themselves
    torch = None

if torch is not None:
    # Tiny shapes: one thread beats several on a shared 2-core machine (fewer sync stalls).
    torch.set_num_threads(1)
