"""Test-wide setup. Triton's interpreter must be chosen before any kernel module imports."""

from __future__ import annotations

import os
import shutil
import signal

import pytest

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


# The handlers of the signals that end a run: a test that leaves Ctrl-C ignored breaks later ones.
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Set once per process by pytest itself (around every phase) and by torch's inductor (its cache dir).
_PROCESS_WIDE = {"PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR"}


def _global_state() -> dict:
    """What a test may change for itself but must put back: one test's leak slows or breaks
    every later one (a torch thread count set by training code made later tests time out)."""
    env = {k: v for k, v in os.environ.items() if k not in _PROCESS_WIDE}
    state = {"cwd": os.getcwd(), "env": env, "signals": {n: signal.getsignal(n) for n in _SIGNALS}}
    if torch is not None:
        state["torch_threads"] = torch.get_num_threads()
    return state


@pytest.fixture(autouse=True)
def _no_leaked_global_state():
    before = _global_state()
    yield
    after = _global_state()
    leaks = []
    if after["cwd"] != before["cwd"]:
        leaks.append(f"cwd {before['cwd']} -> {after['cwd']}")
        os.chdir(before["cwd"])
    if after["env"] != before["env"]:
        changed = sorted(
            k
            for k in before["env"].keys() | after["env"].keys()
            if before["env"].get(k) != after["env"].get(k)
        )
        leaks.append(f"environment variables {', '.join(changed)}")
        for key in set(after["env"]) - set(before["env"]):
            del os.environ[key]
        os.environ.update(before["env"])
    for signum, handler in before["signals"].items():
        if after["signals"][signum] is not handler:
            leaks.append(f"the {signal.Signals(signum).name} handler")
            signal.signal(signum, handler)
    if torch is not None and after["torch_threads"] != before["torch_threads"]:
        leaks.append(f"torch threads {before['torch_threads']} -> {after['torch_threads']}")
        torch.set_num_threads(before["torch_threads"])
    if leaks:
        pytest.fail("test leaked global state (restored now): " + "; ".join(leaks), pytrace=False)


@pytest.fixture
def ctrl_c():
    """Ctrl-C raising KeyboardInterrupt, as in a terminal: a run started in the background (`cmd &`)
    inherits SIGINT ignored, and a test that interrupts itself would then wait for nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
