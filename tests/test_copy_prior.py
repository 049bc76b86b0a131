"""The copy prior of grounded values (steering/mentions.py, grounding.py): among the workspace's paths
and symbols, those the conversation names get the `copy_bias` bonus where the model chooses."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from clover.steering.grounding import Grounding, Workspace  # noqa: E402
from clover.steering.mentions import Mentions  # noqa: E402
from clover.steering.value_nodes import CLOSE, Vocab  # noqa: E402
from tests.test_grounding import steered, tools, workspace  # noqa: E402
from tests.test_tool_grammar import clover as clover  # noqa: E402,F401 - the module fixture

SHOP = {
    "src/shop/__init__.py": "",
    "src/shop/pricing.py": (
        "def with_tax(price):\n    return price\n\n\ndef apply_discount(price, "
        "percent):\n    return price + percent\n"
    ),
    "src/shop/checkout.py": (
        "from shop.pricing import apply_discount\n\n\ndef checkout(price):\n    "
        "return apply_discount(price, 0)\n"
    ),
    "tests/test_pricing.py": "def test_tax():\n    assert True\n",
}
ISSUE = "A 20% discount gives 60.0: `apply_discount(50.0, 20)` should be 40.0 (see pricing.py)."


def test_what_a_text_names():
    m = Mentions(
        'Traceback: File "/home/dev/proj/src/shop/pricing.py", line 5, in apply_discount\n'
        ">>> shop.checkout.checkout(3)  # see Cart.total"
    )
    for name in (
        "apply_discount",
        "checkout",
        "Cart.total",
        "total",
        "src/shop/pricing.py",
        "shop/pricing.py",
    ):
        assert m.names(name), name
    assert Mentions("edit pricing.py").names("src/shop/pricing.py")  # a file named by its tail
    assert not Mentions("the shop module").names("src/shop")  # a bare word is not a directory's tail
    assert not Mentions("apply_discounts").names("apply_discount")  # whole words only


@pytest.fixture(scope="module")
def vocab(clover):
    return Vocab(clover.tokenizer, clover.config.vocab_size)


def _follow_preferred(node, vocab) -> bytes:
    """Take the forced token, else the first preferred one, until the value may close: what it spells."""
    out = b""
    while node is not None:
        t = node.forced()
        if t is None:
            named = node.preferred()
            if not named:
                return out
            t = named[0]
        if t == CLOSE:
            return out
        out += vocab.bytes[t]
        node = node.next(t)
    return out


def test_preferred_tokens_lead_to_the_named_candidates(clover, vocab, tmp_path):
    env = workspace(tmp_path, SHOP)
    g = Grounding(Workspace(env), vocab, ISSUE)
    assert _follow_preferred(g.node("outline", "symbol", ""), vocab).rstrip(b"\n") == b"apply_discount"
    assert _follow_preferred(g.node("view", "path", ""), vocab).rstrip(b"\n") == b"src/shop/pricing.py"
    # no conversation, or one that names nothing of the workspace: no preference
    assert Grounding(Workspace(env), vocab).node("outline", "symbol", "").preferred() == []
    assert Grounding(Workspace(env), vocab, "it is broken").node("view", "path", "").preferred() == []


def _symbols(model, n: int) -> list[str]:
    out = []
    opening = model.tokenizer.encode("<tool_call>\n<function=outline>\n<parameter=symbol>\n")
    for seed in range(n):
        torch.manual_seed(seed)
        turn = model.complete(
            [{"role": "user", "content": ISSUE}], tools("outline"), forced=dict(enumerate(opening))
        )
        out += [c.arguments["symbol"] for c in turn.tool_calls if "symbol" in c.arguments]
    return out


@pytest.mark.parametrize("block", [1, 8])
def test_the_random_model_copies_the_named_symbol_under_the_prior(clover, tmp_path, block):
    env = workspace(tmp_path, SHOP)
    free = _symbols(steered(clover, env, block_size=block, max_tokens=96, copy_bias=0.0), 6)
    assert free and set(free) != {"apply_discount"}, free  # the random model alone picks others
    named = _symbols(steered(clover, env, block_size=block, max_tokens=96, copy_bias=30.0), 6)
    assert named and set(named) == {"apply_discount"}, named
