"""Chat-coherence training rows (evals/synthfix/chat_rows.py): `clover chat`'s prompt, one tool-free
answer as the only target."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from clover.evals.synthfix.chat_rows import PROMPTS, THOUGHTS, decision_row, generate, main


def test_rows_answer_briefly_without_a_tool_call():
    from collections import Counter

    kinds = Counter(k for k, _ in PROMPTS)
    rows = generate(len(kinds) * max(kinds.values()), seed=0)
    users = set()
    for row in rows:
        text, spans = row["text"], row["spans"]
        assert text.startswith(
            "<|im_start|>system\nYou are Clover, a coding agent working in the repository at"
        )
        assert len(spans) == 1  # only the answer (with its thinking) is a target
        target = text[spans[0][0] : spans[0][1]]
        assert target.endswith("<|im_end|>") and "</think>\n\n" in target
        answer = target.split("</think>\n\n", 1)[1]
        assert "<function=" not in answer and "<tool_call>" not in answer and len(answer) < 500
        users.add(text.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0])
    assert users == {p for _, p in PROMPTS}  # one pass over the largest kind covers every prompt
    kind_of = {p: k for k, p in PROMPTS}
    firsts = Counter(
        kind_of[r["text"].split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0]]
        for r in generate(6 * len(kinds), seed=0)
    )
    assert set(firsts.values()) == {6}  # every kind equally often: none becomes the default reply
    assert generate(5, seed=1) == generate(5, seed=1) != generate(5, seed=2)


def test_cli_writes_jsonl(tmp_path):
    out = tmp_path / "chat.jsonl"
    assert main(["--out", str(out), "--count", "3"]) == 0
    assert [sorted(json.loads(ln)) for ln in out.read_text().splitlines()] == [["spans", "text"]] * 3


def test_no_benchmark_prompt_is_taught():
    from benchmarks.chat_prompts import MORE_PROMPTS
    from benchmarks.chat_prompts import PROMPTS as MEASURED

    def norm(text: str) -> str:
        return " ".join(text.lower().strip(" .!?").split())

    from clover.evals.synthfix.chat_wording import ABOUT, FILES, FIND, TESTS

    taught = [p for _, p in PROMPTS] + [p.format(name="add") for p in FIND + TESTS + ABOUT + FILES]
    assert not {norm(p) for p in taught} & {norm(p) for p in MEASURED + MORE_PROMPTS}


def test_repository_questions_are_answered_from_the_real_tool_output(tmp_path):
    from clover.evals.synthfix import generate as synthfix
    from clover.evals.synthfix.chat_tasks import generate as task_rows

    rows = synthfix(tmp_path / "sf", "train", 4, seed=3)
    records = task_rows(rows, 4, seed=0)
    assert len(records) == 4
    for record in records:
        text, spans = record["text"], record["spans"]
        assert text.startswith(
            "<|im_start|>system\nYou are Clover, a coding agent working in the repository at"
        )
        overview = "Overview:" in text  # views the top, then reads the README: two calls
        assert len(spans) == (
            3 if overview else 2
        )  # the calls and the answer; the tools' output is not a target
        output = text.rsplit("<tool_response>\n", 1)[1].split("</tool_response>", 1)[0]
        answer = text[spans[-1][0] : spans[-1][1]].split("</think>\n\n", 1)[1]
        assert "<tool_call>" not in answer
        if "passed in" in output:  # the pytest summary line, as printed
            summary = next(ln for ln in output.splitlines() if " passed" in ln)
            assert summary.strip("= ") in answer
        elif ": def " in output:  # outline: the path and lines it printed
            assert output.split(":", 1)[0] in answer and output.split(":")[1].split(" ")[0] in answer
        else:  # README or glob: a line of what was read
            assert not overview or "<parameter=path>\nREADME.md\n" in text
            assert any(
                line.split("\t")[-1].strip("# ") in answer for line in output.splitlines() if line.strip()
            )
    contrast = task_rows(rows, 8, seed=0, all_kinds=True)  # every kind on each repository: 2 x 4
    assert len(contrast) == 8
    first_repo = [r["text"].split("<|im_end|>", 1)[0] for r in contrast[:4]]
    assert len(set(first_repo)) == 1  # the same system prompt (repository) ...
    asks = [r["text"].split("<|im_start|>user\n", 1)[1].split("<tool_response>", 1)[0] for r in contrast[:4]]
    assert [a.split("<function=", 1)[1].split(">", 1)[0] for a in asks] == ["outline", "bash", "view", "glob"]
    only = task_rows(rows, 4, seed=0, all_kinds=True, kinds=["tests", "files"])
    calls = {
        r["text"].split("<|im_start|>user\n", 1)[1].split("<function=", 1)[1].split(">", 1)[0] for r in only
    }
    assert len(only) == 4 and calls == {"bash", "glob"}  # two repositories, the two kinds asked for
    with pytest.raises(ValueError, match="unknown kind"):
        task_rows(rows, 1, seed=0, kinds=["poem"])
    bare = task_rows(rows, 2, seed=0, no_readme=True)  # overviews of copies without the README
    assert len(bare) == 2 and all((Path(r["repo"]) / "README.md").is_file() for r in rows)  # originals kept
    for record in bare:  # a package: no module at the top either, so a glob finds one
        text = record["text"]
        assert (
            "README.md" not in text.split("<tool_response>")[1] and len(record["spans"]) == 4
        )  # listed: none
        assert "<function=glob>" in text.split("<tool_response>")[1]
        module = text.rsplit("<parameter=path>\n", 1)[1].split("\n", 1)[0]
        doc = text.rsplit("<tool_response>\n", 1)[1].split('"""')[1].strip()
        assert f'There is no README; `{module}` says: "{doc}"' in text[record["spans"][-1][0] :]
    heldout = synthfix(tmp_path / "ho", "heldout", 1, seed=0)
    with pytest.raises(ValueError, match="train split"):
        task_rows(heldout, 1, seed=0)


