"""Copies of a SynthFix repository in other shapes, for chat questions (chat_tasks.py): every module at
the top level (`flat_copy`), or grown to a real project's size (`pad_copy`)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

NOT_SOURCE = ("__init__.py", "conftest.py", "setup.py")  # Python files that are not a source module

_DOCS = [
    "index",
    "install",
    "usage",
    "api",
    "changelog",
    "faq",
    "design",
    "testing",
    "release",
    "tutorial",
    "configuration",
    "contributing",
    "roadmap",
    "glossary",
]
_SECTIONS = [
    "Installation",
    "Usage",
    "Development",
    "Testing",
    "Configuration",
    "Contributing",
    "License",
    "Changelog",
    "Roadmap",
    "Acknowledgements",
]
_TOP = ["CHANGELOG.md", "LICENSE", "Makefile", "CONTRIBUTING.md", "tox.ini", "setup.cfg", "MANIFEST.in"]


def pad_copy(repo: Path, dest: Path, rng: random.Random) -> None:
    """Copy `repo` to `dest` grown to a real project's size: docs, examples, scripts, CI files and a few
    dozen more tests, a README of many sections. Every SynthFix repository is a dozen files, so a model
    taught on them only lost its way in a real one (a 389-file listing, a 200-line README)."""
    shutil.copytree(repo, dest, ignore=shutil.ignore_patterns(".git", ".pytest_cache", "__pycache__"))
    readme = dest / "README.md"
    if readme.is_file():
        extra = "".join(
            f"\n## {name}\n\n"
            + "".join(f"- {name.lower()} note {k}: see the docs.\n" for k in range(rng.randint(4, 9)))
            for name in rng.sample(_SECTIONS, rng.randint(5, len(_SECTIONS)))
        )
        readme.write_text(readme.read_text(encoding="utf-8") + extra, encoding="utf-8")
    files = {f"docs/{d}.md": f"# {d.title()}\n" for d in rng.sample(_DOCS, rng.randint(6, len(_DOCS)))}
    files |= {f"examples/example_{k}.py": f'"""Example {k}."""\n' for k in range(rng.randint(2, 6))}
    files |= {f"scripts/{n}.sh": "#!/bin/sh\n" for n in rng.sample(["build", "lint", "release", "bench"], 2)}
    files |= {".github/workflows/ci.yml": "name: ci\n"} | {
        t: "\n" for t in rng.sample(_TOP, rng.randint(2, 6))
    }
    tests = sorted((dest / "tests").glob("test_*.py"))
    for k in range(rng.randint(60, 120)) if tests else []:
        source = tests[k % len(tests)]
        files[f"tests/{source.stem}_{k}.py"] = source.read_text(encoding="utf-8")
    for rel, text in files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text, encoding="utf-8")


def flat_copy(repo: Path, dest: Path, conftest: bool = False) -> bool:
    """Copy `repo` to `dest` with every source module at the top level (pkg/sub/mod.py -> mod.py), README
    and tests kept: the one-module layout of many small projects (`calc.py`), which no SynthFix repository
    has, so a model taught on them only ever copied `pkg/mod.py` paths. False (nothing usable) when two
    modules share a file name. The tests' imports no longer resolve: only ask what needs no test run.
    `conftest`: add an empty top-level conftest.py (the usual way such a project puts its root on the
    tests' path), a listed file that is not the module to read."""
    modules = [
        p
        for p in sorted(repo.rglob("*.py"))
        if p.relative_to(repo).parts[0] != "tests" and p.name not in NOT_SOURCE
    ]
    if not modules or len({p.name for p in modules}) < len(modules):
        return False
    shutil.copytree(
        repo / "tests", dest / "tests", ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache")
    )
    for name in ("README.md", "conftest.py"):
        if (repo / name).is_file():
            shutil.copy2(repo / name, dest / name)
    for module in modules:
        shutil.copy2(module, dest / module.name)
    if conftest and not (dest / "conftest.py").exists():
        (dest / "conftest.py").write_text("", encoding="utf-8")
    return True
