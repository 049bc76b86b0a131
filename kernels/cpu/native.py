"""int4 matrix products on integer dot products (kernels/cpu/int4_dot.c): the activations quantized to
int8 per 32 columns and multiplied with the int4 codes by AVX-512 VNNI, as llama.cpp does for Q4_0 x
Q8_0. The float kernels of int4.py are compute-bound at ~40 G weights/s on 2 cores, so a forward of
4 tokens cost 2x one; on integer dots the product is bound by reading the weights up to ~8 rows.

No library ships this for Clover's layout on x86: torch's `_weight_int4pack_mm_for_cpu` and
`_dyn_quant_matmul_4bit` compute in float here (the latter's int8 path is KleidiAI, Arm only), fbgemm's
and oneDNN's dynamic-quant linears take int8 weights (twice the bytes per token), and ggml's kernels
ship inside llama.cpp builds without an API for one product. So the kernel is ~150 lines of C, built
at its first use with the machine's C compiler (`cc`, or $CC) for this CPU (-march=native) and cached
under ~/.cache/clover (or $CLOVER_CACHE_DIR). Without a compiler, without AVX-512 VNNI, or with
CLOVER_CPU_NATIVE=off, `available()` is False and the loader keeps int4.py's float layout (and torch's
kernels without numba): the same results up to the activations' int8 rounding.

Layout ("int4v", made once at load): a matrix [N, K] in blocks of 16 rows, data uint8
[N/16, K/8, 16, 4] (byte p of a row's 4 for columns 8c..8c+7: column 8c+p low, 8c+4+p high) and
sm [N/16, K/G, 2, 16] (scale, minimum; bf16 bits or float32), w = q * s + m. The threads are numba's
(prange over blocks of rows), so torch, numba and this kernel share the thread count.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch
from numba import njit, prange
from torch import Tensor

from clover.kernels.cpu import native_choice, torch_threads

SOURCES = tuple(Path(__file__).with_name(n) for n in ("int4_dot.c", "bf16_dot.c"))
ROWS = 16  # rows per block of the layout
XBLOCK = 32  # columns per activation scale
FLAGS = ("-O3", "-march=native", "-shared", "-fPIC")
TASK_BLOCKS = 8  # row blocks (128 rows) per parallel task


def _cache_dir() -> Path:
    root = os.environ.get("CLOVER_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "clover"
    )
    return Path(root) / "kernels"


def _cpu_id() -> str:
    """What -march=native compiles for: the CPU's model and flags (a cache shared between machines
    must not hand one machine another's build)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown"
    lines = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))]
    return "\n".join(sorted(set(lines)))


