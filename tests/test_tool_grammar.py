"""The tool-call grammar (steering/tool_grammar.py) steering the block-diffusion decoder
on a tiny RANDOM Clover: random weights write garbage, so every well-formed call here is the
grammar's doing (the same runs without it are shown to break)."""

from __future__ import annotations

import dataclasses
import json

import pytest

torch = pytest.importorskip("torch")

from clover.backends.local import LocalCloverModel  # noqa: E402
from clover.model.decoder.generate import DecodeSettings, generate  # noqa: E402
from clover.model.text.chat import parse_assistant, tool_schemas  # noqa: E402
from clover.settings import Settings  # noqa: E402
from clover.steering.tool_grammar import ToolCallGrammar  # noqa: E402
from tests.tiny_checkpoint import tiny_checkpoint_dir  # noqa: E402


def _tool(name: str, props: list[str], required: list[str]) -> dict:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in props}, "required": required}
    return {"type": "function", "function": {"name": name, "description": name, "parameters": schema}}


TOOLS = [
    _tool("view", ["path", "view_range"], ["path"]),
    _tool("bash", ["command"], ["command"]),
    _tool("str_replace", ["path", "old_str", "new_str"], ["path", "old_str", "new_str"]),
]
SCHEMAS = tool_schemas(TOOLS)
USER = [{"role": "user", "content": "fix the bug in calc.py"}]


@pytest.fixture(scope="module")
def clover():
    settings = Settings(
        model=str(tiny_checkpoint_dir()), max_tokens=64, block_size=8, threshold=0.5, think=False
    )
    return LocalCloverModel(settings)


def variant(model: LocalCloverModel, *, constrain: bool = True, net=None, **changes) -> LocalCloverModel:
    """The same loaded network under other settings (no reload)."""
    other = LocalCloverModel.__new__(LocalCloverModel)
    other.__dict__.update(model.__dict__)
    other.settings = dataclasses.replace(model.settings, **changes)
    other.constrain_tool_calls = constrain
    if net is not None:
        other.net = net
    return other


class _Biased:
    """The real network with a constant bias on some logits: the random model then opens calls,
    ends values and closes thinking on its own, several times a turn."""

    def __init__(self, net, bias) -> None:
        self.net, self.bias = net, bias

    def __getattr__(self, name):
        return getattr(self.net, name)

    def denoise(self, block, cache, need=None):
        return self.net.denoise(block, cache, need) + self.bias

    def commit_and_denoise(self, done, block, cache, need=None):
        return self.net.commit_and_denoise(done, block, cache, need) + self.bias


def biased(model: LocalCloverModel) -> _Biased:
    bias = torch.zeros(model.config.vocab_size)
    for marker in ("<tool_call>", "</parameter>", "</think>", "<think>", "<function="):
        bias[model.tokenizer.token_id(marker)] = 3.0
    return _Biased(model.net, bias)


def problems(turn) -> list[str]:
    """What is wrong with a turn's calls: parse errors, unknown tools or parameters, missing ones."""
    out = []
    for call in turn.tool_calls:
        if call.error:
            out.append(call.error)
        elif call.name not in SCHEMAS:
            out.append(f"unknown tool {call.name!r}")
        else:
            schema = SCHEMAS[call.name]
            out += [
                f"{call.name}: unknown parameter {p!r}"
                for p in call.arguments
                if p not in schema["properties"]
            ]
            out += [f"{call.name}: missing {r!r}" for r in schema["required"] if r not in call.arguments]
    return out


def sample(model: LocalCloverModel, n: int, forced: dict[int, int] | None = None, seed0: int = 0) -> list:
    turns = []
    for seed in range(seed0, seed0 + n):
        torch.manual_seed(seed)  # temperature sampling draws from the global generator
        turns.append(model.complete(USER, TOOLS, forced=forced))
    return turns


# --------------------------------------------------------------------------- through the backend


