"""The `git` tool: status, diff, log, show (read-only) and commit.

Where the environment's files are this machine's (`host_root`), libgit2 does it in-process
(tools/git/gitporcelain.py over tools/git/hostgit.py): no program named by the repository's config (filter,
textconv, fsmonitor, signer, pager, hook) can run, whatever the mode, sandbox or config spelling.
Where they are in a container, the git program runs there, through the environment, hardened
(tools/git/gitsafe.py)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from clover.core.environment_protocol import Environment
from clover.core.tool_protocol import Tool, ToolKind, ToolResult
from clover.tools.git import gitporcelain, hostgit
from clover.tools.git.gitsafe import CONFIG_SCOPES, config_overrides, git_argv
from clover.tools.paths import PathError
from clover.tools.textio import arg_bool, arg_int, decode, error, printable, resolve

SUBCOMMANDS = ("status", "diff", "log", "show", "commit")
READ_ONLY_SUBCOMMANDS = frozenset({"status", "diff", "log", "show"})
MAX_OUTPUT = 16_000


def _cap(text: str) -> str:
    if len(text) <= MAX_OUTPUT:
        return text
    return text[:MAX_OUTPUT] + f"\n[... {len(text) - MAX_OUTPUT} more characters cut; pass a path to narrow]"


@dataclass
class GitTool(Tool):
    name: str = "git"
    description: str = (
        "Git in the workspace repository: status; diff [path] [staged]; log [n] [path]; show [rev]; "
        "commit message [paths]: commits the files you changed (or only `paths` of them), never the "
        "user's own changes."
    )
    parameters: dict[str, Any] = field(
        default_factory=lambda: {
            "type": "object",
            "properties": {
                "subcommand": {"type": "string", "enum": list(SUBCOMMANDS)},
                "path": {"type": "string", "description": "diff/log: limit to this path"},
                "staged": {"type": "boolean", "description": "diff: staged changes instead of unstaged"},
                "n": {"type": "integer", "description": "log: number of commits (default 10)"},
                "rev": {"type": "string", "description": "show: revision (default HEAD)"},
                "message": {"type": "string", "description": "commit: the commit message"},
                "paths": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "commit: only these of the files you changed (default: all of them)",
                },
            },
            "required": ["subcommand"],
        }
    )
    kind: ToolKind = "git"  # status, diff, log and show read; commit writes (is_read_only)

    def is_read_only(self, args: dict[str, Any]) -> bool:
        """Whether this particular call only reads (everything but commit)."""
        return (args.get("subcommand") or args.get("command")) in READ_ONLY_SUBCOMMANDS

    def run(self, args: dict[str, Any], env: Environment) -> ToolResult:
        sub = args.get("subcommand") or args.get("command")
        if sub not in SUBCOMMANDS:
            return error(f"git: subcommand must be one of {', '.join(SUBCOMMANDS)}, got {sub!r}")
        try:
            argv = self._argv(sub, args, env)
        except (PathError, ValueError) as exc:
            return error(f"git {sub}: {exc}")
        host = env.host_root()
        committed: tuple[str, ...] = ()
        try:
            if host is not None and sub == "commit":
                out, committed = _commit_agents_files(host, args, env)
            elif host is not None:
                out = self._in_process(host, sub, args, env)
            else:
                out = self._in_env(env, sub, argv, args)
        except (_GitFailed, hostgit.HostGitError, OSError) as exc:
            return error(f"git {sub}: {exc}")
        out = printable(out).rstrip()
        if not out:
            out = {"status": "clean", "diff": "no changes", "log": "no commits"}.get(sub, "(no output)")
        out = _cap(out)
        files = _section_files(out) if sub in ("diff", "show") else ()
        return ToolResult(out, data={"subcommand": sub}, paths=committed, line_files=files)

    @staticmethod
    def _in_process(host: str, sub: str, args: dict[str, Any], env: Environment) -> str:
        path = resolve(env, args["path"]) if args.get("path") else None
        if sub == "status":
            return gitporcelain.status_short(host)
        if sub == "diff":
            return gitporcelain.diff_text(host, staged=arg_bool(args, "staged"), path=path)
        if sub == "log":
            return gitporcelain.log_lines(host, min(max(arg_int(args, "n", 10) or 10, 1), 200), path)
        return gitporcelain.show_text(host, args.get("rev") or "HEAD")

    def _in_env(self, env: Environment, sub: str, argv: list[str], args: dict[str, Any]) -> str:
        try:
            if sub == "commit":  # a container is the run's own: everything, or the paths named
                paths = [resolve(env, p) for p in args.get("paths") or [] if isinstance(p, str) and p.strip()]
                self._git(env, ["add", "-A", "--", *paths])
                if not self._git(env, ["status", "--porcelain"]).strip():
                    return "nothing to commit: the working tree is clean"
            return self._git(env, argv)
        except ValueError as exc:  # an override git cannot take: refused, not run
            raise _GitFailed(str(exc)) from exc

    @staticmethod
    def _argv(sub: str, args: dict[str, Any], env: Environment) -> list[str]:
        paths = [resolve(env, args["path"])] if args.get("path") else []
        if sub == "status":
            return ["status", "--short", "--branch"]
        if sub == "diff":
            return ["diff", *(["--cached"] if arg_bool(args, "staged") else []), "--", *paths]
        if sub == "log":
            n = min(max(arg_int(args, "n", 10) or 10, 1), 200)
            return ["log", f"-n{n}", "--date=short", "--format=%h %ad %an: %s", "--", *paths]
        if sub == "show":
            rev = args.get("rev") or "HEAD"
            if not isinstance(rev, str) or rev.startswith("-"):
                raise ValueError(f"invalid revision {rev!r}")
            return ["show", "--stat", "--patch", rev, "--"]
        message = args.get("message")
        if not isinstance(message, str) or not message.strip():
            raise ValueError("'message' is required")
        return ["commit", "-m", message]

    @staticmethod
    def _git(env: Environment, argv: list[str]) -> str:
        # Inside the container, and hardened: a hook, filter or fsmonitor planted in .git/config
        # by a command does not run because the git tool looked at the repository.
        overrides: list[tuple[str, str]] = []
        for scope in CONFIG_SCOPES:
            listing = env.run(scope, cwd=env.root, timeout=30)
            if listing.returncode == 0:
                overrides += config_overrides(decode(listing.stdout))
        result = env.run(git_argv(argv, overrides), cwd=env.root, timeout=60)
        if result.returncode == 127:
            raise _GitFailed("git is not installed")
        if result.returncode != 0 and "not a git repository" in result.stderr:
            raise _GitFailed(f"{env.root} is not inside a git repository")
        if result.returncode != 0:
            lines = [ln for ln in result.stderr.strip().splitlines() if ln.strip()]
            raise _GitFailed(
                next(
                    (ln for ln in lines if ln.startswith("fatal:")),
                    lines[-1] if lines else f"git exited with status {result.returncode}",
                )[-1000:]
            )
        return decode(result.stdout)


class _GitFailed(Exception):
    pass


# a file's section of a patch (git's and libgit2's format) starts `diff --git a/OLD b/NEW`
_SECTION = re.compile(r"^diff --git a/(.+?) b/(.+)$")


def _section_files(patch: str) -> tuple[tuple[str, ...], ...]:
    """For each line of a diff or show, the files of the patch section it is in (none before the
    first section: a commit's header, message and stat)."""
    files: tuple[str, ...] = ()
    out = []
    for line in patch.split("\n"):
        if m := _SECTION.match(line):
            files = tuple(dict.fromkeys(m.groups()))
        out.append(files)
    return tuple(out)


def _commit_agents_files(host: str, args: dict[str, Any], env: Environment) -> tuple[str, tuple[str, ...]]:
    """Commit what the agent changed (of `paths`, when given), never what it did not write: the
    user's own edits and untracked files (a `secrets.local`) stay out and are named. Where the
    environment cannot tell what the agent wrote, only named paths, or else what is staged.
    Returns the tool's text and the files committed (relative to the repository; none when what
    was staged went in)."""
    top = os.path.realpath(hostgit.open_repo(host).workdir)
    named = [
        os.path.relpath(resolve(env, p), top)
        for p in args.get("paths") or []
        if isinstance(p, str) and p.strip()
    ]
    below = os.path.relpath(os.path.realpath(env.root), top)  # the workspace inside the repository
    known = env.written_paths()
    written = None if known is None else {p if below == "." else f"{below}/{p}" for p in known}
    changed = gitporcelain.changed_files(host)
    if written is None:
        chosen, left = ([p for p in changed if p in named], []) if named else (None, [])
    else:
        wanted = [p for p in changed if p in written or any(p.startswith(w + "/") for w in written)]
        chosen = [p for p in wanted if not named or p in named]
        left = [p for p in (named or changed) if p not in wanted and p in changed]
    # the identity the agent's own `git commit` command would use (the environment's, not Clover's)
    identity = env.base_env
    if chosen is None:
        made = gitporcelain.commit_index(host, args["message"], identity)
    else:
        made = hostgit.commit_paths(host, chosen, args["message"], identity)
    if made is None:
        what = (
            "none of the files you changed differ from HEAD" if written is not None else "nothing is staged"
        )
        out, chosen = f"nothing to commit: {what}", []
    else:
        out = (
            f"committed {len(chosen) if chosen is not None else 'the staged'} file(s): "
            + gitporcelain.log_lines(host, 1)
        )
    if left:
        shown = ", ".join(left[:8]) + (f" and {len(left) - 8} more" if len(left) > 8 else "")
        out += f"\nleft out (not written by you in this session; the user can commit them): {shown}"
    return out, tuple(chosen or ())
