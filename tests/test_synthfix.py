"""The synthetic bug-fix generator: real git repos, deterministic, every instance fails then passes."""

from __future__ import annotations

import ast
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clover.evals.synthfix import families
from clover.evals.synthfix.generator import generate, pick_module, valid_bugs
from clover.evals.synthfix.repo import LAYOUTS, PACKAGES
from clover.evals.synthfix.templates import all_templates
from clover.evals.synthfix.verify import verify_instance

ROOT = Path(__file__).resolve().parents[1]
KEYS = {
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "version",
    "created_at",
    "environment_setup_commit",
    "hints_text",
    "family",
    "split",
}


def _git(repo: str | Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def _tree(repo: str | Path) -> dict[str, bytes]:
    root = Path(repo)
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


@pytest.fixture(scope="module")
def train_rows(tmp_path_factory) -> list[dict]:
    # One instance per family: the family is chosen round robin from the index.
    return generate(tmp_path_factory.mktemp("train"), "train", len(families.TRAIN_FAMILIES), seed=0)


@pytest.fixture(scope="module")
def heldout_rows(tmp_path_factory) -> list[dict]:
    return generate(tmp_path_factory.mktemp("heldout"), "heldout", len(families.FAMILIES), seed=0)


def test_rows_have_swebench_shape(train_rows, heldout_rows):
    rows = train_rows + heldout_rows
    assert len({r["instance_id"] for r in rows}) == len(rows)
    for row in rows:
        assert set(row) == KEYS
        assert row["environment_setup_commit"] == row["base_commit"]
        assert row["hints_text"] == ""
        f2p, p2p = json.loads(row["FAIL_TO_PASS"]), json.loads(row["PASS_TO_PASS"])
        assert f2p and p2p and not set(f2p) & set(p2p)
        assert all("::test_" in t and t.startswith("tests/") for t in f2p + p2p)
        # The repo sits at the buggy commit, clean, and both patches apply to it.
        assert _git(row["repo"], "rev-parse", "HEAD").strip() == row["base_commit"]
        assert _git(row["repo"], "status", "--porcelain") == ""
        assert row["patch"].startswith("diff --git a/") and row["test_patch"].startswith("diff --git a/")
        assert "tests/" not in row["patch"].splitlines()[0]
        subprocess.run(
            ["git", "apply", "--check", "-"], cwd=row["repo"], input=row["patch"], text=True, check=True
        )
        subprocess.run(
            ["git", "apply", "--check", "-"], cwd=row["repo"], input=row["test_patch"], text=True, check=True
        )
        # The new tests are not in the base commit.
        for test in f2p:
            path, name = test.split("::")
            file = Path(row["repo"]) / path
            assert not file.exists() or f"def {name}(" not in file.read_text()


def test_issue_text_describes_symptom_not_the_line(train_rows, heldout_rows):
    for row in train_rows + heldout_rows:
        text = row["problem_statement"]
        assert "```" in text and len(text.splitlines()[0]) < 120
        changed = [
            line[1:].strip()
            for line in row["patch"].splitlines()
            if line[:1] in "+-" and not line.startswith(("---", "+++"))
        ]
        assert changed
        if "Traceback" not in text:  # a traceback shows the crashing line, as Python would print it
            for line in changed:
                assert line not in text


def test_every_family_fails_before_and_passes_after_the_gold_fix(train_rows, heldout_rows):
    assert {r["family"] for r in train_rows} == set(families.TRAIN_FAMILIES)
    assert {r["family"] for r in heldout_rows} == set(families.FAMILIES)
    for row in train_rows + heldout_rows[:1]:
        verdict = verify_instance(row)
        assert verdict.ok, (row["instance_id"], row["family"], verdict.problems)


def test_generation_is_deterministic(tmp_path):
    a = generate(tmp_path / "a", "heldout", 2, seed=7)
    b = generate(tmp_path / "b", "heldout", 2, seed=7)
    for ra, rb in zip(a, b, strict=True):
        assert _tree(ra["repo"]) == _tree(rb["repo"])
        assert _git(ra["repo"], "log", "--format=%H %an %ae %ad %cd %s") == _git(
            rb["repo"], "log", "--format=%H %an %ae %ad %cd %s"
        )
        assert {**ra, "repo": ""} == {**rb, "repo": ""}
    # Regenerating into the same directory gives byte-identical rows, repo paths included.
    again = generate(tmp_path / "a", "heldout", 2, seed=7)
    assert json.dumps(again) == json.dumps(a)
    other = generate(tmp_path / "c", "heldout", 2, seed=8)
    assert [r["base_commit"] for r in other] != [r["base_commit"] for r in a]


def _identifiers(row: dict) -> tuple[set[str], set[str], str]:
    """(top-level function/class names, module names, package name) of a generated repo."""
    repo = Path(row["repo"])
    names, modules = set(), set()
    for path in repo.rglob("*.py"):
        rel = path.relative_to(repo)
        if rel.parts[0] in ("tests", ".git") or path.name == "__init__.py":
            continue
        modules.add(path.stem)
        tree = ast.parse(path.read_text())
        names |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return names, modules, row["instance_id"].split("__")[1].rsplit("-", 2)[0]


def test_heldout_differs_from_train_in_identifiers_and_layout(train_rows, heldout_rows):
    train = [_identifiers(r) for r in train_rows]
    held = [_identifiers(r) for r in heldout_rows]
    assert not set().union(*(t[0] for t in train)) & set().union(*(h[0] for h in held))
    assert not set().union(*(t[1] for t in train)) & set().union(*(h[1] for h in held))
    assert not {t[2] for t in train} & {h[2] for h in held}
    assert all((Path(r["repo"]) / "src").is_dir() for r in heldout_rows)
    # training has src/ layouts too, but never held-out's shapes: a src/ package without a
    # subpackage, tests under tests/unit
    assert all(lay.tests_dir == "tests" and (lay.sub or not lay.src) for lay in LAYOUTS["train"])
    assert any(not lay.sub or lay.tests_dir != "tests" for lay in LAYOUTS["heldout"])
    # The spelling pools themselves are disjoint, so this holds for any count and seed.
    for tpl in all_templates("train"):
        for pool in [tpl.module_names, *tpl.idents.values()]:
            assert not set(tpl.split_choices(pool, "train")) & set(tpl.split_choices(pool, "heldout"))
    assert not set(PACKAGES["train"]) & set(PACKAGES["heldout"])
    assert not {lay.name for lay in LAYOUTS["train"]} & {lay.name for lay in LAYOUTS["heldout"]}


def test_every_family_has_bugs_in_several_templates():
    layout = LAYOUTS["train"][0]
    for family in families.TRAIN_FAMILIES:
        hosts = []
        for tpl in all_templates("train"):
            module = pick_module(tpl, "train", random.Random(0), "pkg", layout)
            if next(valid_bugs(module, family), None) is not None:
                hosts.append(tpl.key)
        assert len(hosts) >= 3, (family, hosts)


@pytest.mark.parametrize(
    ("family", "source", "expected"),
    [
        ("wrong_operator", "def f(a, b):\n    return a + b\n", "def f(a, b):\n    return a - b\n"),
        ("off_by_one", "def f(xs):\n    return xs[:3]\n", "def f(xs):\n    return xs[:4]\n"),
        ("wrong_constant", "def f(m):\n    return m * 60\n", "def f(m):\n    return m * 100\n"),
        ("swapped_arguments", "def f(a, b):\n    return g(a, b)\n", "def f(a, b):\n    return g(b, a)\n"),
        ("missing_return", "def f(a):\n    b = a * 2\n    return b\n", "def f(a):\n    b = a * 2\n"),
        ("misspelt_name", "def f(total):\n    return total\n", "def f(total):\n    return totl\n"),
        ("wrong_default", "def f(a, sep=','):\n    return a\n", "def f(a, sep=';'):\n    return a\n"),
        (
            "inverted_condition",
            "def f(a):\n    if a == 1:\n        return 2\n",
            "def f(a):\n    if a != 1:\n        return 2\n",
        ),
        ("wrong_builtin", "def f(xs):\n    return max(xs)\n", "def f(xs):\n    return min(xs)\n"),
        (
            "wrong_builtin",
            "def f(s):\n    return s.strip().lower()\n",
            "def f(s):\n    return s.strip().upper()\n",
        ),
        (
            "wrong_attribute",
            "class f:\n    def area(self):\n        return self.w * self.h\n",
            "class f:\n    def area(self):\n        return self.h * self.h\n",
        ),
        (
            "wrong_attribute",
            'def f(u):\n    return f"{u.email} <{u.name}>"\n',
            'def f(u):\n    return f"{u.name} <{u.name}>"\n',
        ),
    ],
)
def test_family_mutations(family, source, expected):
    found = families.candidates(family, source, "f")
    assert found and families.apply(source, found[0]) == expected


def test_wrong_comparison_variants():
    source = "def f(a):\n    return a < 3\n"
    mutated = {families.apply(source, m) for m in families.candidates("wrong_comparison", source, "f")}
    assert mutated == {"def f(a):\n    return a <= 3\n", "def f(a):\n    return a > 3\n"}


def test_wrong_attribute_leaves_methods_and_assignments_alone():
    source = "class f:\n    def g(self):\n        self.n = self.size()\n        return self.n + self.m\n"
    mutated = {families.apply(source, m) for m in families.candidates("wrong_attribute", source, "f")}
    # only reads of data attributes change, and only into another data attribute (never `size`)
    assert mutated == {
        "class f:\n    def g(self):\n        self.n = self.size()\n        return self.m + self.m\n",
        "class f:\n    def g(self):\n        self.n = self.size()\n        return self.n + self.n\n",
    }


def test_heldout_library_and_families_stay_fixed():
    # Held-out figures compare across model generations only while its draws do not move.
    assert families.split_families("heldout") == families.FAMILIES
    assert not set(families.FAMILIES) & set(families.TRAIN_ONLY_FAMILIES)
    heldout_keys = {t.key for t in all_templates("heldout")}
    assert heldout_keys < {t.key for t in all_templates("train")}
    assert {"account", "trip", "book"}.isdisjoint(heldout_keys)


def test_unknown_family_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown bug family"):
        families.candidates("nope", "def f():\n    pass\n", "f")


def test_cli_writes_instances_jsonl(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "clover.evals.synthfix",
            "--split",
            "heldout",
            "--count",
            "2",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (out / "instances.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["split"] == "heldout" for r in rows)
    bad = subprocess.run(
        [sys.executable, "-m", "clover.evals.synthfix", "--split", "dev", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "invalid choice" in bad.stderr


@pytest.mark.slow
@pytest.mark.parametrize("split", ["train", "heldout"])
def test_many_instances_verify(tmp_path, split):
    rows = generate(tmp_path, split, 36, seed=11)
    problems = {r["instance_id"]: verify_instance(r).problems for r in rows}
    assert not {k: v for k, v in problems.items() if v}


def test_prose_issues_name_the_call_without_an_import_or_example(tmp_path, train_rows):
    rows = generate(tmp_path / "prose", "train", len(families.TRAIN_FAMILIES), seed=0, prose_fraction=1.0)
    for plain, prose in zip(train_rows, rows, strict=True):
        # only the text changes: the same repository, bug and tests as at prose_fraction 0
        assert {k: v for k, v in prose.items() if k not in ("problem_statement", "repo")} == {
            k: v for k, v in plain.items() if k not in ("problem_statement", "repo")
        }
        text = prose["problem_statement"]
        assert "import" not in text and "```python" not in text
        assert prose["problem_statement"] != plain["problem_statement"]
        assert re.search(r"\w\(", text)  # the call the user made is shown
    with pytest.raises(ValueError, match="prose_fraction"):
        generate(tmp_path / "bad", "train", 1, seed=0, prose_fraction=1.5)
