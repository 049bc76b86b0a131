"""Reading a checkpoint's tensors from its shards for the loader (model/loading/load.py): plain tensors as
stored, a quantized weight's companions decoded together (model/loading/quant_formats.py), one expert's
slice of a fused expert tensor, a Qwen3-Next fused projection split by rows (int4 codes included)."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from torch import Tensor

from clover.model.config import CloverConfig
from clover.model.loading.quant_codes import Int4Codes
from clover.model.loading.quant_formats import Part, QuantSource, decode, expert_slice
from clover.model.loading.safetensors_read import TensorInfo, read


class Reader:
    """Tensors read from the shards through one open handle per file; a quantized weight's parts
    decoded together (model/loading/quant_formats.py)."""

    def __init__(self) -> None:
        self._files: dict[Path, BinaryIO] = {}

    def handle(self, path: Path) -> BinaryIO:
        if path not in self._files:
            self._files[path] = open(path, "rb")  # noqa: SIM115 - closed by close()
        return self._files[path]

    def tensor(self, part: Part) -> Tensor:
        return read(self.handle(part.path), part.info)

    def value(self, src: Part | QuantSource) -> Tensor | Int4Codes:
        """A plain tensor as stored, or a quantized weight decoded (Int4Codes, or float32 for fp8)."""
        return decode(src, self.tensor) if isinstance(src, QuantSource) else self.tensor(src)

    def close(self) -> None:
        for f in self._files.values():
            f.close()


def expert_piece(src: Part | QuantSource, e: int) -> Part | QuantSource:
    """Expert e's slice of a fused expert tensor [E, ...]: its bytes are contiguous in the file."""
    if isinstance(src, QuantSource):
        return expert_slice(src, e)
    info, each = src.info, src.info.nbytes // src.info.shape[0]
    return Part(src.path, TensorInfo(info.dtype, info.shape[1:], info.start + e * each, each))


def split_rows(value: Tensor | Int4Codes, split, config: CloverConfig) -> list[Tensor | Int4Codes]:
    """A Qwen3-Next fused projection split by rows (`split_qkvz` / `split_ba`), int4 codes included."""
    if not isinstance(value, Int4Codes):
        return list(split(value, config))
    pieces = zip(*(split(t, config) for t in (value.codes, value.scales, value.zeros)), strict=True)
    return [Int4Codes(c.contiguous(), s.contiguous(), z.contiguous(), value.group_size) for c, s, z in pieces]
