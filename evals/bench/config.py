"""`clover bench`'s options: the run's configuration, checked before any work, the agent settings it
gives each decoder, and the parsers of the options' text forms."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from clover.evals.bench.stats import Decoder
from clover.evals.bench.workspace import pinned_work_dir
from clover.model.config import CloverConfig
from clover.settings import DECODE_ORDERS

MODES = ("agent", "gold", "empty")
SPLITS = ("heldout", "handwritten", "frozen")


class BenchError(Exception):
    """A bad option or an unusable model; the message is one line for the user."""


@dataclass
class BenchConfig:
    out: Path
    model: str = "embedded"
    count: int = 20
    seed: int = 0
    block_sizes: list[int] = field(default_factory=lambda: [0, 1])  # 0: the checkpoint's own
    threshold: float = 0.9
    max_steps: int = 12
    max_tokens: int = 4096  # per assistant turn
    time_limit: float = 1800.0  # per task
    workers: int = 1
    device: str | None = None
    think: bool = True
    mode: str = "agent"  # agent | gold | empty
    test_timeout: float = 120.0
    split: str = "heldout"
    keep_workspaces: bool = False
    work_dir: Path | None = None  # where the agents work (workspace.py); None: a fresh temporary directory
    grounding: list[bool] = field(default_factory=lambda: [True])  # grounded tool values; [True, False]: both
    order: str = "auto"  # decode_order of the diffusion decoders; auto: the checkpoint's own
    drafts: int | None = None  # the drafts setting (context drafts' n-gram length, 0 off); None: the default
    stable_timings: bool = False  # test durations in command output written as a fixed one (stable.py)
    fused_rounds: bool = False  # verify decoders: one forward per round (model/decoder/verify.py)
    test_guard: bool = True  # `clover fix`'s test guard (test_guard.py); off: the model's change as it is
    extra: dict[str, str] = field(default_factory=dict)  # --set KEY=VALUE: further agent settings

    def __post_init__(self) -> None:
        # Work trees are cloned and graded with other working directories: a relative --out
        # (the default, runs/bench) made every task a "harness error".
        self.out = Path(self.out).absolute()
        self.work_dir = Path(self.work_dir).absolute() if self.work_dir else pinned_work_dir()

    def labels(self) -> dict[str, str]:
        """How the figures were taken, for the summary: real timings and paths, or fixed ones."""
        return {
            "timings": "fixed (stable.py: every duration 0.01s)" if self.stable_timings else "real",
            "work_dir": f"pinned: {self.work_dir}"
            if self.work_dir
            else "fresh temporary directory (real paths)",
            "test_guard": "on (a change breaking a passing test is reported; the embedded model's rolled back)"
            if self.test_guard
            else "off",
        }

    def decoders(self) -> list[Decoder]:
        return [Decoder(b, self.threshold, g, self.order) for g in self.grounding for b in self.block_sizes]

    def settings(self, decoder: Decoder):
        """The agent's settings for one decoder: `clover fix --yes` with this block size."""
        from clover.settings import Settings, SettingsError

        values = {
            "model": self.model,
            "mode": "yolo",
            "max_steps": self.max_steps,
            "max_tokens": self.max_tokens,
            "time_limit": self.time_limit,
            "block_size": decoder.block_size,
            "threshold": decoder.threshold,
            "decode_order": decoder.order,
            "think": self.think,
            "device": self.device,
            "temperature": 0.0,
            "grounded": decoder.grounded,
            "checkpoints": False,  # undo snapshots would fill ~/.cache for throwaway clones
            "drafts": self.drafts,  # None: the setting's default
            "fused_rounds": self.fused_rounds,
        }
        # a key the bench set from one of its options (None: left to the setting's default, so
        # `clover bench`, which has no --drafts, can still take `--set drafts=0`)
        owned = sorted(k for k in self.extra if values.get(k) is not None)
        if owned:
            raise BenchError(f"--set {owned[0]}: the bench sets it (use its own option)")
        try:
            return Settings().merged({**values, **self.extra}, "bench --set")
        except SettingsError as exc:
            raise BenchError(str(exc)) from None

    def validate(self) -> None:
        if self.mode not in MODES:
            raise BenchError(f"--oracle must be gold or empty, not {self.mode!r}")
        for name in ("count", "max_steps", "max_tokens", "workers"):
            if getattr(self, name) < 1:
                raise BenchError(f"--{name.replace('_', '-')} must be >= 1")
        if not self.block_sizes or any(b < 1 for b in self.block_sizes):
            raise BenchError("--block-size needs block sizes >= 1, e.g. 32,1")
        if len(set(self.block_sizes)) != len(self.block_sizes):
            raise BenchError("--block-size lists a block size twice")
        if not 0.0 <= self.threshold <= 1.0:
            raise BenchError("--threshold must be between 0 and 1")
        if self.split not in SPLITS:
            raise BenchError(f"--split must be one of {', '.join(SPLITS)}")
        if self.order not in DECODE_ORDERS:
            raise BenchError(f"--order must be one of {', '.join(DECODE_ORDERS)}")
        if not self.grounding or len(set(self.grounding)) != len(self.grounding):
            raise BenchError("--grounding takes on, off or on,off")
        for d in self.decoders():
            self.settings(d)


