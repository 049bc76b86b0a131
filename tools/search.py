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

from clover.core.protocols import Environment, Tool, ToolResult
from clover.tools.gitsafe import git_argv
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
        return ToolResult(out, data={"count": len(found)})


# --------------------------------------------------------------------------- grep


def _python_grep(
    env: Environment, base: str, files: list[str], rx: re.Pattern[str], context: int
) -> tuple[list[str], int]:
    """Output lines (rg format) and the number of matching lines."""
    out: list[str] = []
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
        info = env.stat(base)
        if info is None:
            return error(f"grep: {args.get('path')}: no such file or directory")
        flags = self._flags(glob, icase, context)
        lines: list[str] | None = None
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
                lines, _ = _python_grep(env, base, files, rx, context)
            if lines is not None:
                break
        if not lines:
            return ToolResult(f"no matches for {pattern!r} in {display_path(env, base)}")
        return ToolResult(
            self._cap(lines, sum(map(_is_match_line, lines))), data={"count": sum(map(_is_match_line, lines))}
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
    def _run(env: Environment, argv: list[str]) -> list[str] | None:
        """Output lines, or None when the program is missing or rejected the pattern or the
        place (exit status above 1 with nothing printed): the next backend then tries."""
        result = env.run(argv, cwd=env.root, timeout=60)
        if result.returncode > 1 and not result.stdout:
            return None
        return [line.removeprefix("./") for line in printable(decode(result.stdout)).splitlines()]

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
    def _cap(lines: list[str], count: int) -> str:
        out, size, matches = [], 0, 0
        for line in lines:
            if size + len(line) > MAX_GREP_CHARS or matches >= MAX_GREP_MATCHES:
                out.append(
                    f"[output cut: {count}{'+' if count >= 2 * MAX_GREP_MATCHES else ''} matching "
                    "lines in all; narrow the pattern, path or glob]"
                )
                break
            if len(line) > 500:
                line = line[:500] + " [...]"
            out.append(line)
            size += len(line) + 1
            matches += _is_match_line(line)
        return "\n".join(out)