def _build(compiler: str) -> Path | None:
    """The shared library for this source, compiler and CPU, built once (atomically: two processes
    may build at the same time); None when the compiler fails."""
    text = b"".join(src.read_bytes() for src in SOURCES)
    key = hashlib.sha256(text + " ".join((compiler, *FLAGS)).encode() + _cpu_id().encode()).hexdigest()[:16]
    out = _cache_dir() / f"cpu_dot-{key}.so"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        part = Path(tmp) / out.name
        try:
            done = subprocess.run(
                [compiler, *FLAGS, "-o", str(part), *map(str, SOURCES), "-lm"],
                capture_output=True,
                timeout=120,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0 or not part.is_file():
            return None
        os.replace(part, out)
    return out


@functools.cache
def _library() -> ctypes.CDLL | None:
    compiler = shutil.which(os.environ.get("CC") or "cc")
    if compiler is None:
        return None
    path = _build(compiler)
    if path is None:
        return None
    try:
        return ctypes.CDLL(str(path))
    except OSError:
        return None


def available() -> bool:
    """Run int4 products on this kernel? (built here, with the integer-dot instructions, and not
    turned off by CLOVER_CPU_NATIVE=off)."""
    if native_choice() == "off":
        return False
    return simd() > 0


def simd() -> int:
    """The vector width the built int4 kernel uses (512: AVX-512 VNNI), 0 when it runs scalar code
    or could not be built."""
    lib = _library()
    return 0 if lib is None else int(lib.clover_int4_simd())


def bf16_available() -> bool:
    """Run bf16 products of 1-8 rows (lm_head, the routers) on bf16_dot.c? (built, AVX-512 BF16)."""
    if native_choice() == "off":
        return False
    lib = _library()
    return lib is not None and int(lib.clover_bf16_simd()) > 0


def fits(rows: int, cols: int, group_size: int) -> bool:
    return rows % ROWS == 0 and cols % XBLOCK == 0 and group_size % XBLOCK == 0 and cols % group_size == 0


# ---------------------------------------------------------------------- packing (torch, at load)


def pack_codes(codes: Tensor) -> Tensor:
    """codes [N, K] in 0..15 (any strides) -> data uint8 [N/16, K/8, 16, 4]."""
    n, k = codes.shape
    c = codes.to(torch.uint8).reshape(n // ROWS, ROWS, k // 8, 2, 4)
    byte = c[:, :, :, 0] | (c[:, :, :, 1] << 4)  # [N/16, 16, K/8, 4]
    return byte.permute(0, 2, 1, 3).contiguous()


def pack_kwords(kwords: Tensor) -> Tensor:
    """The same bytes from GPTQ's words (int32 [K/8, N]: nibble j of word c is column 8c + j), whose
    word c is exactly chunk c: byte p = nibble p | nibble 4 + p << 4."""
    k8, n = kwords.shape
    kw = kwords.contiguous()
    out = torch.empty(k8, n, 4, dtype=torch.uint8)
    for p in range(4):
        lo = torch.bitwise_and(torch.bitwise_right_shift(kw, 4 * p), 15)
        hi = torch.bitwise_and(torch.bitwise_right_shift(kw, 16 + 4 * p), 15)
        out[:, :, p] = (lo | (hi << 4)).to(torch.uint8)
    return out.view(k8, n // ROWS, ROWS, 4).permute(1, 0, 2, 3).contiguous()


def pack_scales(scales: Tensor, zeros: Tensor, dtype: torch.dtype) -> Tensor:
    """scales, integer zeros [N, K/G] -> sm [N/16, K/G, 2, 16] (int16 bf16 bits, or float32)."""
    n, groups = scales.shape
    sm = torch.stack([scales, -zeros * scales], dim=1)  # [N, 2, K/G]
    sm = sm.view(n // ROWS, ROWS, 2, groups).permute(0, 3, 2, 1).contiguous()
    return sm.to(torch.bfloat16).view(torch.int16) if dtype == torch.bfloat16 else sm.float()


def sm_numpy(sm: Tensor) -> np.ndarray:
    return sm.view(torch.uint16).numpy() if sm.dtype == torch.int16 else sm.numpy()


# ---------------------------------------------------------------------- the products


def _c_functions():
    """The kernel's two entry points as ctypes functions numba can call from compiled code."""
    lib = _library()
    if lib is None:
        raise RuntimeError("the native int4 kernel is not built (check native.available() first)")
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    quantize = lib.clover_quantize_rows
    quantize.argtypes, quantize.restype = [ptr, ctypes.c_int, i64, i64, i64, ptr, ptr, ptr], None
    rows = lib.clover_int4_rows
    rows.argtypes = [ptr, ptr, ctypes.c_int, i64, i64, ptr, ptr, ptr, i64, ptr, i64, i64, i64]
    rows.restype = None
    bf16 = lib.clover_bf16_rows
    bf16.argtypes, bf16.restype = [ptr, i64, ptr, i64, ptr, i64, i64, i64], None
    return quantize, rows, bf16


@functools.cache
def kernels():
    """(quantize, matmul, rows): numba functions over the C entry points, compiled on first use."""
    c_quantize, c_rows, _ = _c_functions()

    @njit(inline="always")
    def quantize(x, group):
        """x [M, K] (C-contiguous) float32, or bf16 bits as uint16 -> (xq int8 [M, K], dx [M, K/32],
        xs [M, K/G])."""
        m, k = x.shape
        xq = np.empty((m, k), np.int8)
        dx = np.empty((m, k // XBLOCK), np.float32)
        xs = np.empty((m, k // group), np.float32)
        bf16 = 1 if x.itemsize == 2 else 0
        c_quantize(x.ctypes.data, bf16, m, k, group, xq.ctypes.data, dx.ctypes.data, xs.ctypes.data)
        return xq, dx, xs

    @njit(inline="always")
    def rows(data, sm, sm_f32, group, xq, dx, xs, out, b0, b1):
        """out [M, N] (C-contiguous) rows' blocks b0..b1 of one matrix (data [N/16, K/8, 16, 4])."""
        k = data.shape[1] * 8
        c_rows(
            data.ctypes.data, sm.ctypes.data, sm_f32, k, group, xq.ctypes.data, dx.ctypes.data,
            xs.ctypes.data, xq.shape[0], out.ctypes.data, out.shape[1], b0, b1,
        )  # fmt: skip

    @njit(parallel=True, cache=False)
    def matmul(data, sm, sm_f32, group, x, out):
        xq, dx, xs = quantize(x, group)
        blocks = data.shape[0]
        tasks = (blocks + TASK_BLOCKS - 1) // TASK_BLOCKS
        for t in prange(tasks):
            rows(
                data, sm, sm_f32, group, xq, dx, xs, out, t * TASK_BLOCKS, min(blocks, (t + 1) * TASK_BLOCKS)
            )

    return quantize, matmul, rows


def activations(x: Tensor) -> np.ndarray:
    """x as the kernel reads it: bf16 bits (uint16) as they are, any other dtype as float32."""
    if x.dtype == torch.bfloat16:
        return x.contiguous().view(torch.uint16).numpy()
    return x.float().contiguous().numpy()


def matmul(x: Tensor, data: Tensor, sm: Tensor, group: int) -> Tensor:
    """x [M, K] (any float dtype) @ W.T -> float32 [M, N] for one int4v matrix."""
    xn = activations(x)
    out = np.empty((xn.shape[0], data.shape[0] * ROWS), np.float32)
    _, run, _ = kernels()
    with torch_threads():
        run(data.numpy(), sm_numpy(sm), int(sm.dtype == torch.float32), group, xn, out)
    return torch.from_numpy(out)


BF16_MAX_ROWS = 6  # more rows of x: torch's bf16 mm is as fast (measured: 8 rows 28.6 ms vs 25.6)
BF16_TASK_ROWS = 256


@functools.cache
def _bf16_kernel():
    c_bf16 = _c_functions()[2]

    @njit(parallel=True, cache=False)
    def run(w, x, out):
        n, k = w.shape
        tasks = (n + BF16_TASK_ROWS - 1) // BF16_TASK_ROWS
        for t in prange(tasks):
            hi = min(n, (t + 1) * BF16_TASK_ROWS)
            c_bf16(
                w.ctypes.data,
                k,
                x.ctypes.data,
                x.shape[0],
                out.ctypes.data,
                out.shape[1],
                t * BF16_TASK_ROWS,
                hi,
            )

    return run


def bf16_takes(x: Tensor, weight: Tensor) -> bool:
    """Can `bf16_linear(x, weight)` run? (bf16 contiguous [N, K] on CPU, K % 32, 1-6 rows of x)."""
    rows = x.numel() // x.shape[-1] if x.dim() else 0
    return (
        weight.device.type == "cpu"
        and weight.dtype == x.dtype == torch.bfloat16
        and weight.dim() == 2
        and weight.is_contiguous()
        and weight.shape[1] % 32 == 0
        and 0 < rows <= BF16_MAX_ROWS
    )


def bf16_linear(x: Tensor, weight: Tensor) -> Tensor:
    """x [..., K] bf16 @ weight.T (bf16 [N, K]) -> bf16, the sums in float32."""
    flat = x.reshape(-1, x.shape[-1]).contiguous()
    out = np.empty((flat.shape[0], weight.shape[0]), np.float32)
    with torch_threads():
        _bf16_kernel()(weight.view(torch.uint16).numpy(), flat.view(torch.uint16).numpy(), out)
    return torch.from_numpy(out).to(x.dtype).view(*x.shape[:-1], weight.shape[0])
