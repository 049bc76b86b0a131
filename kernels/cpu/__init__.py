"""CPU kernels for decoding at small widths (numba): int4 and bf16 matrix-vector products that read
each weight byte once at close to memory bandwidth, and the routed experts of one MoE layer in one
call. At widths 1-32 a decoding step is a stream of weight bytes; torch's own CPU kernels for it
(`_weight_int4pack_mm_for_cpu`, a bf16 `mm`) reach ~20 and ~15 GB/s of a ~35-50 GB/s machine here,
and the Python between one expert's matmuls costs as much again (benchmarks/cpu_kernels.py).

numba is the tool made for this (compiled loops from Python, no C compiler on the user's machine,
compiled once and cached). Without it (or with CLOVER_CPU_KERNELS=torch) everything runs on torch's
kernels, as before; `available()` says which. The int4 products go further on integer dot products
(native.py, a small C kernel built at first use) where that builds; CLOVER_CPU_NATIVE=off keeps them on
numba's float kernels.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import threading
from collections.abc import Iterator

# numba's fallback thread pool (workqueue) takes one caller at a time, and int4.py's dequantization
# buffers are shared: kernel calls are serialised (re-entrant: a call may hold it around another)
_KERNELS = threading.RLock()


@functools.cache
def _numba_present() -> bool:
    """numba installed and importable (a numba built for another numpy fails on import: torch then)."""
    if importlib.util.find_spec("numba") is None:
        return False
    try:
        import numba  # noqa: F401
    except Exception:  # noqa: BLE001 - any failure to import means: not available
        return False
    return True


def available() -> bool:
    """Run the numba kernels? (numba installed and CLOVER_CPU_KERNELS is not "torch")."""
    choice = os.environ.get("CLOVER_CPU_KERNELS", "auto").strip().lower() or "auto"
    if choice not in ("auto", "numba", "torch"):
        raise ValueError(f"CLOVER_CPU_KERNELS={choice!r}; expected auto, numba or torch")
    if choice == "torch":
        return False
    if choice == "numba" and not _numba_present():
        raise ValueError(
            "CLOVER_CPU_KERNELS=numba but numba is not installed or does not import (pip install numba)"
        )
    return _numba_present()


def native_choice() -> str:
    """CLOVER_CPU_NATIVE: "auto" (the integer-dot int4 kernel of native.py where it builds) or "off"."""
    choice = os.environ.get("CLOVER_CPU_NATIVE", "auto").strip().lower() or "auto"
    if choice not in ("auto", "off"):
        raise ValueError(f"CLOVER_CPU_NATIVE={choice!r}; expected auto or off")
    return choice


def check_choices() -> None:
    """Both settings read (ValueError, one line, for a value that names no choice): the loader asks
    before it places the first weight."""
    available()
    native_choice()


@contextlib.contextmanager
def torch_threads() -> Iterator[None]:
    """Around every kernel call: one caller at a time, on torch's thread count, and torch's count left
    as it was (numba's OpenMP layer can share torch's runtime, where starting its pool sets the count
    to every core)."""
    import numba
    import torch

    with _KERNELS:
        n = torch.get_num_threads()
        numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))
        try:
            yield
        finally:
            if torch.get_num_threads() != n:
                torch.set_num_threads(n)
