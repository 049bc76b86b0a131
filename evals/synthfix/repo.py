"""Repository layouts and the git plumbing that makes every generated repo byte-for-byte reproducible."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


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
    """A repository in a directory we own, driven through the git CLI with a sealed environment."""

    def __init__(self, path: Path, author: tuple[str, str]) -> None:
        self.path = path
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(path),  # no user config can leak in
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": author[0],
            "GIT_AUTHOR_EMAIL": author[1],
            "GIT_COMMITTER_NAME": author[0],
            "GIT_COMMITTER_EMAIL": author[1],
            "LC_ALL": "C",
            "TZ": "UTC",
        }

    def git(self, *args: str) -> str:
        proc = subprocess.run(
            ["git", *args], cwd=self.path, env=self.env, capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed in {self.path}: {proc.stderr.strip()}")
        return proc.stdout

    def init(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def write(self, rel: str, text: str) -> None:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")

    def commit(self, message: str, when: str) -> str:
        self.git("add", "-A")
        env_backup = dict(self.env)
        self.env.update(GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when)
        try:
            self.git("commit", "-q", "--no-verify", "--no-gpg-sign", "-m", message)
        finally:
            self.env = env_backup
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