@pytest.mark.parametrize("block", [1, 8])
def test_forced_call_on_random_weights_is_well_formed(clover, block):
    model = variant(clover, temperature=1.0, block_size=block)
    turns = sample(model, 10, forced={0: clover.tokenizer.token_id("<tool_call>")})
    for turn in turns:
        assert turn.tool_calls and not problems(turn), problems(turn)
        assert turn.finish_reason == "tool_calls"
    assert (
        len({(c.name, tuple(c.arguments.items())) for t in turns for c in t.tool_calls}) > 5
    )  # really sampled
    assert {c.name for t in turns for c in t.tool_calls} <= set(SCHEMAS)


@pytest.mark.parametrize("think", [False, True])
def test_calls_the_model_opens_itself_are_well_formed(clover, think):
    net = biased(clover)
    grammar_on = [variant(clover, temperature=1.0, block_size=b, think=think, net=net) for b in (4, 16)]
    turns = [t for model in grammar_on for t in sample(model, 4)]
    assert all(not problems(t) for t in turns), [problems(t) for t in turns]
    calls = [len(t.tool_calls) for t in turns]
    assert sum(calls) >= 8 and max(calls) >= 2  # several calls, several in one turn
    # the very same sampling without the grammar: the garbage shows
    free = [variant(m, constrain=False) for m in grammar_on]
    assert any(problems(t) for model in free for t in sample(model, 4))


@pytest.mark.parametrize(
    ("think", "n"),
    [
        (False, 2),
        pytest.param(False, 20, marks=pytest.mark.slow),
        pytest.param(True, 20, marks=pytest.mark.slow),
    ],
)
def test_samples_per_block_size_are_well_formed(clover, think, n):
    """Zero malformed calls at every block size: n samples each (2 in the default run, 20 under -m slow)."""
    net = biased(clover)
    for block in (1, 4, 16, 32):
        model = variant(clover, temperature=1.0, block_size=block, think=think, net=net, max_tokens=96)
        turns = sample(model, n, seed0=100)
        assert all(not problems(t) for t in turns), [problems(t) for t in turns]
        assert sum(len(t.tool_calls) for t in turns) >= n // 2


def test_a_call_out_of_room_closes_on_the_last_token(clover):
    model = variant(clover, temperature=1.0, max_tokens=30)
    tc = clover.tokenizer.token_id("<tool_call>")
    turns = sample(model, 6, forced={0: tc})
    for turn in turns:
        assert not problems(turn) and turn.tool_calls, problems(turn)
        assert turn.completion_tokens <= 30
    assert any(t.stats["grammar_closed"] for t in turns)
    # a call forced too late to be closed is left to the caller (it cannot be well formed)
    late = model.complete(USER, TOOLS, forced={25: tc})
    assert late.completion_tokens <= 30


def test_thinking_is_free_text_that_cannot_end_the_turn(clover):
    # B = 1 greedy: inside thinking the grammar bans only nested markup and the stop tokens (a turn
    # ending in its thinking has neither an answer nor a call), so the constrained thought follows
    # the unconstrained argmax until that one stops, then goes on
    on = variant(clover, think=True, max_tokens=40, block_size=1)
    a, b = on.complete(USER, TOOLS), variant(on, constrain=False).complete(USER, TOOLS)
    assert a.thinking and a.thinking.startswith(b.thinking)
    assert a.completion_tokens >= b.completion_tokens
    if not b.text and not b.tool_calls:  # the unconstrained turn ended inside its thinking
        assert a.completion_tokens > b.completion_tokens


