"""Grounded decoding (steering/grounding.py through the tool grammar): paths, old_str
and symbols come from the workspace. A tiny RANDOM Clover writes garbage, so every existing path
and unique old_str here is the grammar's doing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from clover.core.tool_protocol import tool_spec  # noqa: E402
from clover.steering.grounding import Grounding, Workspace  # noqa: E402
from clover.steering.value_nodes import CLOSE, Vocab  # noqa: E402
from clover.tools.environment import LocalEnvironment  # noqa: E402
from clover.tools.files import StrReplaceTool  # noqa: E402
from clover.tools.registry import default_tools  # noqa: E402
from tests.test_tool_grammar import _Biased, variant  # noqa: E402
from tests.test_tool_grammar import clover as clover  # noqa: E402,F401 - the module fixture

USER = [{"role": "user", "content": "fix the bug"}]
CALC = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"


def tools(*names: str) -> list[dict]:
    return [tool_spec(t) for t in default_tools() if t.name in names]


def workspace(root: Path, files: dict[str, str], ignore: str | None = "build/\n") -> LocalEnvironment:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    if ignore is not None:
        (root / ".gitignore").write_text(ignore)
    return LocalEnvironment(str(root))


def steered(clover, env, **changes):
    """The tiny model, bound to `env`, sampling, with `</parameter>` favoured so free values end."""
    bias = torch.zeros(clover.config.vocab_size)
    bias[clover.tokenizer.token_id("</parameter>")] = 2.0
    model = variant(
        clover, temperature=1.0, threshold=0.5, think=False, net=_Biased(clover.net, bias), **changes
    )
    model.bind_workspace(env)
    return model


def calls(model, names, n, seed0=0):
    out = []
    tc = model.tokenizer.token_id("<tool_call>")
    for seed in range(seed0, seed0 + n):
        torch.manual_seed(seed)
        turn = model.complete(USER, tools(*names), forced={0: tc})
        if not turn.stats.get("grammar_closed"):  # a value cut by the token budget is not checked
            out += turn.tool_calls
    return out


# --------------------------------------------------------------------------- the index alone


@pytest.fixture(scope="module")
def vocab(clover):
    return Vocab(clover.tokenizer, clover.config.vocab_size)


def _spell(node, text: bytes, vocab):
    """Walk `text` through a grounded node with the tokenizer's own spelling; None if refused."""
    for t in vocab.tok.encode(text.decode()):
        node = node.next(t)
        if node is None:
            return None
    return node


def test_paths_are_the_workspace_files(clover, vocab, tmp_path):
    env = workspace(tmp_path, {"pkg/calc.py": CALC, "README.md": "hi\n", "build/out.txt": "x\n"})
    g = Grounding(Workspace(env), vocab)
    node = g.node("str_replace", "path", "")
    assert _spell(node, b"pkg/calc.py\n", vocab) is not None
    assert CLOSE in _spell(node, b"pkg/calc.py\n", vocab).options()
    for outside in (b"build/out.txt", b"../etc/passwd", b"/etc/passwd", b"pkg/calx.py"):
        assert _spell(node, outside, vocab) is None, outside
    assert CLOSE not in _spell(node, b"pkg/calc.py", vocab).options()  # the newline comes first
    # create: a new name in an existing directory, not in a new one
    new = g.node("create", "path", "")
    assert CLOSE in _spell(new, b"pkg/new_mod.py\n", vocab).options()
    assert _spell(new, b"nodir/new.py\n", vocab) is None
    # view takes directories too
    assert CLOSE in _spell(g.node("view", "path", ""), b"pkg\n", vocab).options()


def test_old_str_is_whole_lines_and_closes_only_when_unique(clover, vocab, tmp_path):
    env = workspace(tmp_path, {"pkg/calc.py": CALC})
    g = Grounding(Workspace(env), vocab)
    root = g.node("str_replace", "old_str", "pkg/calc.py")
    twice = _spell(root, b"    return a - b\n", vocab)
    assert twice is not None and CLOSE not in twice.options()  # occurs twice: must go on
    once = _spell(root, b"def sub(a, b):\n", vocab)
    assert once is not None and CLOSE in once.options()
    assert _spell(root, b"    return a + b\n", vocab) is None  # not in the file
    # unique: the rest of the line is determined, one token at a time
    node = _spell(root, b"def su", vocab)
    assert node is not None and node.forced() is not None
    # view_range / insert_line are bounded by the file's 6 lines
    assert g.lines("pkg/calc.py") == 6


