"""File lists that honour .gitignore, for every Environment: glob patterns, `git ls-files` (run
through the environment, so inside its sandbox or container, with hardened git) and a small
.gitignore-aware walk where git is missing or the directory is not in a repository."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clover.core.environment_protocol import FileStat, RunResult
from clover.tools.git.gitsafe import git_argv
from clover.tools.undo.treescan import CACHE_DIRS

MAX_FILES = 200_000  # a walk stops here
# Skipped by the walk outside git, where no .gitignore may name them: the regenerable caches (the
# one list, treescan.py's), version-control stores and editor metadata. Undo's scan keeps the last
# two apart from the caches (it records .git itself, and an editor's settings are the user's work),
# which is why this list is larger than CACHE_DIRS.
NOISE_DIRS = CACHE_DIRS | {".git", ".hg", ".svn", ".idea", ".DS_Store"}
LS_FILES = ["ls-files", "-z", "--cached", "--others", "--exclude-standard"]
Runner = Callable[..., RunResult]  # Environment.run


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob as a regex over '/'-separated paths: `**` crosses directories, `*` and `?` do not,
    `[abc]` classes and `{a,b}` alternatives work."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1
            j += pattern[j : j + 1] in ("!", "^")
            j += pattern[j : j + 1] == "]"
            end = pattern.find("]", j)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "{" and "}" in pattern[i:]:
            end = pattern.index("}", i)
            alts = pattern[i + 1 : end].split(",")
            out.append("(?:" + "|".join(glob_regex(a).pattern[:-2] for a in alts) + ")")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


def glob_matcher(pattern: str):
    """Predicate on base-relative paths; a pattern without '/' matches names at any depth."""
    pattern = pattern.removeprefix("./")
    rx = glob_regex(pattern)
    if "/" in pattern:
        return lambda rel: rx.match(rel) is not None
    return lambda rel: rx.match(rel.rsplit("/", 1)[-1]) is not None


# --------------------------------------------------------------------------- file lists


@dataclass
class _Rule:
    where: str  # directory (base-relative) holding the .gitignore
    rx: re.Pattern[str]
    negate: bool
    dir_only: bool
    anchored: bool


def _read_gitignore(dir_abs: str, rel: str) -> list[_Rule]:
    try:
        with open(os.path.join(dir_abs, ".gitignore"), encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    rules = []
    for line in lines:
        line = line.rstrip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        line = line[1:] if negate else line
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        rules.append(_Rule(rel, glob_regex(line.lstrip("/")), negate, dir_only, anchored))
    return rules


def _ignored(rel: str, is_dir: bool, rules: list[_Rule]) -> bool:
    ignored = False
    for rule in rules:
        if rule.dir_only and not is_dir:
            continue
        sub = rel[len(rule.where) + 1 :] if rule.where else rel
        target = sub if rule.anchored else sub.rsplit("/", 1)[-1]
        if rule.rx.match(target):
            ignored = not rule.negate
    return ignored


def walk_plain(base: str) -> list[str]:
    out: list[str] = []

    def walk(dir_abs: str, rel: str, rules: list[_Rule]) -> None:
        rules = rules + _read_gitignore(dir_abs, rel)
        try:
            entries = sorted(os.scandir(dir_abs), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            if len(out) >= MAX_FILES:
                return
            if entry.name in NOISE_DIRS:
                continue
            path = f"{rel}/{entry.name}" if rel else entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            if _ignored(path, is_dir, rules):
                continue
            if is_dir:
                walk(entry.path, path, rules)
            elif entry.is_file():
                out.append(path)

    walk(base, "", [])
    return out


def git_listing(run: Runner, base: str) -> list[str] | None:
    """`git ls-files` of `base` through `run`; None outside a repository or without git."""
    result = run(git_argv(LS_FILES), cwd=base, timeout=60)
    if result.returncode != 0:
        return None
    return sorted({os.fsdecode(n) for n in result.stdout.split(b"\0") if n})


class RunBackedFiles:
    """`list_files` and `stat` for environments that reach their files only by running programs
    (a container): both go through the environment's own `run`. The container is the commands'
    confinement: none of Clover's own (sandbox, step boundary, exec check) applies there, and
    their variables are the container's."""

    run: Runner
    sandbox: Any = None
    boundary: Any = None
    exec_guard: Any = None
    on_output: Callable[[str], None] | None = None
    base_env: dict[str, str] | None = None

    def host_root(self) -> str | None:
        return None  # the files are in the container, reached only through `run`

    def written_paths(self) -> set[str] | None:
        return None  # a container's writes are not followed (the container is thrown away)

    def list_files(self, base: str) -> list[str]:
        files = git_listing(self.run, base)
        if files is None:
            found = self.run(
                ["find", ".", "-name", ".git", "-prune", "-o", "-type", "f", "-print0"], cwd=base, timeout=60
            )
            files = [os.fsdecode(n).removeprefix("./") for n in found.stdout.split(b"\0") if n]
        return sorted(files)[:MAX_FILES]

    def stat(self, path: str) -> FileStat | None:
        result = self.run(["stat", "-L", "-c", "%F|%s", path], timeout=30)
        if result.returncode != 0:
            return None
        kind, _, size = result.stdout.decode("utf-8", "replace").strip().partition("|")
        known = {"directory": "dir", "regular file": "file", "regular empty file": "file"}
        return FileStat(known.get(kind, "other"), int(size) if size.isdigit() else 0)  # type: ignore[arg-type]