def test_a_turn_without_calls_still_works(clover):
    model = variant(clover, max_tokens=32, block_size=1)
    turn = model.complete(USER, TOOLS)
    plain = variant(model, constrain=False).complete(USER, TOOLS)
    assert turn.tool_calls == [] and turn.finish_reason in ("stop", "length") and turn.completion_tokens > 0
    assert turn.completion_tokens == plain.completion_tokens
    assert "<|im_start|>" in plain.text and "<|im_start|>" not in turn.text  # stray markup: only in free text
    no_tools = variant(clover).complete(USER, [])
    assert "grammar_tokens" not in no_tools.stats and no_tools.completion_tokens > 0


def test_stats_count_every_forward_and_the_stream_follows(clover):
    model = variant(clover, temperature=1.0, max_tokens=64)
    tc = clover.tokenizer.token_id("<tool_call>")
    events = []
    before = clover.net.forward_count
    torch.manual_seed(3)
    turn = model.complete(USER, TOOLS, events.append, forced={0: tc})
    rounds = [e.data for e in events if e.kind == "block_round"]
    assert turn.stats["forwards"] == len(rounds)  # one forward per round; placements cost none
    # + the prompt's prefill (none at all when the prefix cache already holds the whole prompt)
    assert clover.net.forward_count - before == turn.stats["forwards"] + turn.stats["prefill_forwards"]
    assert turn.stats["grammar_tokens"] > 0
    assert turn.stats["tokens_per_forward"] == pytest.approx(turn.completion_tokens / len(rounds))
    # blocks the grammar filled alone have no round: their text still streams
    streamed = "".join(e.text for e in events if e.kind == "text")
    assert streamed.strip() == turn.text
    assert [e.data["name"] for e in events if e.kind == "tool_call"] == [c.name for c in turn.tool_calls]


# --------------------------------------------------------------------------- the grammar itself


def grammar_runner(clover, tools):
    """(grammar, run): run(text, state=None) steps the grammar through text's tokens; None once one
    is refused."""
    tok = clover.tokenizer
    g = ToolCallGrammar(
        tok,
        tools,
        opened=False,
        stop_ids=clover.stop_ids,
        vocab_size=clover.config.vocab_size,
        mask_id=clover.config.mask_token_id,
    )

    def run(text: str, st=None):
        st = st or g.seqs[0].start
        for t in tok.encode(text):
            st = g.step(st, t)
            if st is None:
                return None
        return st

    return g, run


def test_after_giving_up_the_turn_stays_unsteered(clover):
    g, _ = grammar_runner(clover, TOOLS)
    mask, b = clover.config.mask_token_id, 8
    block = torch.full((1, b), mask)
    open_, fixed = torch.ones(1, b, dtype=torch.bool), torch.zeros(1, b, dtype=torch.bool)
    # the same all-masked block, round after round, as when a rule undoes every round
    assert g(0, block, open_, fixed)[2] is not None  # steered: a ban row
    for _ in range(4 * b + 16):
        g(0, block, open_, fixed)
    assert g.stats["grammar_gave_up"] == 1 and g(0, block, open_, fixed)[1:] == (None, None, None)
    assert g.stats["grammar_gave_up"] == 1  # one give-up, however many rounds follow
    # the next block is not walked from the state before the give-up
    assert g(1, block, open_, fixed)[1:] == (None, None, None)
    assert g.closing() == []