def test_old_str_at_the_end_of_the_file_can_always_close(clover, vocab, tmp_path):
    # The last line is also the start of an earlier one: not unique, and no line follows to make it
    # so. Every token banned made the decoder loop until the grammar gave up and the call came out
    # unclosed; now the value may end and str_replace says it is ambiguous.
    env = workspace(tmp_path, {"calc.py": "def f(x):\n    return x + 1\n    return x\n"})
    root = Grounding(Workspace(env), vocab).node("str_replace", "old_str", "calc.py")
    end = _spell(root, b"    return x\n", vocab)
    assert end is not None and end.options() == [CLOSE]
    # in the middle of a file the value still has to grow until it is unique
    middle = _spell(root, b"    return x", vocab)
    assert middle is not None and CLOSE not in middle.options()


def test_nothing_to_choose_from(clover, vocab, tmp_path):
    # an empty workspace leaves paths free (a new file may be named), but an empty file's old_str
    # closes at once: str_replace then says to use insert or create
    (tmp_path / "none").mkdir()
    empty = Grounding(Workspace(workspace(tmp_path / "none", {}, ignore=None)), vocab)
    assert empty.node("str_replace", "path", "") is None and empty.node("outline", "symbol", "") is None
    g = Grounding(
        Workspace(workspace(tmp_path / "one", {"pkg/__init__.py": "", "pkg/a.py": "x = 1\n"})), vocab
    )
    assert g.node("str_replace", "old_str", "pkg/__init__.py").options() == [CLOSE]


def test_symbols_are_the_repository_definitions(clover, vocab, tmp_path):
    env = workspace(
        tmp_path,
        {
            "pkg/shapes.py": "class Square:\n    def area(self):\n        return 1\n\n\ndef helper():\n    pass\n"
        },
    )
    node = Grounding(Workspace(env), vocab).node("outline", "symbol", "")
    for name in (b"Square", b"area", b"Square.area", b"helper"):
        done = _spell(node, name + b"\n", vocab)
        assert done is not None and CLOSE in done.options(), name
    assert _spell(node, b"Circle", vocab) is None


def test_line_numbers_stay_in_the_file():
    from dataclasses import replace

    from clover.steering.typed_values import value_shape

    view_range = {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}
    shape = replace(value_shape(view_range), lines=30)
    assert all(shape.prefix_ok(t) for t in ("[1", "[12, 3", "[12, -", "[3"))  # "3" may grow to 30
    assert not any(shape.prefix_ok(t) for t in ("[31", "[0", "[5, 0", "[5, 4]", "[5, -2"))
    assert shape.complete("[12, 30]") and shape.complete("[4, -1]") and not shape.complete("[12, 11]")
    assert shape.complete("[1, 40]") and shape.complete("[1, 800]")  # past the end: the tool clamps it
    assert not shape.prefix_ok("[1, 801") and not shape.complete("[1, 801]")  # more than one view shows
    assert not shape.prefix_ok("[30,  5\n")  # a finished 5 < 30 (a `$` took the newline for the end)
    line = replace(value_shape({"type": "integer"}), lines=5)
    assert line.complete("0") and line.complete("5") and not line.prefix_ok("6") and not line.prefix_ok("-")


def test_a_directory_view_takes_no_view_range(clover, vocab, tmp_path):
    from clover.steering.tool_grammar import ToolCallGrammar

    env = workspace(tmp_path, {"pkg/calc.py": CALC, "tests/test_calc.py": "x = 1\n"})
    g = ToolCallGrammar(
        clover.tokenizer,
        tools("view"),
        opened=False,
        stop_ids=clover.stop_ids,
        vocab_size=clover.config.vocab_size,
        mask_id=clover.config.mask_token_id,
        grounding=Grounding(Workspace(env), vocab),
    )

    def run(text: str):
        st = g.seqs[0].start
        for t in clover.tokenizer.encode(text):
            st = g.step(st, t)
            if st is None:
                return None
        return st

    call = "<tool_call>\n<function=view>\n<parameter=path>\n{}\n</parameter>\n"
    assert run(call.format("pkg/calc.py") + "<parameter=view_range>\n[1, 20]\n</parameter>") is not None
    for directory in ("tests", "pkg", "."):  # a directory has no lines to range over
        assert run(call.format(directory) + "<parameter=view_range>") is None, directory
        assert run(call.format(directory) + "</function>\n</tool_call>") is not None, directory


def test_the_index_follows_edits(clover, vocab, tmp_path):
    env = workspace(tmp_path, {"pkg/calc.py": CALC})
    ws = Workspace(env)  # one per agent, kept across turns
    before = Grounding(ws, vocab).node("str_replace", "old_str", "pkg/calc.py")
    assert _spell(before, b"def add(a, b):\n", vocab) is not None
    out = StrReplaceTool().run(
        {
            "path": "pkg/calc.py",
            "old_str": "def add(a, b):\n    return a - b",
            "new_str": "def plus(a, b):\n    return a + b",
        },
        env,
    )
    assert not out.is_error, out.output
    after = Grounding(ws, vocab).node("str_replace", "old_str", "pkg/calc.py")
    assert _spell(after, b"def add(a, b):\n", vocab) is None
    node = _spell(after, b"    return a + b\n", vocab)
    assert node is not None and CLOSE in node.options()  # unique in the new text


