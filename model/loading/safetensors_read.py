"""Reading safetensors shards one tensor at a time, without a second copy of anything.

The header (8-byte little-endian length, then JSON: dtype, shape, data offsets per tensor; the
format's whole specification) is parsed once per shard. Then each tensor is either
- mapped (`map_tensor`): a view into one private, copy-on-write mapping of the shard, when it is
  wanted on the CPU in its stored dtype. Nothing is copied; its pages come from the page cache when
  first read and count in the process's RSS from then on, once. Writes stay private to the process.
- or read (`read_into` / `read`) with `readinto` straight into the memory that keeps it (the
  fused-expert slice it belongs to) or into one temporary tensor to be cast or moved to a GPU.
Unlike safetensors' `safe_open`, nothing else stays mapped: a read tensor leaves no file pages behind
in the process, so loading a shard does not cost the shard again.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import BinaryIO, NamedTuple

import torch
from torch import Tensor

DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
}
MAX_HEADER = 100 << 20  # the format's own limit


class SafetensorsError(ValueError):
    """A malformed or truncated file; one line."""


class TensorInfo(NamedTuple):
    dtype: torch.dtype
    shape: tuple[int, ...]
    start: int  # absolute offset in the file
    nbytes: int


def read_header(path: Path) -> dict[str, TensorInfo]:
    size = path.stat().st_size
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise SafetensorsError("file shorter than its 8-byte header length")
        n = int.from_bytes(raw, "little")
        if n > min(MAX_HEADER, size - 8):
            raise SafetensorsError(f"header length {n} exceeds the file ({size} bytes)")
        try:
            header = json.loads(f.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise SafetensorsError(f"bad header ({e})") from None
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")
    base, out = 8 + n, {}
    for key, meta in header.items():
        if key == "__metadata__":
            continue
        try:
            dtype = DTYPES[meta["dtype"]]
            shape = tuple(int(s) for s in meta["shape"])
            begin, end = (int(x) for x in meta["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError(f"{key}: bad entry {meta!r:.80}") from None
        want = math.prod(shape) * torch.tensor([], dtype=dtype).element_size()
        if end - begin != want or begin < 0:
            raise SafetensorsError(f"{key}: {end - begin} bytes for shape {list(shape)} {meta['dtype']}")
        if base + end > size:
            raise SafetensorsError(f"{key} runs past the end of the file (truncated?)")
        out[key] = TensorInfo(dtype, shape, base + begin, want)
    return out


def read_into(f: BinaryIO, info: TensorInfo, out: Tensor) -> Tensor:
    """Fill the contiguous CPU tensor `out` (info's dtype and size) with the tensor's bytes."""
    if out.dtype != info.dtype or out.numel() != math.prod(info.shape) or not out.is_contiguous():
        raise ValueError("read_into needs a contiguous tensor of the stored dtype and size")
    if info.nbytes == 0:
        return out
    view = memoryview(out.reshape(-1).view(torch.uint8).numpy())
    f.seek(info.start)
    done = 0
    while done < info.nbytes:
        n = f.readinto(view[done:])
        if not n:
            raise SafetensorsError("file ended inside a tensor (truncated?)")
        done += n
    return out


def read(f: BinaryIO, info: TensorInfo) -> Tensor:
    return read_into(f, info, torch.empty(info.shape, dtype=info.dtype))


class ShardMaps:
    """One private mapping per shard, made on first use and shared by the tensors viewed into it."""

    def __init__(self) -> None:
        self._storages: dict[Path, torch.UntypedStorage] = {}

    def can_map(self, info: TensorInfo) -> bool:
        return info.nbytes > 0 and info.start % torch.tensor([], dtype=info.dtype).element_size() == 0

    def map_tensor(self, path: Path, info: TensorInfo) -> Tensor:
        storage = self._storages.get(path)
        if storage is None:
            storage = torch.UntypedStorage.from_file(str(path), shared=False, nbytes=path.stat().st_size)
            self._storages[path] = storage
        size = torch.tensor([], dtype=info.dtype).element_size()
        out = torch.empty(0, dtype=info.dtype)
        return out.set_(storage, info.start // size, info.shape)
