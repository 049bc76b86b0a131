"""tools/safety/redact.py: planted keys vanish, ordinary text survives."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clover.tools.safety.redact import MARK, clear_registered, redact, redact_obj, register_secret

PLANTED = {
    "openai": "sk-proj-Ab3dEf6hIj9kLmN0pQrStUvWxYz12345",
    "openai_legacy": "sk-1234567890abcdefghijklmnopqrstuvwxyzABCDEFGH",
    "anthropic": "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_abc",
    "github": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "github_fine": "github_pat_11ABCDEFG0abcdefghijkl_" + "x" * 59,
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "hf": "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "google": "AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
}


@pytest.fixture(autouse=True)
def _clean_registry():
    clear_registered()
    yield
    clear_registered()


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_planted_keys_are_redacted(kind):
    key = PLANTED[kind]
    text = f"the model printed {key} in its output\nand again: '{key}'"
    out = redact(text)
    assert key not in out and out.count(MARK) == 2
    assert out.startswith("the model printed ")


@pytest.mark.parametrize(
    "text,secret",
    [
        ("Authorization: Bearer abcDEF123456.ghi-jkl_789", "abcDEF123456.ghi-jkl_789"),
        ("curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZDEyMw=='", "dXNlcjpwYXNzd29yZDEyMw=="),
        ("export OPENAI_API_KEY=abc123def456ghi789", "abc123def456ghi789"),
        ('{"api_key": "Zx81kq02mnbv77"}', "Zx81kq02mnbv77"),
        ("token: 9f8e7d6c5b4a3f2e1d0c", "9f8e7d6c5b4a3f2e1d0c"),
        ("password='hunter2hunter2'", "hunter2hunter2"),
        ("GITHUB_TOKEN := v1.abc123xyz789", "v1.abc123xyz789"),
        ("git clone https://bob:s3cretPassw0rd@github.com/x/y", "s3cretPassw0rd"),
        ("client_secret=AbC123dEf456", "AbC123dEf456"),
    ],
)
def test_assignments_and_headers(text, secret):
    out = redact(text)
    assert secret not in out and MARK in out


def test_private_key_block():
    block = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAA\n-----END OPENSSH PRIVATE KEY-----"
    out = redact(f"key file:\n{block}\nafter")
    assert "b3BlbnNzaC1rZXktdjEAAAAA" not in out and out.endswith("after") and out.startswith("key file:")


def test_registered_secret_anywhere():
    register_secret("plain-words-key")
    register_secret("abc")  # too short to register: would blank ordinary text
    out = redact("connecting with plain-words-key to abc.example")
    assert "plain-words-key" not in out and "abc.example" in out


def test_ordinary_text_and_code_survive():
    text = (
        "def tokenize(text: str, max_tokens=1024) -> list[str]:\n    token: str = next_token()\n"
        "tokenizer_path = 'model/tokenizer.json'\npassword = getpass()\nThe bearer of this letter.\n"
        "sk-learn is not a key; git sha 3f2a1b0c9d8e7f6a5b4c; https://example.com/a:b@c"
    )
    assert redact(text) == text


def test_redact_obj_is_recursive_and_does_not_mutate():
    key = PLANTED["openai"]
    obj = {
        "messages": [{"role": "user", "content": f"use {key}"}],
        "config": {
            "api_key": "short1",
            "model": "x",
            "tokenizer": "tok/v2.json",
            "max_tokens": 100,
            "nested": ({"GITHUB_TOKEN": "anything-at-all"},),
        },
        "base_url_env": "$OPENAI_API_KEY",
    }
    snapshot = json.dumps(obj, default=list)
    out = redact_obj(obj)
    assert json.dumps(obj, default=list) == snapshot
    assert key not in json.dumps(out, default=list)
    assert out["config"]["api_key"] == MARK and out["config"]["nested"][0]["GITHUB_TOKEN"] == MARK
    assert out["config"]["tokenizer"] == "tok/v2.json" and out["config"]["max_tokens"] == 100
    assert out["base_url_env"] == "$OPENAI_API_KEY"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_idempotent_and_never_raises(text):
    once = redact(text)
    assert redact(once) == once


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40), st.sampled_from(sorted(PLANTED.values())), st.text(max_size=40))
def test_planted_key_never_survives_surroundings(before, key, after):
    assert key not in redact(before + " " + key + " " + after)


def test_scrub_env_drops_credentials_and_keeps_the_rest():
    from clover.tools.safety.redact import scrub_env

    env = {
        "PATH": "/bin",
        "HOME": "/h",
        "OPENAI_API_KEY": "sk-x",
        "OPENAI_BASE_URL": "http://b",
        "CLOVER_API_KEY": "k",
        "ANTHROPIC_API_KEY": "a",
        "GITHUB_TOKEN": "g",
        "AWS_SECRET_ACCESS_KEY": "s",
        "DB_PASSWORD": "p",
        "HF_TOKEN": "h",
        "MY_SERVICE_API_KEY": "m",
        "TOKENIZERS_PARALLELISM": "false",
        "OTHER": "plain-but-registered-value",
    }
    register_secret("plain-but-registered-value")
    kept = scrub_env(env)
    assert set(kept) == {"PATH", "HOME", "OPENAI_BASE_URL", "TOKENIZERS_PARALLELISM"}


def test_the_shell_inherits_no_credentials(monkeypatch, tmp_path):
    """`env` must not print OPENAI_API_KEY: the variable is not there to print."""
    from clover.tools.environment import LocalEnvironment

    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-abcdefabcdef123456")
    monkeypatch.setenv("CI_DEPLOY_TOKEN", "tok-abcdef")
    monkeypatch.setenv("CLOVER_SAFE_MARKER", "visible")
    out = LocalEnvironment(str(tmp_path)).execute("env").output
    assert "OPENAI_API_KEY" not in out and "CI_DEPLOY_TOKEN" not in out
    assert "CLOVER_SAFE_MARKER" not in out  # an allowlist, not a list of secret names
    listed = LocalEnvironment(str(tmp_path), pass_env=["CLOVER_SAFE_*"]).execute("env").output
    assert "CLOVER_SAFE_MARKER=visible" in listed
    explicit = LocalEnvironment(str(tmp_path), env={"PATH": "/usr/bin:/bin", "MY_TOKEN": "given"})
    assert "MY_TOKEN=given" in explicit.execute("env").output  # passed on purpose: kept


def test_the_shells_working_directory_is_not_a_password():
    """`env` printed `PWD=[REDACTED]` (the name ends in a key word): PWD and OLDPWD are directories."""
    out = redact("PWD=/tmp/pytest-1/test_x0\nOLDPWD=/home/u/proj2024\nMYSQL_PWD=abc123def\npwd: s3cr3tpass1")
    assert "PWD=/tmp/pytest-1/test_x0" in out and "OLDPWD=/home/u/proj2024" in out
    assert "abc123def" not in out and "s3cr3tpass1" not in out
