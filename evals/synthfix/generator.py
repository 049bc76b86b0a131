"""Generate small real git repositories with one injected bug each, as SWE-bench style instances.

For instance `index` of a split and seed, a private `random.Random` picks the bug family (round
robin, so every family is covered), a module template with split-specific identifiers, companion
modules, a layout, and one mutation that changes the result of at least one example call. The
examples are evaluated in-process against the correct and the buggy module: calls whose result the
bug changes become the new failing tests (FAIL_TO_PASS, added by `test_patch`); the rest are the
repo's existing tests (PASS_TO_PASS).
"""

from __future__ import annotations

import ast
import builtins
import json
import random
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from clover.evals.synthfix import families
from clover.evals.synthfix.issues import Outcome, format_traceback, problem_statement, prose_statement
from clover.evals.synthfix.repo import AUTHORS, LAYOUTS, PACKAGES, GitRepo, Layout, commit_layout, commit_time
from clover.evals.synthfix.templates import ModuleTemplate, all_templates

Split = Literal["train", "heldout"]
SPLITS: tuple[str, ...] = ("train", "heldout")
MAX_NEW_TESTS = 3


@dataclass
class _Module:
    template: ModuleTemplate
    names: dict[str, str]
    name: str
    path: str
    dotted: str
    test_path: str
    source: str

    def cases(self) -> list[tuple[str, str, str]]:
        """(unit name, test name, expression) with identifiers filled in."""
        out = []
        for unit, label, expr in self.template.cases:
            unit_name = self.names[unit]
            test = f"test_{_snake(unit_name)}_{_snake(self.template.expr(label, self.names))}"
            out.append((unit_name, test, self.template.expr(expr, self.names)))
        return out


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _literal(value: object) -> str:
    """`repr`, but with double-quoted strings like hand-written test code."""
    if isinstance(value, str):
        simple = value.isprintable() and '"' not in value and "\\" not in value
        return f'"{value}"' if simple else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _run_cases(source: str, filename: str, dotted: str, exprs: list[str]) -> list[Outcome]:
    namespace: dict = {"__name__": dotted}
    exec(compile(source, filename, "exec"), namespace)
    lines = source.splitlines()
    results = []
    for expr in exprs:
        try:
            results.append(Outcome(value=eval(compile(expr, "<stdin>", "eval"), namespace)))
        except Exception as err:  # the bug's symptom, recorded rather than raised
            shown = f"/home/dev/project/{filename}"
            results.append(Outcome(error=err, trace=format_traceback(err, filename, lines, shown)))
    return results


def _test_fails(correct: Outcome, buggy: Outcome) -> bool:
    """Would the assertion rendered by `_assertion` fail when run against the buggy code?"""
    if correct.raised:
        return not (buggy.raised and isinstance(buggy.error, type(correct.error)))
    if buggy.raised:
        return True
    if correct.value is None or isinstance(correct.value, bool):
        return buggy.value is not correct.value
    try:
        return not bool(buggy.value == correct.value)
    except Exception:
        return True


def _assertion(expr: str, correct: Outcome) -> str:
    if correct.raised:
        return f"    with pytest.raises({correct.error_name}):\n        {expr}\n"
    if correct.value is None or isinstance(correct.value, bool):
        return f"    assert {expr} is {correct.value!r}\n"
    return f"    assert {expr} == {_literal(correct.value)}\n"


def _check_case(module: _Module, expr: str, outcome: Outcome) -> None:
    """Template sanity: expected values must survive repr -> eval, errors must be builtins."""
    if outcome.raised:
        if not hasattr(builtins, outcome.error_name):
            raise ValueError(f"{module.template.key}: {expr} raises non-builtin {outcome.error_name}")
    elif eval(_literal(outcome.value), {}) != outcome.value:
        raise ValueError(f"{module.template.key}: result of {expr} does not round-trip through repr")


def _render_tests(module: _Module, picked: list[tuple[str, str, str, Outcome]]) -> str:
    units = [u for u in dict.fromkeys(unit for unit, _, _, _ in picked)]
    order = list(dict.fromkeys(unit for unit, _, _ in module.cases()))
    units.sort(key=order.index)
    head = [f'"""Tests for {module.dotted}."""\n']
    if any(outcome.raised for *_, outcome in picked):
        head.append("import pytest\n")
    head.append(f"from {module.dotted} import {', '.join(units)}\n")
    body = [f"\n\ndef {test}():\n{_assertion(expr, outcome)}" for _, test, expr, outcome in picked]
    return "\n".join(head) + "".join(body)


def _docstring(source: str, call_expr: str) -> str | None:
    """First docstring line of the function or method the example calls last."""
    node = ast.parse(call_expr, mode="eval").body
    target = node.func if isinstance(node, ast.Call) else None
    name = (
        target.id
        if isinstance(target, ast.Name)
        else target.attr
        if isinstance(target, ast.Attribute)
        else None
    )
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, (ast.FunctionDef, ast.ClassDef)) and fn.name == name:
            doc = ast.get_docstring(fn)
            return doc.splitlines()[0] if doc else None
    return None


