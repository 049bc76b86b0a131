"""One settings object: defaults < ~/.config/clover/config.toml < <repo>/.clover/config.toml
< CLOVER_* environment < command-line flags."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from clover.core.compat import tomllib
from clover.core.tool_protocol import MODES
from clover.model.config import DECODE_ORDERS as MODEL_DECODE_ORDERS

# What a repository's own .clover/config.toml may set: a cloned repo must not loosen the user's
# safety settings (mode, allow rules, extra dirs, sandbox), choose the model or backend (a
# `scripted:` file in the repo would drive the agent) or point it at its own server (base_url,
# api_key) unless the user trusts repository configs (trust_repo_config = true). Decoding knobs
# pass; limits pass only when lower; deny/ask rules are added to the user's, never replace them.
REPO_SAFE_KEYS = frozenset(
    {
        "think",
        "temperature",
        "max_tokens",
        "block_size",
        "threshold",
        "decode_order",
        "tool_format",
        "live",
        "threads",
        "copy_bias",
        "edit_repairs",
        "drafts",
        "fused_rounds",
        "grounded_spans",
    }
)
DECODE_ORDERS = ("auto", *MODEL_DECODE_ORDERS)  # auto: the checkpoint's own
REPO_LOWER_ONLY = frozenset({"max_steps", "time_limit", "token_limit", "command_timeout", "output_limit"})
MERGED_LISTS = frozenset({"deny", "ask"})  # a repository's entries are added to the user's
TOOL_FORMATS = ("auto", "native", "text")
QUANTIZE = ("none", "int8", "int4")  # model/loading/load_quant.py QUANTIZE_MODES, without importing torch


class SettingsError(ValueError):
    """An invalid configuration value; the message is one line for the user."""


@dataclass
class Settings:
    # Model: "embedded" (the shipped tiny Clover), a checkpoint directory, "scripted:FILE",
    # or a model name on the OpenAI-compatible server at base_url.
    model: str = "embedded"
    base_url: str | None = None
    api_key: str | None = None
    tool_format: str = "auto"
    think: bool = True
    temperature: float | None = None
    max_tokens: int = 4096  # per assistant turn
    request_timeout: float = 600.0
    context_window: int = 0  # tokens, for an OpenAI-compatible server; 0: what its /v1/models says
    # Local Clover decoding.
    block_size: int = 0  # 0: the checkpoint's own (config.json block_size, the one it scores best with)
    threshold: float = 0.9
    # which positions a round keeps: any confident one, the confident run from the left, the draft's
    # run a causal pass confirms (verify), or auto: the checkpoint's own (config.json decode_order)
    decode_order: str = "auto"
    device: str | None = None
    # local model: quantize the checkpoint's floating-point matrices on load (int4, int8; none: as
    # stored). A quantized checkpoint (GPTQ, AWQ, FP8) loads quantized whatever this says.
    quantize: str = "none"
    threads: int = 0  # CPU threads for local decoding; 0: auto (1 for a small model, torch's default else)
    grounded: bool = True  # local decoding: paths, old_str and symbols limited to the workspace's own
    # local decoding, grounded values: logit bonus for the paths and symbols the conversation names
    # (a copy prior for small models; 0: off)
    copy_bias: float = 4.0
    # local block decoding (B > 1): a masked run whose predictions match what followed the last
    # `drafts` tokens earlier in the context is accepted in one round (model/decoder/drafts.py; 0: off)
    drafts: int = 3
    # local verify decoding: each round's check also denoises a guess of the next round (one forward
    # per round instead of two: fewer forwards; no faster on a CPU, where a wider forward costs more)
    fused_rounds: bool = False
    # local decoding: one-site repairs of old_str are candidates beside the model's own new_str, which
    # stands unless the example verifies another (steering/edit_choice.py; on, off, or auto:
    # the checkpoint's config.json edit_repairs)
    edit_repairs: str = "auto"
    # local decoding, grounded: the answer's `code spans` copy the user's words or tool output (on,
    # off, or auto: the checkpoint's config.json grounded_spans)
    grounded_spans: str = "auto"
    # Agent limits.
    max_steps: int = 50
    time_limit: float = 3600.0
    token_limit: int = 2_000_000
    # Environment.
    command_timeout: float = 120.0
    output_limit: int = 16_000
    # Safety.
    mode: str = "ask"
    allow: list[str] = field(default_factory=list)
    ask: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    add_dirs: list[str] = field(default_factory=list)
    sandbox: bool | None = None  # None: on wherever bubblewrap works (tools/safety/sandbox.py)
    network: bool = False  # inside the sandbox; commands outside it always have the network
    # every program a command starts checked as it starts (seccomp; tools/safety/execguard.py); None: on
    # wherever it works
    exec_check: bool | None = None
    # every command sees the workspace through a copy-on-write layer and only what policy accepts
    # of what it changed is applied (tools/safety/boundary.py); None: on wherever it works
    boundary: bool | None = None
    # environment variables commands get besides PATH, HOME, USER, LANG, LC_*, TERM, TMPDIR, SHELL
    # (names or globs, e.g. ["NPM_CONFIG_*", "AWS_PROFILE"]; tools/safety/commandenv.py)
    pass_env: list[str] = field(default_factory=list)
    # paths under your home shown read-only inside the sandbox, whose home is otherwise empty
    # (e.g. [".cargo", ".gitconfig", ".ssh/known_hosts"])
    sandbox_home: list[str] = field(default_factory=list)
    checkpoints: bool = True
    # the workspace may be (or hold) the home directory or `/` (--allow-home); off: refused at start
    allow_home: bool = False
    trust_repo_config: bool = False  # user-level: let <repo>/.clover/config.toml set anything
    # Interface.
    live: bool = True
    # Notes for the user about ignored settings (not a setting itself).
    notices: list[str] = field(default_factory=list, compare=False)

    def merged(self, values: dict[str, Any], source: str) -> Settings:
        """A copy with `values` applied (None values ignored), each checked and coerced."""
        known = {f.name: f for f in fields(self)}
        updates: dict[str, Any] = {}
        for key, value in values.items():
            name = key.replace("-", "_")
            if value is None:
                continue
            if name not in known or name == "notices":
                raise SettingsError(f"{source}: unknown setting {key!r}")
            updates[name] = _coerce(name, value, getattr(self, name), source)
        new = dataclasses.replace(self, **updates)
        new.validate(source)
        return new

    def validate(self, source: str = "settings") -> None:
        if self.mode not in MODES:
            raise SettingsError(f"{source}: mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.tool_format not in TOOL_FORMATS:
            raise SettingsError(f"{source}: tool_format must be one of {', '.join(TOOL_FORMATS)}")
        for name in ("max_steps", "max_tokens", "token_limit", "output_limit"):
            if getattr(self, name) <= 0:
                raise SettingsError(f"{source}: {name} must be positive")
        if self.block_size < 0:
            raise SettingsError(f"{source}: block_size must be 0 (the model's own) or positive")
        for name in ("time_limit", "command_timeout", "request_timeout"):
            if getattr(self, name) <= 0:
                raise SettingsError(f"{source}: {name} must be positive")
        if self.threads < 0:
            raise SettingsError(f"{source}: threads must be 0 (auto) or positive")
        if self.drafts < 0:
            raise SettingsError(f"{source}: drafts must be 0 (off) or a positive n-gram length")
        if self.copy_bias < 0:
            raise SettingsError(f"{source}: copy_bias must be 0 (off) or positive")
        if not 0.0 <= self.threshold <= 1.0:
            raise SettingsError(f"{source}: threshold must be between 0 and 1")
        for name in ("edit_repairs", "grounded_spans"):
            if getattr(self, name) not in ("auto", "on", "off"):
                raise SettingsError(f"{source}: {name} must be auto, on or off")
        if self.quantize not in QUANTIZE:
            raise SettingsError(
                f"{source}: quantize must be one of {', '.join(QUANTIZE)}, not {self.quantize!r}"
            )
        if self.decode_order not in DECODE_ORDERS:
            raise SettingsError(f"{source}: decode_order must be one of {', '.join(DECODE_ORDERS)}")


def _coerce(name: str, value: Any, current: Any, source: str) -> Any:
    """Coerce strings (environment variables) and check types against the default's type."""
    try:
        if isinstance(current, bool) or name in (
            "think",
            "sandbox",
            "network",
            "checkpoints",
            "live",
            "trust_repo_config",
            "exec_check",
            "boundary",
            "allow_home",
        ):
            if isinstance(value, str):
                low = value.strip().lower()
                if low not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(value)
                return low in ("1", "true", "yes", "on")
            if not isinstance(value, bool):
                raise ValueError(value)
            return value
        if isinstance(current, list):
            if isinstance(value, str):
                return [v.strip() for v in value.split(",") if v.strip()]
            if not isinstance(value, list | tuple):
                raise ValueError(value)
            return [str(v) for v in value]
        if isinstance(current, int) or name in ("max_steps", "max_tokens", "token_limit", "block_size"):
            if isinstance(value, bool):
                raise ValueError(value)
            return int(value)
        if isinstance(current, float) or name in ("temperature", "threshold"):
            if isinstance(value, bool):
                raise ValueError(value)
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise SettingsError(f"{source}: invalid value {value!r} for {name}") from None


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "clover" / "config.toml"


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"{path}: {exc}") from None
    # Permission rules may sit in a [permissions] table.
    perms = data.pop("permissions", {})
    if isinstance(perms, dict):
        data.update(perms)
    return data


