"""The byte-level BPE tokenizer builder: reserved tokens, exact round trips, determinism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from clover.model.training.tokenizer_build import (
    ALL_ADDED,
    CONTROL_TOKENS,
    MARKUP_TOKENS,
    main,
    read_texts,
    stdlib_sources,
    train_tokenizer,
)

CORPUS_BYTES = 250_000


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return train_tokenizer(read_texts(stdlib_sources(seed=0, max_bytes=CORPUS_BYTES)), vocab_size=500)


def test_vocab_size_and_reserved_ids(tok):
    assert tok.get_vocab_size() == 500
    assert [tok.token_to_id(t) for t in ALL_ADDED] == list(range(len(ALL_ADDED)))


def test_added_tokens_are_single_ids_in_context(tok):
    for token in ALL_ADDED:
        ids = tok.encode(f"x{token}y = 1\n").ids
        assert tok.token_to_id(token) in ids
        assert tok.decode(ids, skip_special_tokens=False) == f"x{token}y = 1\n"
    call = "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>"
    enc = tok.encode(call)
    for token in ("<tool_call>", "<function=", "<parameter=", "</parameter>", "</function>", "</tool_call>"):
        assert enc.tokens.count(token) == 1


def test_control_tokens_are_skippable_markup_is_not(tok):
    text = "<|im_start|>assistant\n<think>\nok</think>\ndone<|im_end|><|mask|><|endoftext|>"
    decoded = tok.decode(tok.encode(text).ids, skip_special_tokens=True)
    assert all(t not in decoded for t in CONTROL_TOKENS)
    assert "<think>" in decoded and "</think>" in decoded
    assert all(t not in CONTROL_TOKENS for t in MARKUP_TOKENS)


def test_merges_compress_python(tok):
    source = "def main(argv):\n    return self.value + len(argv)\n"
    assert len(tok.encode(source).ids) < len(source.encode()) * 0.6


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_round_trip_arbitrary_unicode(tok, text):
    assert tok.decode(tok.encode(text).ids, skip_special_tokens=False) == text


_PIECES = ["<think>", "<|mask|>", "</parameter>", "<function=", "é", "😀", " ", "\n", "a", "1", "<", "=", "|"]


@given(text=st.lists(st.sampled_from(_PIECES), max_size=30).map("".join))
@settings(max_examples=100, deadline=None)
def test_round_trip_around_added_tokens(tok, text):
    assert tok.decode(tok.encode(text).ids, skip_special_tokens=False) == text


def test_same_seed_same_tokenizer():
    def build(seed: int) -> str:
        files = stdlib_sources(seed=seed, max_bytes=120_000)
        return train_tokenizer(read_texts(files), vocab_size=400).to_str()

    assert build(3) == build(3)
    assert stdlib_sources(seed=3, max_bytes=120_000) != stdlib_sources(seed=4, max_bytes=120_000)


def test_cli_builds_and_saves(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello world, hello tokens\n" * 50 + "naïve café 数据\n" * 20, encoding="utf-8")
    out = tmp_path / "w" / "tokenizer.json"
    assert main(["--no-stdlib", "--vocab-size", "300", "--out", str(out), str(corpus)]) == 0
    loaded = Tokenizer.from_file(str(out))
    assert loaded.token_to_id("<|mask|>") == 3
    assert loaded.decode(loaded.encode("café <think>").ids, skip_special_tokens=False) == "café <think>"
    assert "tokens" in capsys.readouterr().out


def test_bad_input_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as missing:
        main(["--no-stdlib", "--out", str(tmp_path / "t.json"), str(tmp_path / "nope.txt")])
    assert missing.value.code == 2 and "not a file" in capsys.readouterr().err
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(["abc"], vocab_size=100)


def test_ids_agree_with_the_chat_format():
    from clover.model.text.chat import SPECIAL_TOKENS as CHAT_TOKENS  # ids 0..9

    # model/text/chat.py's token list maps to ids 0..n-1 in a tokenizer built here.
    assert list(ALL_ADDED[: len(CHAT_TOKENS)]) == list(CHAT_TOKENS)