def pick_module(tpl: ModuleTemplate, split: str, rng: random.Random, pkg: str, layout: Layout) -> _Module:
    names = {key: rng.choice(tpl.split_choices(alts, split)) for key, alts in sorted(tpl.idents.items())}
    mod = rng.choice(tpl.split_choices(tpl.module_names, split))
    return _Module(
        tpl,
        names,
        mod,
        layout.module_path(pkg, mod),
        layout.dotted(pkg, mod),
        layout.test_path(mod),
        tpl.render(names),
    )


@dataclass
class _Bug:
    module: _Module
    unit: str
    mutation: families.Mutation
    buggy_source: str
    correct: list[Outcome]
    buggy: list[Outcome]


def valid_bugs(module: _Module, family: str, rng: random.Random | None = None):
    """Yield `(unit, mutation, buggy_source, correct, buggy)` for every mutation of `family` in
    `module` that makes at least one example's test fail (shuffled when `rng` is given)."""
    exprs = [expr for _, _, expr in module.cases()]
    correct = _run_cases(module.source, module.path, module.dotted, exprs)
    for expr, outcome in zip(exprs, correct, strict=True):
        _check_case(module, expr, outcome)
    units = list(dict.fromkeys(unit for unit, _, _ in module.cases()))
    if rng:
        rng.shuffle(units)
    for unit in units:
        options = families.candidates(family, module.source, unit)
        if rng:
            rng.shuffle(options)
        for mutation in options:
            buggy_source = families.apply(module.source, mutation)
            try:
                buggy = _run_cases(buggy_source, module.path, module.dotted, exprs)
            except Exception:
                continue  # the mutant does not even import
            if any(_test_fails(c, b) for c, b in zip(correct, buggy, strict=True)):
                yield unit, mutation, buggy_source, correct, buggy


def _find_bug(family: str, rng: random.Random, split: str, pkg: str, layout: Layout) -> _Bug:
    templates = list(all_templates(split))
    rng.shuffle(templates)
    for tpl in templates:
        module = pick_module(tpl, split, rng, pkg, layout)
        for unit, mutation, buggy_source, correct, buggy in valid_bugs(module, family, rng):
            return _Bug(module, unit, mutation, buggy_source, correct, buggy)
    raise RuntimeError(f"no template accepts a {family} bug")


# One example of a bugged module: (unit, test name, call expression, correct and buggy outcomes).
_Case = tuple[str, str, str, Outcome, Outcome]


def _split_cases(bug: _Bug, rng: random.Random) -> tuple[list[_Case], _Case, list[_Case], list[_Case]]:
    """The bugged module's examples split into (kept, headline, new, full): kept pass with the bug
    (the repository's tests), new are the failing ones the hidden tests add (headline the one the
    issue reports), full is the whole hidden test file's cases in the module's order."""
    kept, failing = [], []
    for (unit, test, expr), c, b in zip(bug.module.cases(), bug.correct, bug.buggy, strict=True):
        (failing if _test_fails(c, b) else kept).append((unit, test, expr, c, b))
    headline = next((f for f in failing if f[0] == bug.unit), failing[0])
    extra = [f for f in failing if f is not headline]
    new = [headline, *rng.sample(extra, min(len(extra), MAX_NEW_TESTS - 1))]
    new_names = {f[1] for f in new}
    full = [f for f in failing if f[1] in new_names] + kept
    full_order = [t for _, t, _ in bug.module.cases()]
    full.sort(key=lambda f: full_order.index(f[1]))
    return kept, headline, new, full


def _commit_modules(
    repo: GitRepo, rng: random.Random, modules: list[_Module], bug: _Bug, kept: list[_Case], moment: datetime
) -> tuple[dict[str, str | None], list[str], datetime]:
    """A commit per module with its passing tests (the bugged module as bugged, with its kept cases);
    returns (test file texts by path, None where a module has none; PASS_TO_PASS; the last commit's time)."""
    tests_text: dict[str, str | None] = {}
    p2p: list[str] = []
    for m in modules:
        if m is bug.module:
            picked = [(u, t, e, c) for u, t, e, c, _ in kept]
            source = bug.buggy_source
        else:
            exprs = [e for _, _, e in m.cases()]
            outcomes = _run_cases(m.source, m.path, m.dotted, exprs)
            picked = [(u, t, e, o) for (u, t, e), o in zip(m.cases(), outcomes, strict=True)]
            source = m.source
        repo.write(m.path, source)
        tests_text[m.test_path] = _render_tests(m, picked) if picked else None
        if picked:
            repo.write(m.test_path, tests_text[m.test_path])
        p2p += [f"{m.test_path}::{t}" for _, t, _, _ in picked]
        moment += timedelta(hours=rng.randint(1, 72))
        repo.commit(
            rng.choice(("Add {} module", "Add {} helpers with tests", "Implement {}")).format(m.name),
            commit_time(moment),
        )
    return tests_text, p2p, moment


