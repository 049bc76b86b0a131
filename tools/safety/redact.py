"""Keep API keys and tokens out of trajectories, logs and session files.

`redact(text)` replaces well-known key formats, secret-looking assignments, Bearer/Basic
credentials, private key blocks and every value passed to `register_secret` (e.g. the configured
API key) with `[REDACTED]`. `redact_obj` does the same through dicts, lists and tuples, and blanks
any string stored under a secret-looking key (`api_key`, `token`, `password`, ...).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

MARK = "[REDACTED]"
_MIN_SECRET = 6  # shorter registered values would blank ordinary words

_KEY_WORDS = (
    r"(?:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret|"
    r"secret|token|passw(?:or)?d|pwd|credentials?)"
)
_SECRET_KEY = re.compile(rf"(?i)^[\w.-]*{_KEY_WORDS}s?$")  # ends with it: not `tokenizer`

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # PEM private key blocks (RSA, EC, OPENSSH, ENCRYPTED, PGP ...)
    (
        re.compile(
            r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY( BLOCK)?-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|\Z)",
            re.S,
        ),
        MARK,
    ),
    (re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{16,}"), MARK),  # Anthropic
    (re.compile(r"\bsk-(?=[A-Za-z0-9_\-]*[0-9])[A-Za-z0-9_\-]{16,}"), MARK),  # OpenAI and look-alikes
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), MARK),  # GitHub tokens
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), MARK),
    (re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}"), MARK),  # GitLab
    (re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"), MARK),  # AWS access key ids
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}"), MARK),  # Hugging Face
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"), MARK),  # Slack
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"), MARK),  # Google API keys
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), MARK),  # JWTs
    (
        re.compile(r"\b([Bb]earer|BEARER)(\s+)(?=[A-Za-z0-9\-._~+/]*[0-9])[A-Za-z0-9\-._~+/]{8,}=*"),
        rf"\1\2{MARK}",
    ),
    (re.compile(r"\b(Basic)(\s+)[A-Za-z0-9+/]{16,}={0,2}"), rf"\1\2{MARK}"),
    # URL credentials: https://user:secret@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+:)([^\s@/]{3,})(@)"), rf"\1{MARK}\3"),
]
# NAME = value / "name": "value" / name: value, where NAME looks secret and the value looks like a
# credential (8+ token characters with a letter and a digit), so `token: str` or
# `max_tokens=1024` survive; the shell's PWD and OLDPWD (a directory, not a password) too.
_ASSIGN = re.compile(
    rf"(?i)(\b(?!(?-i:(?:OLD)?PWD)\b)[\w.-]*{_KEY_WORDS}s?[\"']?\s*(?:=|:|:=|=>)\s*[\"']?)"
    r"((?=[A-Za-z0-9_\-./+=]*[0-9])(?=[A-Za-z0-9_\-./+=]*[A-Za-z])[A-Za-z0-9_\-./+=]{8,})"
)

_lock = threading.Lock()
_registered: list[str] = []


def register_secret(value: str | None) -> None:
    """Redact this exact value from now on (the configured API key, a token read from a file)."""
    if not isinstance(value, str):
        return
    value = value.strip()
    if len(value) < _MIN_SECRET:
        return
    with _lock:
        if value not in _registered:
            _registered.append(value)
            _registered.sort(key=len, reverse=True)  # longest first: no partial leftovers


def clear_registered() -> None:
    with _lock:
        _registered.clear()


def redact(text: str) -> str:
    if not isinstance(text, str) or not text:
        return text
    with _lock:
        values = list(_registered)
    for value in values:
        if value in text:
            text = text.replace(value, MARK)
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return _ASSIGN.sub(lambda m: m.group(1) + MARK, text)


def redact_obj(obj: Any) -> Any:
    """A redacted copy of a JSON-like value; the input is not modified."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if isinstance(k, str) and isinstance(v, str) and v and _SECRET_KEY.match(k) and not _harmless(v):
                out[k] = MARK
            else:
                out[k] = redact_obj(v)
        return out
    if isinstance(obj, list):
        return [redact_obj(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(redact_obj(v) for v in obj)
    return obj


def _harmless(value: str) -> bool:
    """Values under secret-looking keys that are clearly not secrets (placeholders, env refs)."""
    v = value.strip()
    return v in (MARK, "", "none", "null", "EMPTY", "dummy") or v.startswith("$") or v.startswith("${")


# Environment variables that hold credentials: the model's own API key and the usual token names.
# Commands the agent runs never see them (a model could print `env`); pass one on purpose by
# giving LocalEnvironment an explicit `env`.
_SECRET_ENV = re.compile(
    r"(?i)^(CLOVER_API_KEY|OPENAI_\w+|ANTHROPIC_\w+|AZURE_OPENAI_\w+|HF_TOKEN|HUGGING_FACE_HUB_TOKEN"
    r"|\w*_API_?KEY|\w*_TOKEN|\w*_SECRET|\w*_SECRET_KEY|\w*_SECRET_ACCESS_KEY|\w*_PASSWORD|\w*_PASSWD"
    r"|\w*_CREDENTIALS?|\w*_PRIVATE_KEY)$"
)
_PUBLIC_ENV = frozenset({"OPENAI_BASE_URL", "OPENAI_API_BASE", "GIT_TERMINAL_PROMPT"})


def is_secret_env(name: str, value: str = "") -> bool:
    """A credential by its name, or by its value (a registered secret such as the API key)."""
    if name in _PUBLIC_ENV:
        return False
    if _SECRET_ENV.match(name):
        return True
    with _lock:
        return bool(value) and value.strip() in _registered


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of `env` without credentials (see `is_secret_env`)."""
    return {k: v for k, v in env.items() if not is_secret_env(k, v)}
