"""Git for the evals: tools/git/gitsafe.py's hardened runner, with the one environment every eval uses.

The evals clone benchmark repositories, apply patches to them and build their own small ones
(handwritten, SynthFix). Each ran git with an environment of its own; now each goes through here:
the user's and the system's git config never apply (a grade or a generated repository must not
depend on who runs it), the repository's own code-running config is overridden (gitsafe), and a
repository built here can pin its author and dates (`Identity`) so it is the same byte for byte.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from clover.tools.git.gitsafe import run_git

# No user or system config; no prompts; one locale and time zone (dates and messages as written).
EVAL_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
    "TZ": "UTC",
}


class GitError(RuntimeError):
    """A git command failed; the message is one line: the subcommand, the directory, git's words."""


@dataclass(frozen=True)
class Identity:
    """Who commits, and when (None: now): the commits of a generated repository are reproducible."""

    name: str
    email: str
    date: str | None = None

    def env(self) -> dict[str, str]:
        env = {
            "GIT_AUTHOR_NAME": self.name,
            "GIT_AUTHOR_EMAIL": self.email,
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": self.email,
        }
        if self.date is not None:
            env.update(GIT_AUTHOR_DATE=self.date, GIT_COMMITTER_DATE=self.date)
        return env


def eval_env(identity: Identity | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment git runs with in the evals (gitsafe scrubs the rest of GIT_*). With an
    identity, none of the caller's GIT_AUTHOR_* / GIT_COMMITTER_* (a date among them) survives."""
    env = dict(os.environ if base is None else base)
    if identity is not None:
        env = {k: v for k, v in env.items() if not k.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_"))}
        env.update(identity.env())
    return {**env, **EVAL_ENV}


def git(
    cwd: str | Path,
    *args: str,
    stdin: str | None = None,
    check: bool = True,
    identity: Identity | None = None,
    remote: bool = False,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run hardened git in `cwd`; text out. `remote`: transports allowed (a clone, even of a local
    path, needs it). With `check`, a failure raises GitError."""
    try:
        data = None if stdin is None else stdin.encode("utf-8")
        proc = run_git(
            list(args), str(cwd), env=eval_env(identity), input=data, timeout=timeout, remote=remote
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} in {cwd}: no answer after {timeout:.0f} s") from None
    stdout, stderr = proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")
    out = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if check and proc.returncode != 0:
        raise GitError(f"git {args[0]} failed in {cwd}: {out.stderr.strip()[:200]}")
    return out


__all__ = ["EVAL_ENV", "GitError", "Identity", "eval_env", "git"]
