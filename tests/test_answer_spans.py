"""Code spans in the answer copy what the user wrote or a tool showed (steering/answer_spans.py):
the automaton on the shipped tokenizer, then a tiny RANDOM Clover pushed to write backticks, whose
every span is then a copy (and is not without grounding)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from clover.model.text.tokenizer import CloverTokenizer  # noqa: E402
from clover.steering.answer_spans import CLOSED, OUT, AnswerSpans, quotable_text  # noqa: E402
from clover.steering.value_nodes import Vocab  # noqa: E402
from tests.test_grounding import tools, workspace  # noqa: E402
from tests.test_tool_grammar import _Biased, variant  # noqa: E402
from tests.test_tool_grammar import clover as clover  # noqa: E402,F401 - the module fixture

WEIGHTS = Path(__file__).resolve().parents[1] / "model" / "weights"
ASKED = "Which file defines the function add?"
SHOWN = "calc.py:4-5 def add(a, b)\ncalc.py:8-9 def mean(values)\n1 passed in 0.01s"


@pytest.fixture(scope="module")
def shipped():
    tok = CloverTokenizer.from_file(WEIGHTS / "tokenizer.json")
    return tok, Vocab(tok, 8192)


def spans(shipped, names=("add", "mean", "calc.py")) -> AnswerSpans:
    tok, vocab = shipped
    text = quotable_text(
        [
            {"role": "system", "content": "You are a user's assistant."},
            {"role": "user", "content": ASKED},
            {"role": "tool", "content": SHOWN},
        ]
    )
    return AnswerSpans(vocab, text, lambda: names)


def walk(sp: AnswerSpans, tok, text: str) -> tuple | None:
    """The automaton's state after `text` as the tokenizer spells it (None: refused)."""
    state: tuple | None = OUT
    for t in tok.encode(text):
        state = sp.after(state, t)
        if state is None:
            return None
    return state


@pytest.mark.parametrize(
    "answer",
    [
        "`add` is defined in `calc.py`, lines 4-5: `def add(a, b)`.",
        "All tests pass: `1 passed in 0.01s`.",
        "`Which file` asks where `add` is, in `calc`.",
        "Here:\n```python\ndef reverse(s):\n    return s[::-1]\n```\nDone.",
        "No spans at all, just prose (with a parenthesis).",
    ],
)
def test_copies_and_fences_are_accepted(shipped, answer):
    assert walk(spans(shipped), shipped[0], answer) == OUT


@pytest.mark.parametrize(
    "answer",
    [
        "`ir` is defined in `calc.py`.",  # "ir" only inside "directory"... not even there: invented
        "`user` is defined in `calc.py`.",  # the system prompt and role names are not quotable
        "`dd` is defined",  # inside a word
        "`add `",  # trailing space
        "` add`",  # leading space
        "`,` and more",  # no letter, digit or underscore
        "``add``",  # two backticks: not a way around the rule
        "`calc.py\nmean`",  # one line
        "`def add(a, b) plus`",  # runs past what the tool showed
        "`calc.`",  # a path cut after its dot
        "`.py`",  # a path's tail that starts on the dot
        "`def add(a`",  # a bracket left open
        "`b)`",  # a bracket closed that was not opened
        "`add``mean`",  # a span right after a span: reads as ``
    ],
)
def test_inventions_are_refused(shipped, answer):
    assert walk(spans(shipped), shipped[0], answer) is None


def test_an_unclosed_span_and_an_open_fence_hold_their_state(shipped):
    tok = shipped[0]
    assert walk(spans(shipped), tok, "see `calc") == ("span", b"calc")
    assert walk(spans(shipped), tok, "```\nanything `x` goes") == ("fence", 0)
    sp = spans(shipped)
    assert sp.after(("span", b"calc"), tok.token_id("<|im_end|>")) is None  # the turn cannot end in a span
    assert sp.after(OUT, tok.token_id("<|im_end|>")) == OUT


def test_the_taught_replies_quote_only_what_they_may(shipped):
    """Every code span the embedded model was taught to write copies the conversation, except the
    feature reply's command: config.json's answer_quotes lets that one through."""
    import json

    from clover.evals.synthfix.chat_rows import BIGGER

    tok, vocab = shipped
    quotes = json.loads((WEIGHTS / "config.json").read_text())["answer_quotes"]
    assert walk(AnswerSpans(vocab, "\n".join(["Add a dashboard.", *quotes])), tok, BIGGER) == OUT
    assert walk(AnswerSpans(vocab, "Add a dashboard."), tok, BIGGER) is None


def test_allowed_tokens_spell_on_and_one_copy_left_is_forced(shipped):
    tok, vocab = shipped
    sp = spans(shipped)
    after_cal = sp.allowed(b"cal")
    assert [vocab.bytes[t] for t in after_cal] == [b"c"]  # only calc.py starts so: the grammar places it
    opening = {vocab.bytes[t] for t in sp.allowed(b"")}
    firsts = {vocab.bytes[tok.encode(word)[0]] for word in ("add", "calc.py", "Which", "def", "1 passed")}
    assert firsts <= opening and b"ir" not in opening
    closing = {vocab.bytes[t] for t in sp.allowed(b"calc.py")}
    assert {b"`", b"`,", b"`."} <= closing  # a copy on a word boundary may close
    assert not {b"`", b"`,"} & {vocab.bytes[t] for t in sp.allowed(b"calc.p")}  # not inside a word