def test_the_repository_path_says_nothing_about_the_kind_of_request(tmp_path):
    """Social rows and repository questions show paths from one distribution, never the generator's
    own: a model that can tell them apart by the path answers "Run the tests." with "Hi!"."""
    import re

    from clover.evals.synthfix import generate as synthfix
    from clover.evals.synthfix.chat_rows import draw_root
    from clover.evals.synthfix.chat_tasks import generate as task_rows

    def roots(records: list[dict]) -> list[str]:
        return [re.search(r"working in the repository at (\S+)\.\n", r["text"])[1] for r in records]

    rows = synthfix(tmp_path / "sf", "train", 3, seed=4)
    tasks = roots(task_rows(rows, 12, seed=1, all_kinds=True))
    social = roots(generate(240, seed=1))
    assert not any(str(tmp_path) in root for root in tasks)
    assert len(set(tasks)) == 3  # one path per repository: its four questions share a system prompt
    top = lambda root: root.split("/")[1]  # noqa: E731
    assert {top(r) for r in tasks} <= {top(r) for r in social} and len({top(r) for r in social}) >= 6
    assert {top(draw_root(random.Random(seed))) for seed in range(2000)} == {top(r) for r in social}
    # ... directory names included: when the questions kept their package's name, `calc` meant "chat"
    from clover.evals.synthfix.chat_rows import ROOT_NAMES
    from clover.evals.synthfix.repo import PACKAGES

    base = lambda root: root.rsplit("/", 1)[1]  # noqa: E731
    assert {base(r) for r in tasks} <= set(ROOT_NAMES) and set(PACKAGES["train"]) < set(ROOT_NAMES)
    assert {base(r) for r in social} == set(ROOT_NAMES)


