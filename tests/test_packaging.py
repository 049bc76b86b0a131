"""The installed distribution owns one import name, `clover`, and carries what users run.

The repository keeps its folders (clover_cli/, core/, model/, ...); pyproject.toml maps them under
`clover`. These tests check that the mapping is complete and that a real wheel, installed into a
fresh virtual environment, puts exactly `clover` (plus its dist-info) into site-packages.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from clover.core.compat import tomllib

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL = {"clover"}  # the only import name Clover installs
NOT_SHIPPED = {"tests", "benchmarks"}


def _setuptools_table() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _expected_packages() -> set[str]:
    """Every folder with an __init__.py under a mapped root, named as it installs."""
    found = set()
    for name, folder in _setuptools_table()["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            sub = name.split(".") + list(rel.parts)
            if not any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                found.add(".".join(sub))
    return found


def test_every_subpackage_is_listed_and_nothing_else_is():
    listed = set(_setuptools_table()["packages"])
    assert listed == _expected_packages()
    assert {p.split(".")[0] for p in listed} == TOP_LEVEL


def test_the_source_tree_imports_only_through_clover():
    """No module imports a mapped folder by its folder name (`import model`): that works in the
    source tree by accident of sys.path and breaks in the installed wheel."""
    folders = {"clover_cli", "core", "model", "kernels", "tools", "evals"}
    offenders = []
    for folder in [*folders, "tests", "benchmarks"]:
        for path in (ROOT / folder).rglob("*.py"):
            for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                words = line.split()
                if len(words) >= 2 and words[0] in {"import", "from"} and words[1].split(".")[0] in folders:
                    offenders.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    assert offenders == []


def _installed_top_level(python: Path) -> set[str]:
    code = (
        "import importlib.metadata as m\n"
        "files = m.distribution('clover-cli').files or []\n"
        "print('\\n'.join(sorted({f.parts[0] for f in files if not f.parts[0].endswith('.dist-info')"
        " and f.parts[0] != '..'})))"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True, cwd="/")
    return {line for line in out.stdout.split() if line}


@pytest.mark.slow
def test_installed_wheel_puts_only_clover_into_site_packages(tmp_path):
    """Builds the wheel, installs it (without dependencies) into a fresh venv and lists what the
    install recorded. In CI `.ci/wheel_check.sh` passes its own full install as CLOVER_TEST_VENV."""
    given = os.environ.get("CLOVER_TEST_VENV")
    if given:
        python = Path(given) / "bin" / "python"
    else:
        dist = tmp_path / "dist"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(dist),
                str(ROOT),
            ],
            check=True,
            capture_output=True,
        )
        (wheel,) = dist.glob("clover_cli-*.whl")
        names = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
        assert {n for n in names if not n.endswith(".dist-info")} == TOP_LEVEL
        shipped = zipfile.ZipFile(wheel).namelist()
        assert "clover/model/weights/model.safetensors" in shipped
        assert not any(n.split("/")[1] in NOT_SHIPPED for n in shipped if n.startswith("clover/"))
        venv.create(tmp_path / "venv", with_pip=True)
        python = tmp_path / "venv" / "bin" / "python"
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
            check=True,
            capture_output=True,
        )
    assert _installed_top_level(python) == TOP_LEVEL