def test_the_prior_prefers_workspace_names(shipped):
    tok, vocab = shipped
    sp = spans(shipped)
    first = {vocab.bytes[t] for t in sp.preferred(b"")}
    assert b"add" in first and b"Which" not in first and b"def" not in first
    assert b"`" in {vocab.bytes[t] for t in sp.preferred(b"add")}  # closing on a name
    assert sp.preferred(b"Which") == []


def test_prose_may_not_open_a_span_nothing_continues(shipped):
    tok, vocab = shipped
    sp = spans(shipped)
    banned = {vocab.bytes[t] for t in sp.banned(OUT)}
    assert b"`return" in banned and b"`" not in banned and b" `" not in banned
    closed_banned = {vocab.bytes[t] for t in sp.banned(CLOSED)}  # right after a span: no ``
    assert b"`" in closed_banned and b" `" not in closed_banned
    after_two = {vocab.bytes[t] for t in sp.only(("ticks", 2))}  # only a third backtick: a fence
    assert b"`" in after_two and all(b.startswith(b"`") for b in after_two)


def test_the_checkpoint_decides_unless_the_setting_does(clover, tmp_path):
    """`grounded_spans = "auto"` follows config.json (the tiny checkpoint's is off, the embedded one's on)."""
    import json

    from clover.backends.local_grammar import TurnText, grammar_for

    assert json.loads((WEIGHTS / "config.json").read_text())["grounded_spans"] is True
    env = workspace(tmp_path, {"calc.py": "def add(a, b):\n    return a + b\n"})
    for setting, on in (("auto", False), ("on", True), ("off", False)):
        model = variant(clover, grounded_spans=setting)
        model.bind_workspace(env)
        grammar = grammar_for(model, tools("view"), False, 32, TurnText(quotable="add"))
        assert (grammar.spans is not None) is on
    model = variant(clover, grounded_spans="on", grounded=False)  # no grounding at all: no spans either
    model.bind_workspace(env)
    assert grammar_for(model, tools("view"), False, 32, TurnText(quotable="add")).spans is None


def closed(text: str) -> list[str]:
    """The closed single-backtick spans of a text, outside ``` fences (read as Markdown would)."""
    found, fence = [], False
    for part in re.split(r"(`{3,})", text):
        if part.startswith("```"):
            fence = not fence
        elif not fence:
            found += re.findall(r"`([^`\n]+)`", part)
    return found


@pytest.mark.parametrize("order", ["left", "verify"])
def test_random_model_pushed_to_backticks_writes_only_copies(clover, tmp_path, order):
    """A random model with backticks and the turn's end favoured: every closed span it writes in its
    answer is a stretch of the user's message or the tool output; without grounding it is not."""
    env = workspace(tmp_path, {"calc.py": "def add(a, b):\n    return a - b\n"})
    bias = torch.zeros(clover.config.vocab_size)
    bias[clover.tokenizer.token_id("<|im_end|>")] = -4.0
    tick = [i for i in range(clover.config.vocab_size) if clover.tokenizer.decode([i]) == "`"]
    assert tick, "the tiny tokenizer spells a backtick"
    bias[tick[0]] = 3.0
    messages = [
        {"role": "user", "content": "Where is add defined in calc.py? The tests fail."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "view", "arguments": '{"path": "calc.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "1\tdef add(a, b):\n2\t    return a - b"},
    ]
    quoted = quotable_text(messages)

    def closed_spans(model) -> list[str]:
        found = []
        for seed in range(3):
            torch.manual_seed(seed)
            text = model.complete(messages, tools("view")).text
            found += closed(text)
        return found

    def model(grounded: bool):
        m = variant(
            clover,
            temperature=1.0,
            threshold=0.5,
            think=False,
            net=_Biased(clover.net, bias),
            block_size=8,
            max_tokens=64,
            grounded=grounded,
            decode_order=order,
            grounded_spans="on",
        )
        m.bind_workspace(env)
        return m

    on, off = model(True), model(False)
    grounded, free = closed_spans(on), closed_spans(off)
    assert grounded and all(s in quoted for s in grounded), [s for s in grounded if s not in quoted]
    assert any(s not in quoted for s in free), free


def test_the_embedded_model_names_what_it_found(tmp_path):
    """`clover -p "Which file defines the function add?"` on the embedded model, as a user runs it:
    the outline finds add in calc.py and the reply quotes both (ungrounded spans wrote "`ir`")."""
    from benchmarks.chat_prompts import ask, make_repo, user_config

    repo, config = make_repo(tmp_path), user_config(tmp_path / "config")
    reply = ask("embedded", "Which file defines the function add?", repo, 256, 4, 300, config)
    assert reply["status"] == "submitted", reply
    assert reply["result"].startswith("`add` is defined in `calc.py`"), reply["result"]