def parse_block_sizes(text: str) -> list[int]:
    """`model,1` -> [0, 1]: 0 stands for the checkpoint's own block size (resolve_model_defaults)."""
    parts = [x for x in text.replace(" ", "").split(",") if x]
    sizes = [0 if x == "model" else int(x) if x.isdigit() and int(x) >= 1 else -1 for x in parts]
    if not sizes or -1 in sizes:
        raise BenchError(
            f"--block-size takes block sizes >= 1 or `model`, like model,1 or 32,1, not {text!r}"
        )
    return sizes


def resolve_model_defaults(cfg: BenchConfig) -> None:
    """Block size 0 and order `auto` become the checkpoint's own (its config.json decode_block_size,
    else block_size, and decode_order: what `clover fix` decodes with by default), so every row
    names what it ran."""
    if 0 not in cfg.block_sizes and cfg.order != "auto":
        return
    model_config = CloverConfig()  # a scripted model: the config's defaults
    if cfg.mode == "agent" and not cfg.model.startswith("scripted:"):
        from clover.backends.local import checkpoint_dir
        from clover.core.stops import ModelError

        try:  # as the loader reads it (an autoregressive Hugging Face checkpoint has block size 1)
            model_config = CloverConfig.load(checkpoint_dir(cfg.model) / "config.json")
        except (OSError, ValueError, ModelError) as exc:
            raise BenchError(f"cannot read the checkpoint's config.json: {exc}") from None
    block, order = model_config.default_block(), model_config.decode_order
    # `model,1` on a checkpoint whose own default is B = 1 is one decoder, not a repeated one
    cfg.block_sizes = list(dict.fromkeys(b or block for b in cfg.block_sizes))
    if cfg.order == "auto":
        cfg.order = order


def parse_grounding(text: str) -> list[bool]:
    """`on`, `off` or `on,off` (both, side by side) -> the grounded flags."""
    flags = {"on": True, "off": False}
    parts = [x.strip().lower() for x in text.split(",") if x.strip()]
    if not parts or any(p not in flags for p in parts):
        raise BenchError(f"--grounding takes on, off or on,off, not {text!r}")
    return [flags[p] for p in parts]


def parse_settings(pairs: list[str]) -> dict[str, str]:
    """`KEY=VALUE` options -> {key: value}; the values are checked as settings later."""
    extra: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise BenchError(f"--set takes KEY=VALUE (a setting, e.g. grounded_spans=off), not {pair!r}")
        extra[key.strip().replace("-", "_")] = value.strip()
    return extra


def model_error_types() -> tuple[type[BaseException], ...]:
    from clover.core.stops import ModelError

    return (BenchError, ModelError, OSError, RuntimeError)