def test_names_parameters_and_the_end_follow_the_schema(clover):
    tok = clover.tokenizer
    assert (
        ToolCallGrammar.build(
            tok,
            TOOLS,
            opened=False,
            stop_ids=clover.stop_ids,
            vocab_size=clover.config.vocab_size,
            mask_id=clover.config.mask_token_id,
        )
        is not None
    )
    _, run = grammar_runner(clover, TOOLS)

    call = "<tool_call>\n<function=str_replace>\n"
    assert run(call) is not None and run("<tool_call>\n<function=rm>\n") is None  # unknown tool
    assert run("<tool_call>\n<function=view>\n<parameter=color>\n") is None  # not in its schema
    assert run(call + "</function>") is None  # required parameters missing
    st = run(call + "<parameter=path>\na.py\n</parameter>\n")
    assert run("<parameter=path>\n", st) is None  # no parameter twice
    assert run("</function>", st) is None
    st = run("<parameter=old_str>\nreturn a - b  # anything\n</parameter>\n", st)  # values are free text
    done = run("<parameter=new_str>\nb\n</parameter>\n</function>\n</tool_call>", st)
    assert done is not None and done.mode == "text"
    assert run("<|im_end|>", run(call + "<parameter=path>\n")) is None  # no stop inside a call
    assert run("<function=view>") is None  # no bare call in the answer
    thinking = run("<think>\nthe bug is in calc")
    assert thinking is not None and thinking.mode == "think"
    assert run("<|im_end|>", thinking) is None  # a turn cannot end inside its thinking
    assert run("</think>\n\nDone.<|im_end|>", thinking) is not None
    assert ToolCallGrammar.build(tok, [], opened=False, stop_ids=[], vocab_size=10, mask_id=3) is None


def test_batched_decoding_with_the_grammar(clover):
    tc = clover.tokenizer.token_id("<tool_call>")
    prompts = [clover.prompt_ids(USER, TOOLS)[0], clover.prompt_ids(USER[:1] * 2, TOOLS)[0][:-5]]
    g = ToolCallGrammar(
        clover.tokenizer,
        TOOLS,
        opened=False,
        stop_ids=clover.stop_ids,
        vocab_size=clover.config.vocab_size,
        mask_id=clover.config.mask_token_id,
        budget=64,
        batch_size=2,
    )
    s = DecodeSettings(
        block_size=8,
        threshold=0.5,
        temperature=1.0,
        seed=0,
        max_new_tokens=64,
        stop_token_ids=clover.stop_ids,
    )
    res = generate(clover.net, prompts, s, fixed=[{0: tc}, {3: tc}], constraint=g)
    for out in res.tokens:
        _, _, calls = parse_assistant(clover.tokenizer.decode(out), SCHEMAS)
        assert calls and all(c.error is None and c.name in SCHEMAS for c in calls)


# --------------------------------------------------------------------------- typed values

RANGE = {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}
TYPED = [
    {
        "type": "function",
        "function": {
            "name": "view",
            "description": "view",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "view_range": RANGE},
                "required": ["path", "view_range"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "wait",
            "description": "wait",
            "parameters": {
                "type": "object",
                "properties": {"seconds": {"type": "number"}, "loud": {"type": "boolean"}},
                "required": ["seconds", "loud"],
            },
        },
    },
]


def test_typed_values_follow_their_schema_step_by_step(clover):
    _, run = grammar_runner(clover, TYPED)

    call = "<tool_call>\n<function=view>\n<parameter=path>\na.py\n</parameter>\n<parameter=view_range>\n"
    assert run(call + "[4, 45]\n</parameter>\n</function>\n</tool_call>").mode == "text"
    assert (
        run(call + "[4,, 45]") is None
        and run(call + "[4]") is None
        and run(call + "[4, 5\n</parameter>") is None
    )
    wait = "<tool_call>\n<function=wait>\n<parameter=seconds>\n"
    assert (
        run(wait + "3O") is None
        and run(wait + "-</parameter>") is None
        and run(wait + "2.5\n</parameter>") is not None
    )


@pytest.mark.parametrize("block", [1, 8])
def test_typed_values_on_random_weights_pass_the_schema_check(clover, block):
    from clover.schema import check_arguments

    # values end soon (`</parameter>` favoured), so calls are not cut short by the token budget
    model = variant(clover, temperature=1.0, block_size=block, max_tokens=96, net=biased(clover))
    schemas = tool_schemas(TYPED)
    calls = []
    for seed in range(10):
        torch.manual_seed(seed)
        turn = model.complete(USER, TYPED, forced={0: clover.tokenizer.token_id("<tool_call>")})
        if not turn.stats["grammar_closed"]:
            calls += turn.tool_calls
    assert len(calls) >= 5
    for call in calls:
        assert call.error is None and check_arguments(schemas[call.name], call.arguments) is None, call
    values = {json.dumps(v) for c in calls for k, v in c.arguments.items() if k != "path"}
    assert len(values) > 3  # really sampled, not one fixed answer