def test_decision_rows_are_the_thinking_alone(tmp_path):
    row = generate(1, seed=0)[0]
    cut = decision_row(row)
    ((start, end),) = cut["spans"]
    assert (
        row["text"].startswith(cut["text"]) and cut["text"].endswith("</think>") and end == len(cut["text"])
    )
    assert start == row["spans"][0][0] and cut["text"][start:].count("\n") == 1  # one line of thinking
    out = tmp_path / "d.jsonl"
    assert main(["--out", str(out), "--count", "2", "--decisions"]) == 0
    assert all(json.loads(ln)["text"].endswith("</think>") for ln in out.read_text().splitlines())
    with pytest.raises(ValueError, match="no thinking"):
        decision_row({"text": "x" * 10, "spans": [(0, 10)]})


def test_each_kind_of_request_starts_its_thinking_with_its_own_token():
    """Thinking lines that share a start pool their kinds' mass on it, and greedy decoding then takes
    that start whatever was asked (evals/synthfix/chat_rows.py THOUGHTS)."""
    from clover.evals.synthfix.chat_tasks import THINK
    from clover.model.text.tokenizer import CloverTokenizer

    tok = CloverTokenizer.from_dir("model/weights")
    lines = [*THOUGHTS.values(), *(v.format(name="add") for v in THINK.values())]
    firsts = [tok.encode(line)[0] for line in lines]
    assert len(set(firsts)) == len(lines)
    fix_starts = {tok.encode(w)[0] for w in ("The", "Let", "Now", "I", "Run", "Read", "All", "Found", "Edit")}
    assert not fix_starts & set(firsts)


def test_chat_prompt_replies_get_a_verdict_by_kind():
    """benchmarks/chat_prompts.verdict: the taught reply of the prompt's kind fits, another kind's
    does not, and an "I can't" of another kind is told apart from other replies."""
    from benchmarks.chat_prompts import LABELS, MORE_PROMPTS, verdict
    from benchmarks.chat_prompts import PROMPTS as MEASURED
    from clover.evals.synthfix.chat_rows import OPENINGS

    assert set(LABELS) == set(MEASURED + MORE_PROMPTS)
    assert verdict("hi", OPENINGS["greet"] + " I can find code.") == "fit"
    assert verdict("Thank you so much!", OPENINGS["thanks"]) == "fit"
    assert verdict("Run the tests.", OPENINGS["greet"]) == "other"
    assert verdict("Run the tests.", "All tests pass: 1 passed in 0.01s.") == "fit"
    assert verdict("Do all the tests pass?", OPENINGS["general"] + " I can run the tests.") == "cannot"
    assert verdict("Port this code to Go.", OPENINGS["can"] + " I can find code.") == "cannot"
    assert verdict("Who built you?", OPENINGS["thanks"]) == "other"
    assert (
        verdict("Where is mean defined?", "`mean` is defined in calc.py, lines 8-9: `def mean(values)`.")
        == "fit"
    )
    assert verdict("Where is mean defined?", "`add` is defined in calc.py, lines 4-5.") == "other"
    assert verdict("Port this code to Go.", OPENINGS["feature"]) == "fit"


def test_renamed_find_rows_ask_for_the_new_name_everywhere(tmp_path):
    import re

    from clover.evals.synthfix import generate as synthfix
    from clover.evals.synthfix.chat_tasks import generate as task_rows

    rows = synthfix(tmp_path / "sf", "train", 2, seed=3)
    records = task_rows(rows, 20, seed=0, kinds=["find"], renamed_copies=2)
    assert len(records) == 6  # each repository's row and its two renamed copies
    symbols = []
    for record in records:
        text = record["text"]
        symbol = text.split("<parameter=symbol>\n", 1)[1].split("\n", 1)[0]
        output = text.split("<tool_response>\n", 1)[1].split("</tool_response>", 1)[0]
        answer = text[record["spans"][-1][0] : record["spans"][-1][1]]
        assert f"def {symbol}(" in output and answer.split("</think>\n\n", 1)[1].startswith(
            f"`{symbol}` is defined"
        )
        assert re.search(
            rf"(?<![A-Za-z0-9_]){re.escape(symbol)}(?![A-Za-z0-9_])",
            text.split("<|im_start|>user\n", 1)[1].split("<|im_end|>", 1)[0],
        )
        symbols.append(symbol)
    assert len(set(symbols[:3])) == 3 and len(set(symbols[3:])) == 3  # the copies name other functions
    assert [r["text"] for r in task_rows(rows, 20, seed=0, kinds=["find"])] == [
        records[0]["text"],
        records[3]["text"],
    ]


