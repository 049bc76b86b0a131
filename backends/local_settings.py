"""The local decoder's settings: what the CLI's settings say of decoding in-process (block size,
threshold, grounding, ...), which no other backend reads. A dataclass: a turn's TurnOptions are
applied with `dataclasses.replace`, and `with_settings` makes decoders side by side."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LocalSettings:
    model: str = "embedded"  # "embedded" or a checkpoint directory
    think: bool = True
    temperature: float | None = None
    max_tokens: int = 4096
    block_size: int = 0  # 0: the checkpoint's own
    threshold: float = 0.9
    decode_order: str = "auto"  # auto: the checkpoint's own
    device: str | None = None
    quantize: str = "none"
    threads: int = 0  # 0: auto (cpu_threads)
    grounded: bool = True  # paths, old_str and symbols limited to the workspace's own
    copy_bias: float = 4.0
    drafts: int = 3
    fused_rounds: bool = False
    edit_repairs: str = "auto"  # on, off, or auto: the checkpoint's config.json
    grounded_spans: str = "auto"

    @classmethod
    def of(cls, settings: Any) -> LocalSettings:
        """The local knobs of the run's settings (a dataclass such as the CLI's `Settings`, or a
        LocalSettings); fields it does not have keep their defaults."""
        if isinstance(settings, LocalSettings):
            return settings
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(settings).items() if k in names})


__all__ = ["LocalSettings"]