def test_values_hold_no_markup_tokens(clover):
    tok = clover.tokenizer
    g, run = grammar_runner(clover, TOOLS)
    st = run("<tool_call>\n<function=bash>\n<parameter=command>\nls ")
    for marker in (
        "</tool_call>",
        "<tool_call>",
        "<|im_start|>",
        "<tool_response>",
        "<function=",
        "<parameter=",
    ):
        assert g.step(st, tok.token_id(marker)) is None, marker
    assert g.step(st, tok.token_id("</parameter>")).mode == "call"
    # the same text spelt with ordinary tokens is a value like any other
    spelt = [t for ch in "</tool_call>" for t in tok.encode(ch)]
    for t in spelt:
        st = g.step(st, t)
        assert st is not None and st.mode == "value"


def test_a_turn_told_not_to_call_answers_in_text(clover):
    """TurnOptions(tool_choice="none") (the agent's wrap-up at its step limit): no call is opened,
    even by a model that opens one at once."""
    from clover.core.model_protocol import TurnOptions

    bias = torch.zeros(clover.config.vocab_size)
    bias[clover.tokenizer.token_id("<tool_call>")] = 8.0
    model = variant(clover, temperature=1.0, block_size=8, net=_Biased(clover.net, bias), max_tokens=48)
    torch.manual_seed(0)
    assert model.complete(USER, TOOLS).tool_calls
    for seed in range(3):
        torch.manual_seed(seed)
        turn = model.complete(USER, TOOLS, options=TurnOptions(tool_choice="none"))
        assert not turn.tool_calls and "<tool_call>" not in turn.text and turn.text.strip()


@pytest.mark.parametrize("think", [False, True])
def test_a_turn_told_to_call_opens_a_call(clover, think):
    """TurnOptions(tool_choice="required") (`clover fix` redoing an answer that came before any
    edit): the answer is a call, even from a model that would rather stop at once."""
    from clover.core.model_protocol import TurnOptions

    bias = torch.zeros(clover.config.vocab_size)
    bias[clover.stop_ids] = 8.0
    bias[clover.tokenizer.token_id("</think>")] = 6.0
    model = variant(
        clover, temperature=1.0, block_size=8, net=_Biased(clover.net, bias), max_tokens=64, think=think
    )
    torch.manual_seed(0)
    assert not model.complete(USER, TOOLS).tool_calls
    for seed in range(3):
        torch.manual_seed(seed)
        turn = model.complete(USER, TOOLS, options=TurnOptions(tool_choice="required"))
        assert len(turn.tool_calls) >= 1 and not problems(turn), (turn.text, turn.tool_calls)
        assert not turn.text.strip()


def test_a_required_call_gives_way_where_none_fits(clover):
    """With no room left for a call the required rule lifts: the turn may end (no forced garbage)."""
    tok = clover.tokenizer
    g = ToolCallGrammar(
        tok,
        TOOLS,
        opened=False,
        stop_ids=clover.stop_ids,
        vocab_size=clover.config.vocab_size,
        mask_id=clover.config.mask_token_id,
        budget=64,
        call_required=True,
    )
    st = g.seqs[0].start
    stop = clover.stop_ids[0]
    assert g.step(st, stop, left=40) is None and g.step(st, tok.encode("hi")[0], left=40) is None
    assert g.step(st, tok.token_id("<tool_call>"), left=40) is not None
    assert g.step(st, stop, left=2) is not None  # no call fits in 2 tokens
    after_call = dataclasses.replace(st, called=True)
    assert g.step(after_call, stop, left=40) is not None