# --------------------------------------------------------------------------- through the decoder


LINES = st.lists(
    st.sampled_from(["x = 1", "    return x", "def f():", "", "y = x + 2", "# note"]), min_size=1, max_size=6
)


@pytest.mark.slow
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
)
@given(lines=LINES, block=st.integers(1, 32), seed=st.integers(0, 10_000))
def test_random_model_writes_only_grounded_values(clover, tmp_path_factory, lines, block, seed):
    root = tmp_path_factory.mktemp("ws")
    text = "\n".join(lines) + "\n"
    env = workspace(root, {"src/mod.py": text, "notes.txt": "a\nb\n"})
    model = steered(clover, env, block_size=block, max_tokens=160)
    for call in calls(model, ("str_replace", "view"), 2, seed0=seed):
        path = call.arguments.get("path")
        assert (root / path).exists() and not path.startswith(("/", "..", "build")), call
        assert call.name == "view" or (root / path).is_file(), call
        if call.name == "str_replace" and "old_str" in call.arguments:
            content = (root / path).read_text()
            old = call.arguments["old_str"]
            assert old and content.count(old) == 1, (old, content)
        assert not (call.name == "view" and "view_range" in call.arguments and (root / path).is_dir()), call
        if call.name == "view" and "view_range" in call.arguments and (root / path).is_file():
            start, end = call.arguments["view_range"]
            n = len((root / path).read_text().splitlines())
            # the end may pass the last line (the tool clamps it), by less than one view's span
            assert 1 <= start <= n and (end == -1 or start <= end < start + 800), (call.arguments, n)


@pytest.mark.slow
@pytest.mark.parametrize("block", [1, 2, 4, 8, 16, 32])
def test_many_samples_per_block_size(clover, tmp_path, block):
    env = workspace(
        tmp_path, {"src/mod.py": CALC, "src/util.py": "x = 1\nx = 1\ny = 2\n", "README.md": "r\n"}
    )
    model = steered(clover, env, block_size=block, max_tokens=200)
    found = calls(model, ("str_replace", "view", "insert"), 12)
    assert found
    for call in found:
        path = call.arguments.get("path")
        assert (tmp_path / path).exists(), call
        if call.name == "str_replace" and "old_str" in call.arguments:
            assert (tmp_path / path).read_text().count(call.arguments["old_str"]) == 1, call
        if call.name == "insert" and "insert_line" in call.arguments:
            assert 0 <= call.arguments["insert_line"] <= len((tmp_path / path).read_text().splitlines())


def test_sampled_calls_are_grounded(clover, tmp_path):
    env = workspace(tmp_path, {"src/mod.py": CALC, "notes.txt": "a\nb\n"})
    found = calls(steered(clover, env, block_size=4, max_tokens=128), ("str_replace",), 3)
    assert found
    for call in found:
        assert call.arguments["path"] in ("src/mod.py", "notes.txt", ".gitignore"), call
        if "old_str" in call.arguments:
            assert (tmp_path / call.arguments["path"]).read_text().count(call.arguments["old_str"]) == 1


def test_a_forced_run_costs_no_forward(clover, tmp_path):
    # one long path: after its first token the rest is determined, and placed without a forward
    long = "averyveryverylongdirectoryname/anotherlongsubdirectory/module_with_a_long_name.py"
    env = workspace(tmp_path, {long: CALC}, ignore=None)
    for block in (1, 8):
        model = steered(clover, env, block_size=block, max_tokens=160)
        before = clover.net.forward_count
        torch.manual_seed(0)
        turn = model.complete(USER, tools("str_replace"), forced={0: model.tokenizer.token_id("<tool_call>")})
        assert turn.tool_calls and turn.tool_calls[0].arguments["path"] == long
        st_ = turn.stats
        assert st_["grounded_tokens"] >= len(model.tokenizer.encode(long)) - 1
        model_tokens = turn.completion_tokens - st_["grammar_tokens"] - 1  # and the caller's <tool_call>
        # every forward decodes at least one token itself (or redoes one the grammar re-masked)
        assert st_["forwards"] <= model_tokens + st_["grammar_remasked"]
        if block == 1:
            assert st_["forwards"] == model_tokens  # AR: exactly one forward per token not placed
        assert clover.net.forward_count - before == st_["forwards"] + st_["prefill_forwards"]


def test_grounding_off_leaves_values_free(clover, tmp_path):
    env = workspace(tmp_path, {"pkg/calc.py": CALC})
    off = steered(clover, env, block_size=8, max_tokens=96, grounded=False)
    paths = [c.arguments.get("path") for c in calls(off, ("view",), 4)]
    assert any(p not in (None, "pkg/calc.py", "pkg", ".", "pkg/") for p in paths), paths
