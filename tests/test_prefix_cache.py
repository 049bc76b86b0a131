"""Prompt prefix caching (backends/prefix_cache.py) on a tiny random checkpoint: an agent
conversation decodes exactly as without the cache while prefilling only what is new; edits and
dropped thinking fall back to the longest usable snapshot; kept snapshots stay intact."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

from clover.backends.local import LocalCloverModel  # noqa: E402
from clover.backends.prefix_cache import PrefixCache, common_prefix  # noqa: E402
from clover.model.decoder.generate import DecodeSettings, generate  # noqa: E402
from clover.settings import Settings  # noqa: E402
from tests.tiny_checkpoint import tiny_checkpoint_dir  # noqa: E402


def _tool(name: str, params: list[str]) -> dict:
    props = {p: {"type": "string"} for p in params}
    schema = {"type": "object", "properties": props, "required": params[:1]}
    return {
        "type": "function",
        "function": {"name": name, "description": f"{name} tool", "parameters": schema},
    }


TOOLS = [_tool("view", ["path"]), _tool("bash", ["command"])]
SYSTEM = {
    "role": "system",
    "content": "You are a helpful coding assistant. Use the tools to explore the repository.",
}
TASK = {"role": "user", "content": "fix the bug in calc.py"}


@pytest.fixture(scope="module")
def clover() -> LocalCloverModel:
    settings = Settings(model=str(tiny_checkpoint_dir()), max_tokens=48, block_size=8, threshold=0.5)
    return LocalCloverModel(settings)


def variant(model: LocalCloverModel, *, cached: bool, **changes) -> LocalCloverModel:
    """The same network under other settings, with its own (empty) prefix cache or none."""
    other = LocalCloverModel.__new__(LocalCloverModel)
    other.__dict__.update(model.__dict__)
    other.settings = dataclasses.replace(model.settings, **changes)
    other.prefix_cache = PrefixCache() if cached else None
    return other


def converse(model: LocalCloverModel, steps: int, messages: list | None = None) -> tuple[list, list]:
    """An agent-shaped conversation: each turn is forced to open a tool call (the grammar writes
    the rest), its answer goes back without thinking, then a tool result. Returns per turn
    (streamed events without timings, the turn's visible result) and the turns' stats."""
    tok = model.tokenizer
    opening = tok.encode("step</think>\n\n") + [tok.token_id("<tool_call>")]
    messages = list(messages or [SYSTEM, TASK])
    seen, stats = [], []
    for step in range(steps):
        events: list = []
        turn = model.complete(messages, TOOLS, events.append, forced=dict(enumerate(opening)))
        streamed = [(e.kind, e.text, e.data) for e in events if e.kind != "usage"]
        calls = [(c.name, c.arguments, c.error) for c in turn.tool_calls]
        seen.append((streamed, turn.thinking, turn.text, calls, turn.completion_tokens, turn.finish_reason))
        stats.append(turn.stats)
        messages.append(turn.to_message())
        messages.append({"role": "tool", "content": f"output of step {step}:\n" + "ok " * (3 + step)})
    return seen, stats


@pytest.mark.parametrize("block", [1, 8])
def test_conversation_decodes_exactly_as_without_the_cache(clover, block):
    with_cache, stats = converse(variant(clover, cached=True, block_size=block), 4)
    without, plain = converse(variant(clover, cached=False, block_size=block), 4)
    assert with_cache == without  # every round of every block, every turn
    assert all(s["grammar_tokens"] > 0 for s in stats)  # the tool grammar was steering
    assert stats[0]["cached_prompt_tokens"] == 0
    for s, p in zip(stats[1:], plain[1:], strict=True):
        assert s["cached_prompt_tokens"] > 0 and s["prefill_tokens"] < p["prefill_tokens"]
        # what was reused plus what was prefilled is the prompt's committed part
        assert s["cached_prompt_tokens"] + s["prefill_tokens"] == p["prefill_tokens"]
    assert sum(s["prefill_tokens"] for s in stats) < 0.5 * sum(p["prefill_tokens"] for p in plain)


def test_changed_earlier_message_falls_back_to_a_full_prefill(clover):
    model = variant(clover, cached=True)
    converse(model, 2)
    edited = [SYSTEM, {"role": "user", "content": "fix the typo in calc.py"}]
    again, stats = converse(model, 2, edited)
    fresh, plain = converse(variant(clover, cached=False), 2, edited)
    assert again == fresh
    assert stats[0]["cached_prompt_tokens"] == 0 and stats[0]["prefill_tokens"] == plain[0]["prefill_tokens"]
    assert stats[1]["cached_prompt_tokens"] > 0  # the edited conversation is cached from then on


def test_dropped_thinking_resumes_just_before_the_divergence(clover):
    """The next prompt renders the last turn without its thinking, so it leaves the old prompt a
    few tokens before that prompt's end; with B = 1 the end-of-prefill snapshot is past that point
    and the one taken `margin` tokens earlier is used."""
    model = variant(clover, cached=True, block_size=1)
    cache = model.prefix_cache
    first = [SYSTEM, TASK]
    turn = model.complete(first, TOOLS)
    old, _ = model.prompt_ids(first, TOOLS)
    assert cache.positions == [len(old) - cache.margin, len(old)]
    second = [*first, turn.to_message(), {"role": "user", "content": "go on"}]
    new, _ = model.prompt_ids(second, TOOLS)
    diverge = common_prefix(old, new)
    assert len(old) - cache.margin <= diverge < len(old)  # the generation prompt differs
    again = model.complete(second, TOOLS)
    assert again.stats["cached_prompt_tokens"] == len(old) - cache.margin
    assert again.stats["prefill_tokens"] == len(new) - (len(old) - cache.margin)
    plain = variant(clover, cached=False, block_size=1).complete(second, TOOLS)
    assert (again.thinking, again.text, again.completion_tokens) == (
        plain.thinking,
        plain.text,
        plain.completion_tokens,
    )


def _fresh_state(net, ids: list[int]):
    cache = net.new_cache(1)
    net.prefill(torch.tensor([ids]), cache)
    return cache


def test_kept_snapshots_equal_a_fresh_prefill_after_rewinds(clover):
    """Restoring an early snapshot and writing past it must not corrupt the snapshots kept at or
    before it, nor may generation after a restore mutate what they reference."""
    net, s = clover.net, DecodeSettings(block_size=4, max_new_tokens=12, stop_token_ids=[], commit_last=True)
    pc = PrefixCache(keep=8, margin=6)
    base = list(range(20, 60))
    pc.generate(net, base, s)  # snapshots at 32 (margin point) and 40
    pc.generate(net, base + list(range(60, 90)), s)  # resumes at 40, snapshots at 64, 68
    assert pc.positions == [32, 40, 64, 68]
    saved = [
        (snap.pos, snap.next_logits.clone(), [g and (g[0].clone(), g[1].clone()) for g in snap.gdn])
        for snap in pc._snaps
    ]
    res = pc.generate(net, base[:38] + [7] * 30, s)  # diverges at 38: rewinds to 32
    assert res.stats["cached_prompt_tokens"] == 32 and pc.positions[:1] == [32]
    for pos, logits, gdn in saved[:1]:  # what stayed: unchanged, bit for bit
        snap = pc._snaps[0]
        assert snap.pos == pos and torch.equal(snap.next_logits, logits)
        for got, want in zip(snap.gdn, gdn, strict=True):
            assert got is None or (torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]))
    ids = pc._ids
    for snap in pc._snaps:  # every kept snapshot (with the shared K/V) equals recomputation
        pc._cache.restore(snap)
        fresh = _fresh_state(net, ids[: snap.pos])
        torch.testing.assert_close(pc._cache.next_logits, fresh.next_logits, atol=1e-5, rtol=1e-4)
        for mine, ref in zip(pc._cache.layers, fresh.layers, strict=True):
            if hasattr(mine, "k"):
                torch.testing.assert_close(
                    mine.k[:, :, : snap.pos], ref.k[:, :, : snap.pos], atol=1e-5, rtol=1e-4
                )
                torch.testing.assert_close(
                    mine.v[:, :, : snap.pos], ref.v[:, :, : snap.pos], atol=1e-5, rtol=1e-4
                )
            else:
                torch.testing.assert_close(mine.state, ref.state, atol=1e-5, rtol=1e-4)
                torch.testing.assert_close(mine.conv, ref.conv, atol=1e-5, rtol=1e-4)


def test_block_size_may_change_between_turns_and_keep_bounds_the_snapshots(clover):
    net = clover.net
    pc = PrefixCache(keep=2, margin=4)
    prompt = list(range(20, 70))
    for block in (8, 4, 1, 8):
        s = DecodeSettings(block_size=block, max_new_tokens=6, stop_token_ids=[])
        got = pc.generate(net, prompt, s)
        assert got.tokens == generate(net, [prompt], s).tokens
        assert len(pc.positions) <= 2
        prompt = prompt + got.tokens[0] + [30, 31, 32]


def test_given_cache_rules_and_a_busy_cache_decodes_without_it(clover):
    net, s = clover.net, DecodeSettings(block_size=4, max_new_tokens=4, stop_token_ids=[])
    with pytest.raises(ValueError, match="exactly one prompt"):
        generate(net, [[20, 21, 22, 23, 24], [25, 26]], s, cache=net.new_cache(1))
    long = _fresh_state(net, list(range(20, 36)))
    with pytest.raises(ValueError, match="more than the prompt"):
        generate(net, [list(range(20, 30))], s, cache=long)
    pc = PrefixCache()
    with pc._lock:  # another thread holds the conversation
        res = pc.generate(net, list(range(20, 40)), s)
    assert res.stats["cached_prompt_tokens"] == 0 and pc.positions == []


def test_the_agents_real_first_prompt_is_not_prefilled_again(clover):
    """`clover chat`'s own first prompt (its system prompt and every default tool, ~1.4k tokens): the
    second turn resumes from it and prefills only the reply and the tool result after it."""
    from clover.core.tool_protocol import tool_spec
    from clover.prompts import system_prompt
    from clover.tools.registry import default_tools

    tools = [tool_spec(t) for t in default_tools()]
    first = [{"role": "system", "content": system_prompt("/work/project", "chat")}, TASK]
    model = variant(clover, cached=True, block_size=1)
    old, _ = model.prompt_ids(first, tools)
    assert len(old) > 1000
    turn = model.complete(first, tools)
    assert turn.stats["cached_prompt_tokens"] == 0 and turn.stats["prefill_tokens"] == len(old)
    second = [*first, turn.to_message(), {"role": "tool", "content": "def add(a, b):\n    return a + b\n"}]
    new, _ = model.prompt_ids(second, tools)
    again = model.complete(second, tools)
    assert again.stats["cached_prompt_tokens"] >= len(old) - model.prefix_cache.margin
    assert again.stats["cached_prompt_tokens"] + again.stats["prefill_tokens"] == len(new)
