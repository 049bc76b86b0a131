"""Package installs for the local grader, held to the environment's date with uv.

Today's releases break yesterday's code (docutils 0.22 dropped `docutils.utils.roman`, which Sphinx
3.x imports), so every install resolves as of one date: `uv pip install --exclude-newer DATE`.
pip has no per-package exception, and uv has one: the spec's own pins (`jinja2==3.0.3`, released
after some instances' dates) and what they need are let through by name, each one logged. uv also
names what it cannot find (a conda-only package in an environment.yml) or build, so the caller can
drop it and say why. Repository installs (`pip install -e .`) go through uv the same way, built
with a setuptools that can make editables (EDITABLE_BUILD_CONSTRAINTS); where none can (Python
3.6), pip's legacy develop install is used, as the official image did."""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

Run = Callable[[list[str]], tuple[int, str]]  # argv -> (exit status, output), logged by the caller

FUTURE = "2100-01-01T00:00:00Z"  # no cutoff
# SWE-bench Verified's publication: its official images were built by then, so nothing in them is
# newer. The test runner, with what it needs, resolves as of this date (before the repository's
# own requirements, which may pin it otherwise): the dataset's test ids are what the images' pytest
# printed (pytest >= 7 names a repeated parameter id `1234-1234_0`, the pytest of 2020 `1234-12340`,
# and sphinx-doc__sphinx-7462's PASS_TO_PASS would look failing).
HARNESS_DATE = "2024-08-13T00:00:00Z"
RUNNER = "pytest"
# The setuptools that builds the repository's editable install: 64 is the first with PEP 660
# editables (uv's only way to install one); 82 dropped pkg_resources, which the era's build
# helpers import (setuptools_scm < 7 does, in pytest's and astropy's setup).
EDITABLE_BUILD_CONSTRAINTS = "setuptools>=64,<82\n"
_FILTERED = re.compile(r"`([A-Za-z0-9_.\-]+)` was filtered by `exclude-newer`")
_NOT_FOUND = re.compile(
    r"Because ([A-Za-z0-9_.\-]+) was not found in the (?:package registry|provided package locations)"
)
_BUILD_FAILED = re.compile(
    r"Failed to (?:build|download and build|prepare distributions for) `([A-Za-z0-9_.\-]+)"
)
_NO_EDITABLE = re.compile(r"has no attribute 'build_editable'|does not support editable|build_editable")
_PIP_INSTALL = re.compile(r"^(?:python[0-9.]*\s+-m\s+)?pip\s+install\s+(.*)$")
_PIN = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*===?\s*[^,;\s]+\s*$")


class UvMissing(RuntimeError):
    pass


def uv_binary() -> str:
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise UvMissing("the local grader needs uv: pip install 'clover-cli[swebench]'")


def pinned_names(requirements: list[str]) -> set[str]:
    """Names of the exactly pinned requirements (`numpy==1.23.0`): the spec chose those versions."""
    return {normalize(m.group(1)) for r in requirements if (m := _PIN.match(r.strip()))}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pip_install_args(command: str) -> list[str] | None:
    """The arguments of a `python -m pip install ARGS` / `pip install ARGS` command, else None."""
    m = _PIP_INSTALL.match(command.strip())
    return shlex.split(m.group(1)) if m else None


@dataclass
class Installer:
    """`uv pip install` into one venv, held to `exclude_newer` (None: not held).

    `let_through` gives some packages a later cutoff: HARNESS_DATE first (no official image holds
    anything newer), no cutoff if even that hides what the request needs."""

    venv: Path
    exclude_newer: str | None
    let_through: dict[str, str] = field(default_factory=dict)  # normalized name -> its own cutoff
    index_args: list[str] = field(default_factory=list)  # e.g. ["--offline"] or a wheelhouse
    notes: list[str] = field(default_factory=list)  # what was let through, and why
    project: str | None = None  # the distribution the repository installs as, once installed

    def argv(self, args: list[str], *, build_tools_now: bool = False, as_of: str | None = None) -> list[str]:
        """`as_of`: this install's own date instead of the environment's (the test runner's)."""
        argv = [
            uv_binary(),
            "pip",
            "install",
            "--python",
            str(self.venv / "bin" / "python"),
            *self.index_args,
        ]
        if build_tools_now:
            constraints = self.venv / "editable-build-constraints.txt"
            constraints.write_text(EDITABLE_BUILD_CONSTRAINTS, encoding="utf-8")
            argv += ["--build-constraints", str(constraints)]
        date = as_of or self.exclude_newer
        if date:
            argv += ["--exclude-newer", date]
            cutoffs = dict(self.let_through)
            if build_tools_now:
                cutoffs.setdefault("setuptools", HARNESS_DATE)
            for name, cutoff in sorted(cutoffs.items()):
                if cutoff > date:
                    argv += ["--exclude-newer-package", f"{name}={cutoff}"]
        return argv + args

    def let(self, name: str, why: str) -> bool:
        """Move `name`'s cutoff one step later; False when it has none left."""
        current = self.let_through.get(name)
        if current == FUTURE:
            return False
        self.let_through[name] = HARNESS_DATE if current is None else FUTURE
        self.notes.append(f"{name}: as of {self.let_through[name][:10]}, needed by {why}")
        return True

    def install(
        self,
        args: list[str],
        run: Run,
        *,
        build_tools_now: bool = False,
        as_of: str | None = None,
        why: str = "",
    ) -> tuple[int, str]:
        """Install; a package that the cutoff hides but the request needs (a pin's dependency) is
        let through and the install retried, each one noted."""
        for _ in range(60):
            rc, out = run(self.argv(args, build_tools_now=build_tools_now, as_of=as_of))
            hidden = list(dict.fromkeys(normalize(n) for n in _FILTERED.findall(out))) if rc else []
            if not [name for name in hidden if self.let(name, why or "the request")]:
                return rc, out
        return rc, out


def not_found(output: str) -> list[str]:
    """Packages uv found in no registry (conda-only names, typos)."""
    return list(dict.fromkeys(_NOT_FOUND.findall(output)))


def build_failures(output: str) -> list[str]:
    return list(dict.fromkeys(_BUILD_FAILED.findall(output)))


def needs_legacy_editable(output: str) -> bool:
    return bool(_NO_EDITABLE.search(output))