def _env_values() -> dict[str, Any]:
    names = {f.name for f in fields(Settings)}
    values = {}
    for key, value in os.environ.items():
        if key.startswith("CLOVER_"):
            name = key[len("CLOVER_") :].lower()
            if name in names:
                values[name] = value
    return values


def _untrusted_repo_values(values: dict[str, Any], current: Settings) -> tuple[dict[str, Any], list[str]]:
    """Keep what a repository may set on its own; a stricter mode, sandbox on, network off pass."""
    kept, ignored = {}, []
    for key, value in values.items():
        name = key.replace("-", "_")
        lower = name in REPO_LOWER_ONLY and _coerce(
            name, value, getattr(current, name), "repository config"
        ) <= getattr(current, name)
        stricter = (
            lower
            or name in MERGED_LISTS
            # an invalid mode is kept so that it fails as one clear error, like any bad value
            or (name == "mode" and (value not in MODES or MODES.index(value) <= MODES.index(current.mode)))
            or (name == "sandbox" and value is True)
            or (name == "exec_check" and value is True)
            or (name == "boundary" and value is True)
            or (name == "network" and value is False)
            or (name == "checkpoints" and value is True)
        )
        if name in REPO_SAFE_KEYS or stricter:
            kept[key] = value
        else:
            ignored.append(key)
    return kept, ignored


