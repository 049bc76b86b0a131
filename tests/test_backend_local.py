"""The local Clover backend on a tiny random checkpoint: streaming, stats, tool-call parsing through
the decoder, errors, `clover fix` end to end and `clover serve` answered by the openai SDK.

Random weights decode gibberish: the tests check the plumbing, never the words.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import socket
import subprocess
import threading
import time

import pytest

torch = pytest.importorskip("torch")

from clover.backends import make_model  # noqa: E402
from clover.backends.local import LocalCloverModel, turn_from_text  # noqa: E402
from clover.core.model_protocol import Model  # noqa: E402
from clover.core.stops import ModelError  # noqa: E402
from clover.settings import Settings, SettingsError  # noqa: E402
from tests.clihelp import isolated_env, run_fix  # noqa: E402
from tests.tiny_checkpoint import tiny_checkpoint_dir  # noqa: E402

USER = [{"role": "user", "content": "fix the bug in calc.py"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "view",
            "description": "Show a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
                "required": ["path"],
            },
        },
    }
]
CALL = (
    "<tool_call>\n<function=view>\n<parameter=path>\ncalc.py\n</parameter>\n<parameter=line>\n3\n"
    "</parameter>\n</function>\n</tool_call>"
)


@pytest.fixture(scope="module")
def ckpt():
    return tiny_checkpoint_dir()


@pytest.fixture(scope="module")
def clover(ckpt):
    return LocalCloverModel(Settings(model=str(ckpt), max_tokens=16, block_size=8, threshold=0.5))


def with_settings(model: LocalCloverModel, **changes) -> LocalCloverModel:
    """The same loaded network under other settings (no reload)."""
    other = LocalCloverModel.__new__(LocalCloverModel)
    other.__dict__.update(model.__dict__)
    other.settings = dataclasses.replace(model.settings, **changes)
    return other


def forced(model: LocalCloverModel, text: str) -> dict[int, int]:
    ids = model.tokenizer.encode(text) + [model.tokenizer.token_id("<|im_end|>")]
    return dict(enumerate(ids))


def test_tokenizer_round_trip_specials_and_incremental_text(ckpt):
    from clover.model.text.chat import SPECIAL_TOKENS, render_messages
    from clover.model.text.tokenizer import CloverTokenizer, IncrementalDecoder

    tok = CloverTokenizer.from_dir(ckpt)
    assert list(tok.special_ids()) == SPECIAL_TOKENS and tok.stop_ids() == [2, 0]
    text = render_messages(USER, TOOLS) + "naïve — 日本 " + CALL
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    for marker in ("<|im_start|>", "<think>", "<tool_call>"):
        assert tok.token_id(marker) in ids  # markup is one token, not its characters
    inc, pieces = IncrementalDecoder(tok), []
    for i in ids:  # one token at a time: no half characters ever come out
        pieces.append(inc.push([i]))
        assert "\ufffd" not in pieces[-1]
    assert "".join(pieces) + inc.flush() == text


def test_satisfies_the_model_protocol(clover, ckpt):
    assert isinstance(clover, Model)
    assert clover.name == ckpt.name and clover.context_window == 32768


def test_streams_block_rounds_and_returns_stats(clover):
    events = []
    turn = clover.complete(USER, TOOLS, events.append)
    rounds = [e.data for e in events if e.kind == "block_round"]
    assert rounds, "no block_round events"
    by_block: dict[int, list[dict]] = {}
    for r in rounds:
        assert all(t is None or isinstance(t, str) for t in r["tokens"])
        by_block.setdefault(r["block"], []).append(r)
    assert sorted(by_block) == list(range(len(by_block)))
    for rs in by_block.values():
        assert [r["round"] for r in rs] == list(range(len(rs)))
        masks = [r["tokens"].count(None) for r in rs]
        assert masks == sorted(masks, reverse=True) and masks[-1] == 0  # denoised to the end
        assert all(len(r["tokens"]) <= 8 for r in rs)
    # every generated token shows up in exactly one finished block
    assert sum(len(rs[-1]["tokens"]) for rs in by_block.values()) == turn.completion_tokens
    assert 0 < turn.completion_tokens <= 16 and turn.prompt_tokens > 50
    assert set(turn.stats) >= {"forwards", "tokens_per_forward", "tok_per_s", "rounds_per_block"}
    assert turn.stats["forwards"] == len(rounds)  # one forward per round (commit fused)
    assert turn.stats["tokens_per_forward"] == pytest.approx(turn.completion_tokens / len(rounds))
    assert turn.seconds > 0 and turn.finish_reason in ("stop", "length", "tool_calls")
    assert events[-1].kind == "usage"


def test_block_size_one_is_one_token_per_forward(clover):
    turn = with_settings(clover, block_size=1).complete(USER, [], None)
    assert turn.stats["rounds_per_block"] == 1.0
    # the first token's logits come from the prefill: one forward fewer than tokens
    assert turn.stats["forwards"] == turn.completion_tokens - 1


def test_greedy_decoding_is_deterministic(clover):
    a, b = clover.complete(USER, []), clover.complete(USER, [])
    assert (a.thinking, a.text, a.completion_tokens) == (b.thinking, b.text, b.completion_tokens)


def test_tool_call_forced_through_the_decoder_is_parsed(clover):
    events = []
    model = with_settings(clover, max_tokens=128)
    text = "look at calc.py first</think>\n\n" + CALL
    turn = model.complete(USER, TOOLS, events.append, forced=forced(model, text))
    assert turn.thinking == "look at calc.py first" and turn.text == ""
    assert [(c.name, c.arguments, c.error) for c in turn.tool_calls] == [
        ("view", {"path": "calc.py", "line": 3}, None)
    ]
    assert turn.finish_reason == "tool_calls"
    streamed = {k: "".join(e.text for e in events if e.kind == k) for k in ("thinking", "text")}
    assert streamed["thinking"] == "look at calc.py first" and "<tool_call>" not in streamed["text"]
    assert [e.data["name"] for e in events if e.kind == "tool_call"] == ["view"]


def test_think_off_answer_and_malformed_call(clover):
    model = with_settings(clover, think=False, max_tokens=128)
    assert not model.prompt_ids(USER, [])[1]  # the prompt closed the think block
    broken = "Let me see.\n<tool_call>\n<function=view>\n<parameter=path>\ncalc.py\n</function>\n</tool_call>"
    turn = model.complete(USER, TOOLS, forced=forced(model, broken))
    assert turn.thinking == "" and turn.text == "Let me see."
    assert len(turn.tool_calls) == 1 and "unclosed <parameter=path>" in turn.tool_calls[0].error


def test_turn_from_text_hermes_json_and_plain_answer():
    turn = turn_from_text(
        'ok</think>\n<tool_call>{"name": "view", "arguments": {"path": "a"}}</tool_call>', TOOLS, opened=True
    )
    assert turn.thinking == "ok" and [(c.name, c.arguments) for c in turn.tool_calls] == [
        ("view", {"path": "a"})
    ]
    turn = turn_from_text("All done.<|im_end|>", TOOLS, opened=False)
    assert (turn.text, turn.tool_calls) == ("All done.", [])


def test_cancel_interrupts_between_rounds(clover):
    seen = []

    def on_event(event):
        seen.append(event.kind)
        if event.kind == "block_round":
            clover.cancel()

    with pytest.raises(KeyboardInterrupt):
        clover.complete(USER, [], on_event)
    assert seen.count("block_round") == 1
    assert clover.complete(USER, []).completion_tokens > 0  # the next turn runs normally


def test_prompt_longer_than_the_context_is_a_model_error(clover):
    small = with_settings(clover)
    small.context_window = 10
    with pytest.raises(ModelError, match="context"):
        small.complete(USER, [])


def _broken(ckpt, tmp_path, how: str):
    d = tmp_path / how
    shutil.copytree(ckpt, d)
    if how == "truncated":
        w = d / "model.safetensors"
        w.write_bytes(w.read_bytes()[:1000])
    elif how == "no-tokenizer":
        (d / "tokenizer.json").unlink()
    elif how == "bad-config":
        (d / "config.json").write_text("{")
    elif how == "mistyped-config":  # bool("false") would read as True
        config = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps({**config, "wrap_up": "false"}))
    elif how == "empty":
        shutil.rmtree(d)
        d.mkdir()
    return d


@pytest.mark.parametrize("how", ["empty", "truncated", "no-tokenizer", "bad-config", "mistyped-config"])
def test_bad_checkpoint_is_a_one_line_model_error(ckpt, tmp_path, how):
    d = _broken(ckpt, tmp_path, how)
    with pytest.raises(ModelError) as info:
        make_model(Settings(model=str(d)))
    message = str(info.value)
    assert message and "\n" not in message and str(d) in message


def test_checkpoint_chat_template_wins(ckpt, tmp_path):
    d = tmp_path / "templated"
    shutil.copytree(ckpt, d)
    (d / "chat_template.jinja").write_text(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking %}<think>\n{% endif %}{% endif %}"
    )
    model = LocalCloverModel(Settings(model=str(d), max_tokens=4))
    ids, opened = model.prompt_ids(USER, [])
    expected = "<|im_start|>user\nfix the bug in calc.py<|im_end|>\n<|im_start|>assistant\n<think>\n"
    assert model.tokenizer.decode(ids) == expected and opened
    assert model.complete(USER, []).completion_tokens > 0
    (d / "chat_template.jinja").write_text("{{ raise_exception('no tools here') }}")
    with pytest.raises(ModelError, match="chat template failed: no tools here"):
        LocalCloverModel(Settings(model=str(d))).complete(USER, [])


def test_cpu_device_and_unknown_device(ckpt):
    with pytest.raises(ModelError, match="device"):
        LocalCloverModel(Settings(model=str(ckpt), device="tpu9"))


def test_cpu_threads_small_models_get_one_unless_asked(monkeypatch):
    from clover.backends.local import cpu_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert cpu_threads(0, 9_000_000) == 1
    assert cpu_threads(0, 3_000_000_000) is None  # a big model keeps torch's default
    assert cpu_threads(6, 9_000_000) == 6
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert cpu_threads(0, 9_000_000) is None  # the user's environment wins
    with pytest.raises(SettingsError, match="threads"):
        Settings().merged({"threads": "-1"}, "CLOVER_THREADS")


def test_the_threads_setting_reaches_torch(ckpt):
    before = torch.get_num_threads()
    try:
        LocalCloverModel(Settings(model=str(ckpt), threads=2))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


# --------------------------------------------------------------------------- through the CLI


def _git_repo(path):
    path.mkdir()
    (path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True)
    return path


def test_clover_fix_runs_end_to_end_on_random_weights(tmp_path, ckpt):
    repo = _git_repo(tmp_path / "repo")
    (tmp_path / "issue.md").write_text("add(2, 3) returns -1 instead of 5.")
    traj = tmp_path / "traj.jsonl"
    env = {
        **isolated_env(tmp_path),
        "CLOVER_MAX_TOKENS": "32",
        "CLOVER_BLOCK_SIZE": "8",
        "OMP_NUM_THREADS": "1",
    }
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        str(ckpt),
        "--max-steps",
        "2",
        "--yes",
        "--trajectory",
        str(traj),
        env=env,
    )
    assert proc.returncode in (0, 1, 4), proc.stderr  # exit_codes: done, no result, or the step limit
    assert "Traceback" not in proc.stderr + proc.stdout
    records = [json.loads(line) for line in traj.read_text().splitlines()]
    assert records and records[-1]["type"] == "summary"


def test_clover_fix_with_a_broken_checkpoint_is_one_line_exit_2(tmp_path, ckpt):
    repo = _git_repo(tmp_path / "repo")
    (tmp_path / "issue.md").write_text("add is wrong")
    proc = run_fix(
        tmp_path / "issue.md",
        repo,
        "--model",
        str(_broken(ckpt, tmp_path, "truncated")),
        "--yes",
        env={**isolated_env(tmp_path), "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clover: ") and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- clover serve


@pytest.fixture(scope="module")
def server(clover):
    pytest.importorskip("fastapi")
    uvicorn = pytest.importorskip("uvicorn")
    openai = pytest.importorskip("openai")
    from clover.serve import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(clover), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not srv.started and time.time() < deadline:
        time.sleep(0.02)
    yield openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
    srv.should_exit = True
    thread.join(5)


def test_serve_answers_the_openai_sdk(server, clover):
    reply = server.chat.completions.create(model=clover.name, messages=USER, tools=TOOLS)
    assert reply.usage.completion_tokens > 0 and reply.usage.prompt_tokens > 50
    assert reply.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert [m.id for m in server.models.list().data] == [clover.name]
    chunks = list(server.chat.completions.create(model=clover.name, messages=USER, stream=True))
    assert chunks and chunks[-1].choices[0].finish_reason in ("stop", "length", "tool_calls")


# --------------------------------------------------------------------------- benchmarks/decode.py


def test_decode_benchmark_runs_on_the_tiny_checkpoint(ckpt, tmp_path, capsys):
    from benchmarks.decode import agreement, main

    assert agreement([1, 2, 3, 4], [1, 2, 0, 4]) == 0.75 and agreement([1, 2], [1, 2, 3, 4]) == 0.5
    out = tmp_path / "bench.json"
    argv = [
        "--model",
        str(ckpt),
        "--prompt-tokens",
        "12",
        "--new-tokens",
        "8",
        "--block-sizes",
        "1,4",
        "--thresholds",
        "0.5,0.0",
        "--prefill-lengths",
        "64",
        "--json",
        str(out),
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "agree B=1" in printed and "prefill" in printed
    rows = json.loads(out.read_text())["decode"]
    assert [(r["block"], r["threshold"]) for r in rows] == [(1, 1.0), (4, 0.5), (4, 0.0)]
    assert rows[0]["agreement"] == 1.0 and rows[0]["tokens"] == 8
    # threshold 0 accepts every position in the first round: one forward per block
    assert rows[2]["rounds_per_block"] == 1.0 and rows[2]["tokens_per_forward"] > 1.0


def test_prompt_start_ids_open_every_prompt(ckpt, tmp_path):
    d = tmp_path / "started"
    shutil.copytree(ckpt, d)
    config = json.loads((d / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**config, "prompt_start_ids": [0]}))
    plain, _ = LocalCloverModel(Settings(model=str(ckpt))).prompt_ids(USER, [])
    started, _ = LocalCloverModel(Settings(model=str(d))).prompt_ids(USER, [])
    assert started == [0] + plain
    (d / "config.json").write_text(json.dumps({**config, "prompt_start_ids": [10**6]}))
    with pytest.raises(ModelError, match="prompt_start_ids"):
        LocalCloverModel(Settings(model=str(d)))


def test_the_embedded_prompt_opens_as_its_training_rows_do():
    """The embedded model's rows are end-aligned after <|endoftext|> padding (model/training/data.py); a
    prompt without it made the shipped model write "running on youran" where every row has
    "running on your machine"."""
    from clover.model.training.data import end_aligned

    model = LocalCloverModel(Settings(model="embedded"))
    eot = model.tokenizer.token_id("<|endoftext|>")
    rows, _ = end_aligned([([5] * 10, [True] * 10), ([5] * 3, [True] * 3)], 8, eot)
    assert rows[:, 0].tolist() == [eot, eot]
    assert model.prompt_ids(USER, [])[0][0] == eot and model.config.prompt_start_ids == [eot]
