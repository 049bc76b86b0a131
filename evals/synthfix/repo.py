"""Repository layouts and the git plumbing that makes every generated repo byte-for-byte reproducible."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from clover.evals.git import Identity, git


@dataclass(frozen=True)
class Layout:
    """Where the package and its tests live. Train and held-out splits use different layouts: both
    have src/ ones (a user's repo may), but only held-out has a src/ package without a subpackage
    and tests under tests/unit."""

    name: str
    src: bool  # package under src/ (else at the repo root)
    sub: str  # optional subpackage the modules live in
    tests_dir: str

    def package_dirs(self, pkg: str) -> list[str]:
        root = f"src/{pkg}" if self.src else pkg
        return [root, f"{root}/{self.sub}"] if self.sub else [root]

    def module_path(self, pkg: str, module: str) -> str:
        return f"{self.package_dirs(pkg)[-1]}/{module}.py"

    def dotted(self, pkg: str, module: str) -> str:
        return ".".join([pkg, *([self.sub] if self.sub else []), module])

    def test_path(self, module: str) -> str:
        return f"{self.tests_dir}/test_{module}.py"

    @property
    def pythonpath(self) -> str:
        return "src" if self.src else "."


LAYOUTS: dict[str, tuple[Layout, ...]] = {
    "train": (
        Layout("flat", src=False, sub="", tests_dir="tests"),
        Layout("flat_common", src=False, sub="common", tests_dir="tests"),
        Layout("flat_helpers", src=False, sub="helpers", tests_dir="tests"),
        Layout("src_util", src=True, sub="util", tests_dir="tests"),
        Layout("src_base", src=True, sub="base", tests_dir="tests"),
    ),
    "heldout": (
        Layout("src", src=True, sub="", tests_dir="tests"),
        Layout("src_core", src=True, sub="core", tests_dir="tests/unit"),
        Layout("src_lib", src=True, sub="lib", tests_dir="tests"),
    ),
}

PACKAGES: dict[str, tuple[str, ...]] = {
    "train": ("toolbox", "utilkit", "pyhelpers", "corelib", "handy", "bricks", "workbench", "gadgets"),
    "heldout": ("nimbus", "quill", "lattice", "ember", "orchard", "cobalt", "meadow", "tundra"),
}

AUTHORS = (
    ("Alex Moreno", "alex.moreno@example.com"),
    ("Priya Natarajan", "priya@example.org"),
    ("Jonas Berg", "jonas.berg@example.net"),
    ("Mei Tanaka", "mei.t@example.com"),
    ("Sam Okafor", "sam.okafor@example.org"),
)

GITIGNORE = "__pycache__/\n*.pyc\n.pytest_cache/\n*.egg-info/\nbuild/\ndist/\n"


def pyproject(pkg: str, version: str, description: str, layout: Layout) -> str:
    return (
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{pkg}"\nversion = "{version}"\ndescription = "{description}"\n'
        'requires-python = ">=3.9"\n\n'
        f'[tool.pytest.ini_options]\npythonpath = ["{layout.pythonpath}"]\ntestpaths = ["tests"]\n'
    )


class GitRepo:
    """A repository in a directory we own, driven through the evals' git (evals/git.py): no user or
    system config, a fixed author, and commit dates given by the caller."""

    def __init__(self, path: Path, author: tuple[str, str]) -> None:
        self.path = path
        self.author = author

    def git(self, *args: str, when: str | None = None) -> str:
        return git(self.path, *args, identity=Identity(*self.author, when)).stdout

    def init(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def write(self, rel: str, text: str) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")

    def commit(self, message: str, when: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--no-verify", "--no-gpg-sign", "-m", message, when=when)
        return self.git("rev-parse", "HEAD").strip()

    def diff_against_head(self, rel: str, new_text: str, old_text: str | None) -> str:
        """The `git diff` that turns the committed file into `new_text`; the work tree is restored."""
        self.write(rel, new_text)
        if old_text is None:
            self.git("add", "-N", "--", rel)  # intent-to-add, so a new file shows up in the diff
        try:
            return self.git("diff", "--no-color", "--no-ext-diff", "--", rel)
        finally:
            if old_text is None:
                self.git("rm", "-q", "--cached", "--", rel)
                (self.path / rel).unlink()
            else:
                self.write(rel, old_text)


def commit_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S+0000")


def commit_layout(
    repo: GitRepo, rng: random.Random, pkg: str, version: str, layout: Layout, modules: list[tuple[str, str]]
) -> datetime:
    """The project's first commit (README, pyproject, packages' __init__.py), describing `modules`
    ((dotted name, summary) each); returns its time."""
    moment = datetime(2023, 1, 1) + timedelta(days=rng.randint(0, 500), hours=rng.randint(8, 18))
    description = f"Small utilities: {', '.join(summary for _, summary in modules)}"
    readme = [f"# {pkg}\n", f"{description}.\n", "## Modules\n"]
    readme += [f"- `{dotted}`: {summary}" for dotted, summary in modules]
    readme += ["\n## Development\n", "```\npip install -e .\npython -m pytest\n```\n"]
    repo.write("README.md", "\n".join(readme))
    repo.write("pyproject.toml", pyproject(pkg, version, description, layout))
    repo.write(".gitignore", GITIGNORE)
    root, *subs = layout.package_dirs(pkg)
    repo.write(f"{root}/__init__.py", f'"""{description}."""\n\n__version__ = "{version}"\n')
    for sub in subs:
        repo.write(f"{sub}/__init__.py", f'"""Building blocks of {pkg}."""\n')
    repo.commit("Initial project layout", commit_time(moment))
    return moment