def _merge_lists(values: dict[str, Any], current: Settings, source: str) -> dict[str, Any]:
    """Deny/ask rules from a repository extend the user's (`deny = []` cannot wipe them)."""
    out = dict(values)
    for key, value in values.items():
        name = key.replace("-", "_")
        if name in MERGED_LISTS and value is not None:
            have = list(getattr(current, name))
            out[key] = have + [v for v in _coerce(name, value, have, source) if v not in have]
    return out


def load_settings(
    repo: str | Path | None = None, flags: dict[str, Any] | None = None, **defaults: Any
) -> Settings:
    """Layer every source in order. `defaults` are command-specific defaults (e.g. mode="yolo")."""
    settings = Settings().merged(defaults, "defaults")
    settings = settings.merged(_read_toml(user_config_path()), str(user_config_path()))
    if repo is not None:
        repo_cfg = Path(repo) / ".clover" / "config.toml"
        values = _read_toml(repo_cfg)
        if not settings.trust_repo_config:
            values, ignored = _untrusted_repo_values(values, settings)
            if ignored:
                settings = dataclasses.replace(
                    settings,
                    notices=[
                        *settings.notices,
                        f"{repo_cfg}: ignored {', '.join(ignored)} (a repository may only tighten safety; "
                        "set trust_repo_config = true in your own config to allow it)",
                    ],
                )
        settings = settings.merged(_merge_lists(values, settings, str(repo_cfg)), str(repo_cfg))
    settings = settings.merged(_env_values(), "environment")
    if settings.api_key is None:
        settings = dataclasses.replace(settings, api_key=os.environ.get("OPENAI_API_KEY"))
    if settings.base_url is None and os.environ.get("OPENAI_BASE_URL"):
        settings = dataclasses.replace(settings, base_url=os.environ["OPENAI_BASE_URL"])
    return settings.merged(flags or {}, "command line")
