"""Clover's tokenizer: a thin wrapper over a `tokenizers` tokenizer.json plus the checkpoint's chat
template. Torch-free.

Special tokens (`<|im_start|>`, `<think>`, `<tool_call>`, ...) written in the prompt text are
recognised as single tokens; decoding keeps them, so the chat parser sees the markup.
"""

from __future__ import annotations

import json
from pathlib import Path

from clover.model.text.chat import SPECIAL_TOKENS

TOKENIZER_FILE = "tokenizer.json"


class TokenizerError(ValueError):
    """A missing or unreadable tokenizer file; the message is one line."""


class CloverTokenizer:
    def __init__(self, tokenizer, chat_template: str | None = None) -> None:
        self._tok = tokenizer  # tokenizers.Tokenizer
        self.chat_template = chat_template
        self._piece_cache: dict[int, str] = {}

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_file(cls, path: str | Path, chat_template: str | None = None) -> CloverTokenizer:
        from tokenizers import Tokenizer

        p = Path(path)
        if not p.is_file():
            raise TokenizerError(f"{p}: tokenizer file not found")
        try:
            tok = Tokenizer.from_file(str(p))
        except Exception as exc:  # tokenizers raises a bare Exception on malformed JSON
            raise TokenizerError(f"{p}: not a valid tokenizer.json ({str(exc).splitlines()[0]})") from None
        return cls(tok, chat_template)

    @classmethod
    def from_dir(cls, directory: str | Path) -> CloverTokenizer:
        d = Path(directory)
        return cls.from_file(d / TOKENIZER_FILE, read_chat_template(d))

    def save(self, directory: str | Path) -> None:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self._tok.save(str(d / TOKENIZER_FILE))
        if self.chat_template is not None:
            (d / "chat_template.jinja").write_text(self.chat_template, encoding="utf-8")

    # ------------------------------------------------------------------ ids and text

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def check_fits(self, vocab_size: int, where: str = "tokenizer") -> None:
        """Refuse a tokenizer with ids the model has no embedding row for (else an IndexError at
        the first such token, mid-conversation). Fewer ids than rows is usual (padded tables)."""
        top = max(self._tok.get_vocab(with_added_tokens=True).values(), default=-1)
        if top >= vocab_size:
            raise TokenizerError(
                f"{where}: the tokenizer has ids up to {top}, beyond the model's vocab_size {vocab_size}"
            )

    def token_id(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def special_ids(self) -> dict[str, int]:
        """The chat format's special tokens this vocabulary has, token -> id."""
        out = {}
        for t in SPECIAL_TOKENS:
            i = self._tok.token_to_id(t)
            if i is not None:
                out[t] = i
        return out

    def stop_ids(self) -> list[int]:
        return [i for t in ("<|im_end|>", "<|endoftext|>") if (i := self._tok.token_to_id(t)) is not None]

    def encode(self, text: str) -> list[int]:
        # add_special_tokens=False: no BOS/EOS post-processing; markup in the text still maps to
        # its special token ids.
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def piece(self, token_id: int) -> str:
        """One token as text, for display (a partial UTF-8 sequence shows as U+FFFD)."""
        s = self._piece_cache.get(token_id)
        if s is None:
            s = self._piece_cache[token_id] = self._tok.decode([token_id], skip_special_tokens=False)
        return s


class IncrementalDecoder:
    """Text deltas of a growing id list. A trailing partial UTF-8 sequence is held back."""

    def __init__(self, tokenizer: CloverTokenizer) -> None:
        self.tok = tokenizer
        self.ids: list[int] = []
        self.text = ""

    def push(self, ids: list[int]) -> str:
        self.ids.extend(ids)
        full = self.tok.decode(self.ids)
        if full.endswith("\ufffd"):
            return ""  # wait for the rest of the character
        # byte-level decoding is prefix-stable, so the new text is what follows the old
        delta = full[len(self.text) :]
        self.text = full
        return delta

    def flush(self) -> str:
        full = self.tok.decode(self.ids)
        delta = full[len(self.text) :]
        self.text = full
        return delta


def read_chat_template(directory: str | Path) -> str | None:
    """The checkpoint's jinja2 chat template: chat_template.jinja, else tokenizer_config.json's
    `chat_template` (a string, or a list of named templates where "default" wins)."""
    d = Path(directory)
    jinja = d / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    cfg = d / "tokenizer_config.json"
    if not cfg.is_file():
        return None
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise TokenizerError(f"{cfg}: not valid JSON ({exc})") from None
    tmpl = data.get("chat_template") if isinstance(data, dict) else None
    if isinstance(tmpl, list):
        named = {t.get("name"): t.get("template") for t in tmpl if isinstance(t, dict)}
        tmpl = named.get("default") or next(iter(named.values()), None)
    return tmpl if isinstance(tmpl, str) else None


__all__ = ["CloverTokenizer", "IncrementalDecoder", "TokenizerError", "read_chat_template"]