def _issue(
    rng: random.Random,
    style: random.Random,
    prose_fraction: float,
    pkg: str,
    version: str,
    module: _Module,
    headline: _Case,
) -> str:
    """The issue reporting the headline case: a templated report or, a `prose_fraction` share of
    the time (drawn from `style`, its own stream), plain prose."""
    unit, test, expr, correct, buggy = headline
    subject = unit
    call = ast.parse(expr, mode="eval").body
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        subject = f"{unit}.{call.func.attr}"
    statement = problem_statement(
        rng,
        pkg=pkg,
        version=version,
        dotted=module.dotted,
        name=unit,
        subject=subject,
        call=expr,
        doc=_docstring(module.source, expr),
        correct=correct,
        buggy=buggy,
    )
    if style.random() < prose_fraction:
        statement = prose_statement(
            style,
            name=subject,
            call=expr,
            correct=correct,
            buggy=buggy,
            test=f"{module.test_path}::{test}",
        )
    return statement


def build_instance(out_dir: Path, split: str, seed: int, index: int, prose_fraction: float = 0.0) -> dict:
    """One instance. A `prose_fraction` share of issues are plain prose (prose_statement); that
    choice has its own random stream, so at 0 the instances are exactly those of earlier versions."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    rng = random.Random(f"synthfix:{split}:{seed}:{index}")
    pool = families.split_families(split)
    family = pool[(seed + index) % len(pool)]
    pkg = rng.choice(PACKAGES[split])
    layout = rng.choice(LAYOUTS[split])
    version = f"{rng.randint(0, 3)}.{rng.randint(1, 12)}"
    bug = _find_bug(family, rng, split, pkg, layout)

    others = [t for t in all_templates(split) if t.key != bug.module.template.key]
    companions = [pick_module(t, split, rng, pkg, layout) for t in rng.sample(others, rng.randint(1, 2))]
    modules = [bug.module, *companions]
    rng.shuffle(modules)
    kept, headline, new, full = _split_cases(bug, rng)

    instance_id = f"synthfix-{split}__{pkg}-{seed}-{index:04d}"
    repo_dir = Path(out_dir).resolve() / "repos" / instance_id
    if repo_dir.exists():
        shutil.rmtree(repo_dir)
    repo = GitRepo(repo_dir, rng.choice(AUTHORS))
    repo.init()
    moment = commit_layout(repo, rng, pkg, version, layout, [(m.dotted, m.template.summary) for m in modules])
    tests_text, p2p, moment = _commit_modules(repo, rng, modules, bug, kept, moment)
    base_commit = repo.git("rev-parse", "HEAD").strip()

    module = bug.module
    patch = repo.diff_against_head(module.path, module.source, bug.buggy_source)
    full_tests = _render_tests(module, [(u, t, e, c) for u, t, e, c, _ in full])
    test_patch = repo.diff_against_head(module.test_path, full_tests, tests_text[module.test_path])
    style = random.Random(f"synthfix-style:{split}:{seed}:{index}")
    statement = _issue(rng, style, prose_fraction, pkg, version, module, headline)
    created = moment + timedelta(days=rng.randint(1, 60), minutes=rng.randint(0, 1439))
    return {
        "instance_id": instance_id,
        "repo": str(repo_dir),
        "base_commit": base_commit,
        "problem_statement": statement,
        "patch": patch,
        "test_patch": test_patch,
        "FAIL_TO_PASS": json.dumps([f"{module.test_path}::{f[1]}" for f in new]),
        "PASS_TO_PASS": json.dumps(p2p),
        "version": version,
        "created_at": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "environment_setup_commit": base_commit,
        "hints_text": "",
        "family": family,
        "split": split,
    }


def generate(
    out_dir: str | Path, split: Split, count: int, seed: int, prose_fraction: float = 0.0
) -> list[dict]:
    """Create `count` repos under `out_dir/repos/` and return their SWE-bench rows (`write_jsonl` saves them)."""
    if count < 0:
        raise ValueError("count must be >= 0")
    if not 0.0 <= prose_fraction <= 1.0:
        raise ValueError("prose_fraction must be within [0, 1]")
    return [build_instance(Path(out_dir), split, seed, i, prose_fraction) for i in range(count)]


def write_jsonl(rows: list[dict], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def read_jsonl(path: str | Path) -> list[dict]:
    """write_jsonl's rows back (blank lines skipped); OSError / ValueError on a missing or bad file
    (the ValueError names the file and line)."""
    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not a JSON row ({exc.msg})") from None
    return rows
