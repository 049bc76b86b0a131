"""The chat a daily user trusts, in a real terminal (tmux): an instruction typed at an approval is the
reply, never keys; a session remembers its backend; a failed request leaves no orphan turn; a long
paste is a placeholder while edited and whole in the scrollback; Ctrl-D leaves while the model loads."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from tests.test_chat_tmux import ROOT, Tmux, _git, pytestmark  # noqa: F401  (skips without tmux)


def _repo(path: Path) -> Path:
    path.mkdir()
    (path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    _git(path, "init", "-q")
    _git(path, "add", ".")
    _git(path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    return path


def _command(tmp_path: Path, repo: Path, *args: str) -> str:
    env = {
        "CLOVER_HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "PYTHONPATH": str(ROOT),
        "TERM": "xterm-256color",
    }
    argv = [sys.executable, "-m", "clover.repl", "--repo", str(repo), *args]
    line = "env -u COLUMNS -u LINES " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    return f'{line} {shlex.join(argv)}; echo "[exited $?]"; sleep 30'


def _script(tmp_path: Path, turns: list[dict], name: str = "script.jsonl") -> Path:
    script = tmp_path / name
    script.write_text("\n".join(json.dumps(t) for t in turns) + "\n")
    return script


def _exit(term: Tmux) -> str:
    term.type("/exit")
    term.send("Enter")
    return term.wait_for("[exited")


def test_an_instruction_typed_at_an_approval_is_the_reply_not_keys(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    pytest_call = {"name": "bash", "arguments": {"command": "python3 -m pytest -q"}}
    later = {"name": "bash", "arguments": {"command": "echo later-call-ran"}}
    script = _script(
        tmp_path, [{"tool_calls": [pytest_call]}, {"tool_calls": [later]}, {"text": "All done."}]
    )
    term = Tmux(_command(tmp_path, repo, "--model", f"scripted:{script}", "--mode", "ask"), cwd=ROOT)
    try:
        term.wait_for("› ")
        term.type("run the tests")
        term.send("Enter")
        screen = term.wait_for("Allow this call?")
        assert "allow commands starting with `python3 -m pytest`" in screen  # the `p` key is offered
        term.type("please run only test_add")  # `p` picked the prefix at HEAD, `a` of "please" the next
        term.wait_for("› please run only test_add")
        term.send("Enter")
        screen = term.wait_for("not run: you said: please run only test_add")
        term.wait_for("⏺ bash(echo later-call-ran)")
        screen = term.wait_for("Allow this call?")  # the later call is asked, not allowed
        assert "later-call-ran\n" not in screen
        term.send("n")
        term.wait_for("declined")
        term.type("/permissions")
        term.send("Enter")
        screen = term.wait_for("no approvals remembered this session")
        _exit(term)
    finally:
        term.close()


def test_continuing_a_session_of_another_backend_asks_first(tmp_path: Path) -> None:
    """HEAD: `-c` of a --base-url session went on silently with whatever model this chat had."""
    from tests.fakeserver import FakeChatServer, FakeReply

    repo = _repo(tmp_path / "repo")
    other = _script(tmp_path, [{"text": "WRONG BACKEND ANSWERED"}], "other.jsonl")
    replies = [FakeReply(text="first answer"), FakeReply(text="second answer, from the server")]
    with FakeChatServer(replies, models=["m"]) as server:
        term = Tmux(_command(tmp_path, repo, "--base-url", server.url, "--model", "m"), cwd=ROOT)
        try:
            term.wait_for("› ")
            term.type("hello")
            term.send("Enter")
            term.wait_for("first answer")
            _exit(term)
        finally:
            term.close()
        term = Tmux(_command(tmp_path, repo, "-c", "--model", f"scripted:{other}"), cwd=ROOT)
        try:
            screen = term.wait_for("was written by m at")
            assert "Continue it on m at" in screen and "Start a new session instead" in screen
            term.send("s")
            term.wait_for("the session's own")
            term.wait_for("resumed session")
            term.type("and again")
            term.send("Enter")
            screen = term.wait_for("second answer, from the server")
            assert "WRONG BACKEND" not in screen
            _exit(term)
        finally:
            term.close()
        assert [r["messages"][-1]["content"] for r in server.requests] == ["hello", "and again"]


def test_a_failed_request_leaves_no_orphan_turn(tmp_path: Path) -> None:
    """HEAD: the failed request stayed, so the retry sent two user turns in a row."""
    repo = _repo(tmp_path / "repo")
    script = _script(tmp_path, [{"error": "the model server went away"}, {"text": "answered at last"}])
    term = Tmux(_command(tmp_path, repo, "--model", f"scripted:{script}"), cwd=ROOT)
    try:
        term.wait_for("› ")
        term.type("what is 2+2")
        term.send("Enter")
        term.wait_for("the model server went away")
        term.send("C-u")  # whatever the prompt holds now, the retry is typed again
        term.type("what is 2+2")
        term.send("Enter")
        term.wait_for("answered at last")
        _exit(term)
    finally:
        term.close()
    saved = json.loads(next((tmp_path / "home" / "sessions").glob("*.json")).read_text())
    roles = [m["role"] for m in saved["messages"]]
    assert roles == ["system", "user", "assistant"], roles
    assert [m["content"] for m in saved["messages"] if m["role"] == "user"] == ["what is 2+2"]


def test_a_300_line_paste_is_a_placeholder_and_whole_in_the_scrollback(tmp_path: Path) -> None:
    """HEAD: the input area showed the paste's last rows only, and only those stayed in the scrollback."""
    repo = _repo(tmp_path / "repo")
    script = _script(tmp_path, [{"text": "Read all of it."}])
    paste = tmp_path / "paste.txt"
    paste.write_text("\n".join(f"pasted line {i:03d}" for i in range(1, 301)))
    term = Tmux(_command(tmp_path, repo, "--model", f"scripted:{script}"), cwd=ROOT)
    try:
        term.wait_for("› ")
        term.type("look at this log: ")
        term._tmux("load-buffer", str(paste))
        term._tmux("paste-buffer", "-p", "-t", term.name)  # as a terminal pastes: bracketed
        screen = term.wait_for("[Pasted text #1 +300 lines]")
        assert "pasted line 150" not in screen  # a placeholder while the line is edited
        term.send("Enter")
        screen = term.wait_for("Read all of it.")
        assert all(f"pasted line {i:03d}" in screen for i in range(1, 301))  # all of it in the scrollback
        _exit(term)
    finally:
        term.close()
    saved = json.loads(next((tmp_path / "home" / "sessions").glob("*.json")).read_text())
    sent = next(m["content"] for m in saved["messages"] if m["role"] == "user")
    assert sent.startswith("look at this log: pasted line 001") and sent.endswith("pasted line 300")
    assert "[Pasted text" not in sent


def test_ctrl_d_leaves_while_a_local_model_loads(tmp_path: Path) -> None:
    """Ctrl-D under the loading spinner ends the chat at once. The checkpoint's config.json is a
    FIFO nobody writes, so the load blocks for as long as the test needs, on any machine."""
    from clover.model import EMBEDDED_DIR

    repo = _repo(tmp_path / "repo")
    checkpoint = tmp_path / "slow-checkpoint"
    checkpoint.mkdir()
    for name in ("model.safetensors", "tokenizer.json"):
        (checkpoint / name).symlink_to(EMBEDDED_DIR / name)
    os.mkfifo(checkpoint / "config.json")
    term = Tmux(_command(tmp_path, repo, "--model", str(checkpoint)), cwd=ROOT)
    try:
        term.wait_for("(Ctrl-D leaves)", timeout=30)
        term.send("C-d")
        screen = term.wait_for("[exited", timeout=60)
        assert "[exited 0]" in screen and "closed (Ctrl-D) before the model loaded" in screen
        assert "model loaded in" not in screen and "Traceback" not in screen
    finally:
        term.close()
