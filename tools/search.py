"""Finding files and text: `glob` and `grep`, both honouring .gitignore.

File lists come from `git ls-files --cached --others --exclude-standard` inside a repository and
from a small .gitignore-aware walk outside one. `grep` uses ripgrep when it is installed and a
Python scan otherwise; both print `path:line:text`.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

from clover.core.protocols import Environment, ToolResult
from clover.tools.paths import PathError
from clover.tools.textio import (
    arg_bool,
    arg_int,
    decode,
    display_path,
    error,
    is_binary,
    printable,
    resolve,
)

MAX_FILES = 200_000  # a walk stops here
MAX_GLOB_RESULTS = 200
MAX_GREP_MATCHES = 200
MAX_GREP_CHARS = 16_000
MAX_GREP_FILE_BYTES = 8 * 1024 * 1024
# Skipped by the walk outside git, where no .gitignore may name them.
NOISE_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache",
              ".pytest_cache", ".ruff_cache", ".tox", ".idea", ".DS_Store"}


# --------------------------------------------------------------------------- patterns


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


def _walk_plain(base: str) -> list[str]:
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


def _git_files(base: str) -> list[str] | None:
    try:
        proc = subprocess.run(
            ["git", "-C", base, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    names = {os.fsdecode(n) for n in proc.stdout.split(b"\0") if n}
    # --cached still lists files deleted from the work tree; submodules show up as directories.
    return [n for n in names if os.path.isfile(os.path.join(base, n))]


def _remote_files(env: Environment, base: str) -> list[str]:
    q = shlex.quote(base)
    cmd = (
        f"git -C {q} ls-files -z --cached --others --exclude-standard 2>/dev/null "
        f"|| (cd {q} && find . -name .git -prune -o -type f -print0)"
    )
    result = env.execute(cmd, timeout=60)
    text = result.output
    if result.truncated and result.full_output_path:
        text = decode(env.read_file(result.full_output_path))
    return [n.removeprefix("./") for n in text.split("\0") if n.strip("\n")]


def list_files(env: Environment, base: str) -> list[str]:
    """Files under the directory `base` (absolute), relative to it, sorted, .gitignore honoured."""
    if getattr(env, "local", False):
        files = _git_files(base)
        if files is None:
            files = _walk_plain(base)
    else:
        files = _remote_files(env, base)
    return sorted(files)[:MAX_FILES]


# --------------------------------------------------------------------------- glob


@dataclass
class GlobTool:
    name: str = "glob"
    description: str = (
        "Find files by glob pattern (e.g. '**/*.py', 'src/**/test_*.ts', '*.{js,jsx}'); a pattern "
        "without '/' matches file names at any depth. Honours .gitignore. Returns sorted paths."
    )
    parameters: dict[str, Any] = field(
        default_factory=lambda: {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "glob pattern"},
                "path": {"type": "string", "description": "directory to search (default: workspace root)"},
            },
            "required": ["pattern"],
        }
    )
    read_only: bool = True

    def run(self, args: dict[str, Any], env: Environment) -> ToolResult:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern.strip():
            return error("glob: 'pattern' is required")
        path = args.get("path") or "."
        if os.path.isabs(pattern) and not args.get("path"):
            # An absolute pattern: its literal leading directories become the search path.
            parts = pattern.split("/")
            cut = next(i for i, p in enumerate(parts) if any(ch in p for ch in "*?[{") or i == len(parts) - 1)
            path, pattern = "/".join(parts[:cut]) or "/", "/".join(parts[cut:])
        try:
            base = resolve(env, path)
        except PathError as exc:
            return error(str(exc))
        if not os.path.isdir(base) and getattr(env, "local", False):
            return error(f"glob: {path}: not a directory")
        match = glob_matcher(pattern)
        found = [rel for rel in list_files(env, base) if match(rel)]
        if not found:
            return ToolResult(f"no files match {pattern!r} under {display_path(env, base)}")
        shown = [display_path(env, os.path.join(base, rel)) for rel in found[:MAX_GLOB_RESULTS]]
        out = "\n".join(printable(s) for s in shown)
        if len(found) > MAX_GLOB_RESULTS:
            out += f"\n[showing {MAX_GLOB_RESULTS} of {len(found)} files; narrow the pattern or the path]"
        return ToolResult(out, data={"count": len(found)})


# --------------------------------------------------------------------------- grep


def _python_grep(
    env: Environment, base: str, files: list[str], rx: re.Pattern[str], context: int
) -> tuple[list[str], int]:
    """Output lines (rg format) and the number of matching lines."""
    out: list[str] = []
    count = 0
    for rel in files:
        full = os.path.join(base, rel) if rel else base
        try:
            if os.path.getsize(full) > MAX_GREP_FILE_BYTES:
                continue
            data = env.read_file(full)
        except OSError:
            continue
        if is_binary(data):
            continue
        lines = printable(decode(data)).split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        hits = [i for i, line in enumerate(lines) if rx.search(line.rstrip("\r"))]
        hit_set = set(hits)
        if not hits:
            continue
        shown = display_path(env, full)
        last = -2
        for i in hits:
            lo, hi = max(i - context, 0), min(i + context, len(lines) - 1)
            if context and out and lo > last + 1:
                out.append("--")
            for j in range(max(lo, last + 1), hi + 1):
                sep = ":" if j in hit_set else "-"
                out.append(f"{shown}{sep}{j + 1}{sep}{lines[j].rstrip(chr(13))}")
            last = max(last, hi)
            count += 1
            if count >= MAX_GREP_MATCHES * 2:  # enough to say "more than"
                return out, count
    return out, count


def _is_match_line(line: str) -> bool:
    """rg/grep print matches as `path:N:` and context as `path-N-`."""
    m = re.match(r"^.*?([:-])\d+\1", line)
    return bool(m) and m.group(1) == ":"


def _rg_command(args: list[str], pattern: str, target: str) -> list[str]:
    return ["rg", "--line-number", "--no-heading", "--with-filename", "--color=never",
            "--no-require-git", "--max-columns=1000", *args, "-e", pattern,
            *(["--", target] if target != "." else [])]  # no target: paths print without "./"


@dataclass
class GrepTool:
    name: str = "grep"
    description: str = (
        "Search file contents with a regular expression; honours .gitignore. Prints "
        "'path:line:text' (context lines as 'path-line-text')."
    )
    parameters: dict[str, Any] = field(
        default_factory=lambda: {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "regular expression"},
                "path": {"type": "string", "description": "file or directory (default: workspace root)"},
                "glob": {"type": "string", "description": "only files matching this glob, e.g. '*.py'"},
                "case_insensitive": {"type": "boolean"},
                "context": {"type": "integer", "description": "lines of context around each match (0-10)"},
            },
            "required": ["pattern"],
        }
    )
    read_only: bool = True

    def run(self, args: dict[str, Any], env: Environment) -> ToolResult:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            return error("grep: 'pattern' is required")
        try:
            context = min(max(arg_int(args, "context", 0) or 0, 0), 10)
            icase = arg_bool(args, "case_insensitive") or arg_bool(args, "-i")
            base = resolve(env, args.get("path") or ".")
            rx = re.compile(pattern, re.IGNORECASE if icase else 0)
        except (ValueError, PathError) as exc:
            return error(f"grep: {exc}")
        except re.error as exc:
            return error(f"grep: invalid regular expression {pattern!r}: {exc}")
        glob = args.get("glob") or None
        local = getattr(env, "local", False)
        if local and not os.path.exists(base):
            return error(f"grep: {args.get('path')}: no such file or directory")
        lines: list[str] | None = None
        if local and shutil.which("rg"):
            # None when rg fails (e.g. a Python-only regex feature such as lookahead): scan in Python.
            lines, count = self._rg(env, base, pattern, glob, icase, context)
        if local and lines is None:
            if os.path.isdir(base):
                files = list_files(env, base)
                if glob:
                    match = glob_matcher(glob)
                    files = [f for f in files if match(f)]
            else:
                files = [""]
            lines, count = _python_grep(env, base, files, rx, context)
        elif not local:
            lines, count, problem = self._remote(env, base, pattern, glob, icase, context)
            if problem:
                return error(problem)
        if not lines:
            return ToolResult(f"no matches for {pattern!r} in {display_path(env, base)}")
        return ToolResult(self._cap(lines, count), data={"count": count})

    @staticmethod
    def _flags(glob: str | None, icase: bool, context: int) -> list[str]:
        flags = ["-i"] if icase else []
        if context:
            flags.append(f"-C{context}")
        if glob:
            flags += ["--glob", glob]
        return flags

    def _rg(
        self, env: Environment, base: str, pattern: str, glob: str | None, icase: bool, context: int
    ) -> tuple[list[str] | None, int]:
        target = display_path(env, base)
        cmd = _rg_command(self._flags(glob, icase, context), pattern, target)
        try:
            proc = subprocess.run(cmd, cwd=env.root, capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None, 0
        if proc.returncode == 2 and not proc.stdout:
            return None, 0
        lines = printable(decode(proc.stdout)).splitlines()
        return lines, sum(map(_is_match_line, lines))

    def _remote(self, env: Environment, base: str, pattern: str, glob: str | None, icase: bool, context: int):
        """Through env.execute: rg if the environment has it, else `git grep` in a repository (it
        honours .gitignore), else plain `grep -r`."""
        target = display_path(env, base)
        common = (["-i"] if icase else []) + ([f"-C{context}"] if context else [])
        rg = shlex.join(_rg_command(self._flags(glob, icase, context), pattern, target))
        spec = target  # git grep ORs pathspecs, so the glob is folded into the one path
        if glob:
            spec = ":(glob)" + ("" if target == "." else target + "/") + ("" if "/" in glob else "**/") + glob
        git_grep = ["git", "grep", "-nIE", "--untracked", "--no-color", *common, "-e", pattern, "--", spec]
        grep = ["grep", "-rnIE", "--exclude-dir=.git", *common, *([f"--include={glob}"] if glob else [])]
        cmd = (f"if command -v rg >/dev/null 2>&1; then {rg}; "
               f"elif git rev-parse --is-inside-work-tree >/dev/null 2>&1; then {shlex.join(git_grep)}; "
               f"else {shlex.join([*grep, '-e', pattern, '--', target])}; fi")
        result = env.execute(cmd, cwd=env.root, timeout=60)
        if result.returncode not in (0, 1):
            return [], 0, "grep: " + result.output.strip()[-500:]
        lines = [line.removeprefix("./") for line in result.output.splitlines()]
        return lines, sum(map(_is_match_line, lines)), None

    @staticmethod
    def _cap(lines: list[str], count: int) -> str:
        out, size, matches = [], 0, 0
        for line in lines:
            if size + len(line) > MAX_GREP_CHARS or matches >= MAX_GREP_MATCHES:
                out.append(f"[output cut: {count}{'+' if count >= 2 * MAX_GREP_MATCHES else ''} matching "
                           "lines in all; narrow the pattern, path or glob]")
                break
            if len(line) > 500:
                line = line[:500] + " [...]"
            out.append(line)
            size += len(line) + 1
            matches += _is_match_line(line)
        return "\n".join(out)