def test_flat_copies_put_every_module_at_the_top_level(tmp_path):
    from clover.evals.synthfix import generate as synthfix
    from clover.evals.synthfix.chat_tasks import generate as task_rows
    from clover.evals.synthfix.repo_copies import flat_copy

    rows = synthfix(tmp_path / "sf", "train", 2, seed=3)
    copy = tmp_path / "flat"
    assert flat_copy(Path(rows[0]["repo"]), copy)
    sources = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*.py") if "tests" not in p.parts)
    assert sources and all("/" not in s for s in sources) and (copy / "tests").is_dir()
    records = task_rows(
        rows, 20, seed=0, kinds=["find", "files"], flat=True, all_kinds=True, renamed_copies=1
    )
    assert len(records) == 6  # per repository: find, its renamed copy, files
    for record in records:
        output = record["text"].split("<tool_response>\n", 1)[1].split("</tool_response>", 1)[0]
        sources = [line.split(":", 1)[0] for line in output.splitlines() if not line.startswith("tests/")]
        assert sources and all(s.endswith(".py") and "/" not in s for s in sources)
        answer = record["text"][record["spans"][-1][0] : record["spans"][-1][1]]
        assert f"`{sources[0]}`" in answer  # quoted: the same tokens as the tool output
    with pytest.raises(ValueError, match="flat copies"):
        task_rows(rows, 20, seed=0, kinds=["tests"], flat=True)


def test_flat_overviews_read_a_module_not_the_conftest(tmp_path):
    """The chat benchmark's repository lists an empty conftest.py next to its module: a flat copy can
    have one too, and the overview reads the module, never the conftest."""
    from clover.core.tool_protocol import tool_spec
    from clover.evals.synthfix import generate as synthfix
    from clover.evals.synthfix.chat_tasks import overview
    from clover.evals.synthfix.repo_copies import flat_copy
    from clover.tools.registry import default_tools

    rows = synthfix(tmp_path / "sf", "train", 2, seed=3)
    for k, row in enumerate(rows):
        copy = tmp_path / f"flat{k}"
        assert flat_copy(Path(row["repo"]), copy, conftest=True)
        (copy / "README.md").unlink(missing_ok=True)
        assert (copy / "conftest.py").read_text(encoding="utf-8") == ""
        record = overview(copy, random.Random(0), [tool_spec(t) for t in default_tools()], "/home/user/x")
        assert record is not None
        calls = [
            json.loads(m["tool_calls"][0]["function"]["arguments"])
            for m in record["messages"]
            if m.get("tool_calls")
        ]
        assert (
            calls[0] == {"path": "."}
            and calls[-1]["path"].endswith(".py")
            and calls[-1]["path"] != "conftest.py"
        )
        assert f"`{calls[-1]['path']}` says:" in record["messages"][-1]["content"]


