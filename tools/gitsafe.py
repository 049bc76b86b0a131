"""Git that runs no code from the repository: every git command Clover starts is built here.

A repository's `.git/config` and `.git/hooks` are writable by whatever runs in the workspace (the
agent's shell, a sandboxed one included), and git runs programs named there: hooks, core.fsmonitor,
diff.external and diff drivers, filter drivers, the pager, editors, credential helpers, ssh. A
sandboxed command could plant one and wait for Clover to run git on the host (`clover fix`'s final
diff, checkpoints, the git tool). So every invocation:

- overrides each code-running setting on the command line (`-c` beats every config file), and
  blanks every filter driver the repository's own config defines (found by reading the config,
  which runs nothing; an empty filter command means "no filter"; the user's global drivers, such
  as git-lfs, stay);
- passes `--no-ext-diff --no-textconv` to the commands that render diffs;
- runs with a scrubbed environment: no inherited GIT_* (GIT_CONFIG_PARAMETERS, GIT_EXTERNAL_DIFF,
  GIT_SSH_COMMAND ...), no system config, no terminal prompts, no pager.
Aliases never apply: Clover only runs built-in subcommands. What `include.path` pulls in is covered
because the config is read with includes.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence

# Settings whose value is a program git may run, or that make git run one; each forced harmless.
HARDENING: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "false"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("sequence.editor", "true"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("core.gitProxy", ""),
    ("credential.helper", ""),
    ("diff.external", ""),  # with --no-ext-diff ignored; without it a diff fails instead of running one
    ("gpg.program", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("protocol.ext.allow", "never"),  # ext:: URLs run a command
    ("uploadpack.packObjectsHook", ""),
    ("pager.diff", "false"), ("pager.log", "false"), ("pager.show", "false"), ("pager.status", "false"),
)
# Subcommands that render patches, where diff drivers (external, textconv) would run.
_DIFF_COMMANDS = {"diff", "show", "log", "diff-tree", "diff-index", "diff-files", "format-patch"}
_FILTER_KEYS = (".clean", ".smudge", ".process")
# Kept from the caller's environment: where the repository and index are (a throwaway index, a
# shadow repository), which global config is the user's, and who commits. No other GIT_* survives.
_KEPT_VARS = {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CEILING_DIRECTORIES", "GIT_CONFIG_GLOBAL"}


def safe_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) without the GIT_* that run code or add config
    (only location, identity and GIT_CONFIG_GLOBAL stay) and with system config, prompts and
    pagers switched off. The user's global config stays (it is theirs, not the repository's)."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith("GIT_") or k in _KEPT_VARS or k.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_"))}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_TERMINAL_PROMPT="0", GIT_PAGER="cat", PAGER="cat",
               GIT_OPTIONAL_LOCKS="0", GIT_NO_REPLACE_OBJECTS="1")
    return env


def _config_args(pairs: Sequence[tuple[str, str]]) -> list[str]:
    out: list[str] = []
    for key, value in pairs:
        out += ["-c", f"{key}={value}"]
    return out


def filter_overrides(config_listing: str) -> list[tuple[str, str]]:
    """Blank every filter driver named in a `git config --list -z` listing."""
    found = []
    for item in config_listing.split("\0"):
        key = item.split("\n", 1)[0].lower()
        if key.startswith("filter.") and key.endswith(_FILTER_KEYS):
            found.append((item.split("\n", 1)[0], ""))
    return found


def _subcommand_at(args: Sequence[str]) -> int:
    """Index of the subcommand after git's own options (`-c k=v`, `-C dir`, `--literal-pathspecs`)."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in ("-c", "-C", "--git-dir", "--work-tree", "--namespace") else 1
    return i


def git_argv(args: Sequence[str], extra_config: Sequence[tuple[str, str]] = (), *, remote: bool = False
             ) -> list[str]:
    """`git <hardening> <args>`; diff-rendering subcommands also get --no-ext-diff --no-textconv.
    No transport is allowed (no clone, fetch or push reaches anything) unless `remote`."""
    args = list(args)
    i = _subcommand_at(args)
    if i < len(args) and args[i] in _DIFF_COMMANDS:
        args = [*args[: i + 1], "--no-ext-diff", "--no-textconv", *args[i + 1 :]]
    transport = [] if remote else [("protocol.allow", "never")]
    return ["git", "--no-pager", *_config_args([*HARDENING, *transport, *extra_config]), *args]


# Reads the repository's own config (and what it includes); reading config runs no program.
CONFIG_SCOPES = (["git", "config", "--local", "--list", "--includes", "-z"],
                 ["git", "config", "--worktree", "--list", "--includes", "-z"])


def read_filters(cwd: str, env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The filter overrides for the repository at `cwd`: drivers its own config defines; the
    user's global ones (git-lfs) stay. Other environments run CONFIG_SCOPES through their own
    `run` and pass the output to `filter_overrides`."""
    found: list[tuple[str, str]] = []
    for argv in CONFIG_SCOPES:
        try:
            proc = subprocess.run(argv, cwd=cwd, env=dict(env) if env is not None else safe_env(),
                                  capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        found += filter_overrides(proc.stdout.decode("utf-8", "surrogateescape"))
    return list(dict.fromkeys(found))


def run_git(args: Sequence[str], cwd: str, *, env: Mapping[str, str] | None = None,
            input: bytes | None = None, timeout: float = 600, remote: bool = False
            ) -> subprocess.CompletedProcess[bytes]:
    """Run hardened git on this machine; raises OSError / TimeoutExpired like subprocess.run."""
    env = safe_env() if env is None else safe_env(env)
    argv = git_argv(args, read_filters(cwd, env), remote=remote)
    return subprocess.run(argv, cwd=cwd, env=env, input=input, capture_output=True, timeout=timeout)
