"""Finding files and text: `glob` and `grep`, both honouring .gitignore.

File lists come from the environment (`Environment.list_files`). `grep` runs ripgrep through the
environment (inside its sandbox or container); where rg is missing, `git grep -P` in a repository;
a Python scan where neither can run or the pattern is Python-only (a lookahead rg rejects). The
scan reads each file through the same containment as the file tools, so a symlink in the
repository to a file outside is skipped, never read. All print `path:line:text`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from clover.core.environment_protocol import Environment
from clover.core.tool_protocol import Tool, ToolKind, ToolResult
from clover.tools.git.gitsafe import git_argv
from clover.tools.listing import NOISE_DIRS, glob_matcher, glob_regex  # noqa: F401 - re-exported
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

MAX_GLOB_RESULTS = 200
MAX_GREP_MATCHES = 200
MAX_GREP_CHARS = 16_000
MAX_GREP_FILE_BYTES = 8 * 1024 * 1024
BACKENDS = ("rg", "git", "python")  # tried in this order (tests narrow it)


# --------------------------------------------------------------------------- glob


@dataclass
class GlobTool(Tool):
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
    kind: ToolKind = "read"

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
        info = env.stat(base)
        if info is None or info.kind != "dir":
            return error(f"glob: {path}: not a directory")
        match = glob_matcher(pattern)
        found = [rel for rel in env.list_files(base) if match(rel)]
        if not found:
            return ToolResult(f"no files match {pattern!r} under {display_path(env, base)}")
        shown = [display_path(env, os.path.join(base, rel)) for rel in found[:MAX_GLOB_RESULTS]]
        out = "\n".join(printable(s) for s in shown)
        if len(found) > MAX_GLOB_RESULTS:
            out += f"\n[showing {MAX_GLOB_RESULTS} of {len(found)} files; narrow the pattern or the path]"
        return ToolResult(out, data={"count": len(found)}, line_files=tuple((s,) for s in shown))


# --------------------------------------------------------------------------- grep


def _python_grep(
    env: Environment, base: str, files: list[str], rx: re.Pattern[str], context: int
) -> list[Hit]:
    """Output lines (rg format), each with the file it is of ("" for a `--` between groups)."""
    out: list[Hit] = []
    count = 0
    for rel in files:
        try:  # listed files may be symlinks: the same containment as the file tools
            full = resolve(env, os.path.join(base, rel) if rel else base)
            info = env.stat(full)
            if info is None or info.kind != "file" or info.size > MAX_GREP_FILE_BYTES:
                continue
            data = env.read_file(full)
        except (OSError, PathError):
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
        shown = display_path(env, os.path.join(base, rel) if rel else base)
        last = -2
        for i in hits:
            lo, hi = max(i - context, 0), min(i + context, len(lines) - 1)
            if context and out and lo > last + 1:
                out.append(Hit("--"))
            for j in range(max(lo, last + 1), hi + 1):
                sep = ":" if j in hit_set else "-"
                out.append(Hit(f"{shown}{sep}{j + 1}{sep}{lines[j].rstrip(chr(13))}", shown, j in hit_set))
            last = max(last, hi)
            count += 1
            if count >= MAX_GREP_MATCHES * 2:  # enough to say "more than"
                return out
    return out


@dataclass(frozen=True)
class Hit:
    """One line of grep's output: the file it is of ("" for a `--` between groups), and whether it
    is a match (else context)."""

    line: str
    path: str = ""
    match: bool = False


# rg and git grep print a match as `path:N:text`, a context line as `path-N-text`
_PROGRAM_LINE = re.compile(r"^(.*?)([:-])\d+\2")


def _program_hit(line: str) -> Hit:
    m = _PROGRAM_LINE.match(line)
    return Hit(line, m.group(1), m.group(2) == ":") if m else Hit(line)


def _rg_command(args: list[str], pattern: str, target: str) -> list[str]:
    return [
        "rg",
        "--line-number",
        "--no-heading",
        "--with-filename",
        "--color=never",
        "--no-require-git",
        "--max-columns=1000",
        *args,
        "-e",
        pattern,
        *(["--", target] if target != "." else []),
    ]  # no target: paths print without "./"


@dataclass
class GrepTool(Tool):
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
    kind: ToolKind = "read"

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
        info = env.stat(base)
        if info is None:
            return error(f"grep: {args.get('path')}: no such file or directory")
        flags = self._flags(glob, icase, context)
        lines: list[Hit] | None = None
        for backend in BACKENDS:
            if backend == "rg":
                lines = self._run(env, _rg_command(flags, pattern, display_path(env, base)))
            elif backend == "git":
                lines = self._run(env, self._git_grep(env, base, pattern, glob, icase, context))
            else:
                files = [""]
                if info.kind == "dir":
                    files = env.list_files(base)
                    if glob:
                        match = glob_matcher(glob)
                        files = [f for f in files if match(f)]
                lines = _python_grep(env, base, files, rx, context)
            if lines is not None:
                break
        if not lines:
            return ToolResult(f"no matches for {pattern!r} in {display_path(env, base)}")
        count = sum(hit.match for hit in lines)
        shown = self._cap(lines, count)
        return ToolResult(
            "\n".join(hit.line for hit in shown),
            data={"count": count},
            line_files=tuple((hit.path,) if hit.path else () for hit in shown),
        )

    @staticmethod
    def _flags(glob: str | None, icase: bool, context: int) -> list[str]:
        flags = ["-i"] if icase else []
        if context:
            flags.append(f"-C{context}")
        if glob:
            flags += ["--glob", glob]
        return flags

    @staticmethod
    def _run(env: Environment, argv: list[str]) -> list[Hit] | None:
        """Output lines, or None when the program is missing or rejected the pattern or the
        place (exit status above 1 with nothing printed): the next backend then tries."""
        result = env.run(argv, cwd=env.root, timeout=60)
        if result.returncode > 1 and not result.stdout:
            return None
        return [
            _program_hit(line.removeprefix("./")) for line in printable(decode(result.stdout)).splitlines()
        ]

    @staticmethod
    def _git_grep(
        env: Environment, base: str, pattern: str, glob: str | None, icase: bool, context: int
    ) -> list[str]:
        """`git grep -P` (Perl regexes: the nearest to Python's); fails outside a repository."""
        target = display_path(env, base)
        spec = target  # git grep ORs pathspecs, so the glob is folded into the one path
        if glob:
            spec = ":(glob)" + ("" if target == "." else target + "/") + ("" if "/" in glob else "**/") + glob
        common = (["-i"] if icase else []) + ([f"-C{context}"] if context else [])
        return git_argv(["grep", "-nIP", "--untracked", "--no-color", *common, "-e", pattern, "--", spec])

    @staticmethod
    def _cap(hits: list[Hit], count: int) -> list[Hit]:
        out: list[Hit] = []
        size, matches = 0, 0
        for hit in hits:
            if size + len(hit.line) > MAX_GREP_CHARS or matches >= MAX_GREP_MATCHES:
                more = "+" if count >= 2 * MAX_GREP_MATCHES else ""
                out.append(
                    Hit(
                        f"[output cut: {count}{more} matching lines in all; narrow the pattern, path or glob]"
                    )
                )
                break
            if len(hit.line) > 500:
                hit = Hit(hit.line[:500] + " [...]", hit.path, hit.match)
            out.append(hit)
            size += len(hit.line) + 1
            matches += hit.match
        return out