def test_overviews_view_the_top_then_read_what_it_shows(tmp_path):
    """One module at the top and no README (the chat benchmark's repository): its top is read at once.
    A copy padded to a real project's size: its big test directory is folded, the README's top read."""
    from clover.evals.synthfix import generate as synthfix
    from clover.evals.synthfix.chat_overview import HEAD
    from clover.evals.synthfix.chat_tasks import generate as task_rows
    from clover.evals.synthfix.repo_copies import pad_copy

    def calls(text: str) -> list[str]:
        return [c.split(">", 1)[0] for c in text.split("<|im_start|>user\n", 1)[1].split("<function=")[1:]]

    rows = synthfix(tmp_path / "sf", "train", 2, seed=3)
    flat = task_rows(rows, 2, seed=0, flat=True, no_readme=True)
    assert len(flat) == 2
    for record in flat:
        text = record["text"]
        assert calls(text) == ["view", "view"] and len(record["spans"]) == 3
        module = text.rsplit("<parameter=path>\n", 1)[1].split("\n", 1)[0]
        assert "/" not in module and f"<parameter=view_range>\n{HEAD}\n" in text
        assert f"There is no README; `{module}` says:" in text[record["spans"][-1][0] :]
    big = task_rows(rows, 2, seed=0, big=True)
    for record in big:
        listing = record["text"].split("<tool_response>\n", 2)[1]
        assert "tests/ (" in listing and "[not listed]" in listing and "docs/ (" in listing
        assert len(listing.splitlines()) <= 90  # folded: the shape of the project, not every test file
        read = record["text"].split("<tool_response>\n", 3)[2].split("</tool_response>", 1)[0]
        assert read.splitlines()[-1].lstrip().startswith(str(HEAD[1]))  # a long README: its top only
        answer = record["text"][record["spans"][-1][0] :]
        assert answer.split("</think>\n\n", 1)[1].startswith("This is ")
    padded = tmp_path / "padded"
    pad_copy(Path(rows[0]["repo"]), padded, random.Random(0))
    assert (
        len(list((padded / "tests").glob("test_*.py"))) > 60 and not (Path(rows[0]["repo"]) / "docs").exists()
    )
    second = task_rows(rows, 4, seed=0, no_readme=True, cut_at=1)  # the step after the listing: a target
    assert len(second) == 2
    for record in second:
        first_target = record["text"][record["spans"][0][0] :]
        assert "<function=view>\n<parameter=path>\n.\n" in record["text"][: record["spans"][0][0]]
        assert first_target.startswith("There is no README")  # the listing's thinking is gone
        assert "Overview:" not in record["text"]
    with pytest.raises(ValueError, match="big copies"):
        task_rows(rows, 1, seed=0, big=True, flat=True)


def test_renamed_find_rows_rename_the_module_path_too(tmp_path):
    from clover.evals.synthfix import generate as synthfix
    from clover.evals.synthfix.chat_tasks import generate as task_rows

    rows = synthfix(tmp_path / "sf", "train", 1, seed=3)
    original, renamed = task_rows(rows, 20, seed=0, kinds=["find"], renamed_copies=1)
    path = original["text"].split("<tool_response>\n", 1)[1].split(":", 1)[0]
    new_path = renamed["text"].split("<tool_response>\n", 1)[1].split(":", 1)[0]
    assert path.count("/") == new_path.count("/") and set(path[:-3].split("/")).isdisjoint(
        new_path[:-3].split("/")
    )
    answer = renamed["text"][renamed["spans"][-1][0] : renamed["spans"][-1][1]]
    assert f" in `{new_path}`, lines" in answer and path not in renamed["text"]


def test_an_overview_reply_skips_a_readmes_commands_and_badges():
    from clover.evals.synthfix.chat_tasks import answer

    readme = [
        "# Tool",
        "",
        "[![CI](https://x/badge.svg)](https://x)",
        "```bash",
        "pip install tool",
        "```",
        "- a list item",
        "Tool turns CSV files into charts.",
        "",
        "More prose.",
    ]
    viewed = "\n".join(f"{n:6d}\t{line}" for n, line in enumerate(readme, 1))
    # quoted so the copies are the file's tokens: " Tool" as after "# ", '"Tool' as at a line's start
    assert answer("about", viewed, {}) == 'This is Tool: "Tool turns CSV files into charts."'
    assert answer("about", viewed + "\n[README.md has 90 lines; showing 1-10.]", {}).endswith('charts."')
    assert answer("about", "     1\t# Tool\n     2\t```\n     3\tonly code\n     4\t```", {}) is None
