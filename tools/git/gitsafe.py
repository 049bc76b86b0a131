"""The git program, hardened, for where Clover still needs it: the evals' clone / checkout / apply on
benchmark repositories, and git run through an environment that is not this machine (a container).

Clover's own git on the host goes through tools/git/hostgit.py (libgit2, which runs no program); this
module is the second line, for the git program. A repository's `.git/config` is writable by what
runs in the workspace, and git runs programs it names. So every invocation here:

- runs with a scrubbed environment: no inherited GIT_* (GIT_CONFIG_PARAMETERS, GIT_EXTERNAL_DIFF,
  GIT_SSH_COMMAND ...), no system config, no terminal prompts, no pager;
- overrides, at command scope (which beats every config file), a fixed list of code-running
  settings, and every key of the repository's own config (read with its includes and conditional
  includes; reading config runs nothing) whose variable names a program: `*.clean`, `*.smudge`,
  `*.process`, `*.textconv`, `*command`, `*cmd`, `*program`, `*.helper`, `*hook*`, `*.editor`,
  `*.pager` ... Every filter driver the repository defines is also made optional. The key is
  passed whole (GIT_CONFIG_KEY_n, which git never splits, not `-c key=value`, which git splits at
  the first '=': a filter named `a=b` slipped through that way);
- passes `--no-ext-diff --no-textconv` to the commands that render diffs.
The user's global config stays (it is theirs, not the repository's: git-lfs, identity). Aliases
never apply: only built-in subcommands are run.
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
    ("core.alternateRefsCommand", ""),
    ("credential.helper", ""),
    ("diff.external", ""),  # with --no-ext-diff ignored; without it a diff fails instead of running one
    ("gpg.program", "false"),
    ("gpg.openpgp.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.ssh.defaultKeyCommand", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("protocol.ext.allow", "never"),  # ext:: URLs run a command
    ("uploadpack.packObjectsHook", ""),
    ("init.templateDir", ""),  # a clone would copy hooks from it
    ("pager.diff", "false"),
    ("pager.log", "false"),
    ("pager.show", "false"),
    ("pager.status", "false"),
)
# Subcommands that render patches, where diff drivers (external, textconv) would run.
_DIFF_COMMANDS = {"diff", "show", "log", "diff-tree", "diff-index", "diff-files", "format-patch"}
# A config variable (the last dot-separated part of a key) with one of these names or endings
# names a program, or a place git takes programs from.
_PROGRAM_NAMES = {
    "clean",
    "smudge",
    "process",
    "textconv",
    "helper",
    "editor",
    "pager",
    "askpass",
    "gitproxy",
    "fsmonitor",
    "hookspath",
    "external",
    "driver",
    "uploadpack",
    "receivepack",
    "vcs",
    "update",
    "templatedir",
    "difffilter",
}
_PROGRAM_ENDINGS = ("command", "cmd", "program", "hook")
# Kept from the caller's environment: where the repository and index are (a throwaway index, a
# shadow repository), which global config is the user's, and who commits. No other GIT_* survives.
_KEPT_VARS = {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CEILING_DIRECTORIES", "GIT_CONFIG_GLOBAL"}


def safe_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) without the GIT_* that run code or add config
    (only location, identity and GIT_CONFIG_GLOBAL stay) and with system config, prompts and
    pagers switched off. The user's global config stays (it is theirs, not the repository's)."""
    env = {
        k: v
        for k, v in (os.environ if base is None else base).items()
        if not k.startswith("GIT_") or k in _KEPT_VARS or k.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_"))
    }
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_PAGER="cat",
        PAGER="cat",
        GIT_OPTIONAL_LOCKS="0",
        GIT_NO_REPLACE_OBJECTS="1",
    )
    return env


def _config_args(pairs: Sequence[tuple[str, str]]) -> list[str]:
    out: list[str] = []
    for key, value in pairs:
        if "=" in key:  # git would split the key there: only GIT_CONFIG_KEY_n can name it
            raise ValueError(
                f"the repository's config has a key git cannot override on a command line: {key!r}"
            )
        out += ["-c", f"{key}={value}"]
    return out


def _names_a_program(key: str) -> bool:
    variable = key.rsplit(".", 1)[-1].lower()
    return variable in _PROGRAM_NAMES or variable.endswith(_PROGRAM_ENDINGS)


def config_overrides(config_listing: str) -> list[tuple[str, str]]:
    """Overrides for every code-running key in a `git config --list -z` listing: blanked, and each
    filter driver made optional (a required driver with no command would fail every command)."""
    found: dict[str, str] = {}
    for item in config_listing.split("\0"):
        key = item.split("\n", 1)[0]
        if not key or not _names_a_program(key):
            continue
        found[key] = ""
        section, _, variable = key.rpartition(".")
        if section.lower().startswith("filter.") and variable.lower() in ("clean", "smudge", "process"):
            found[section + ".required"] = "false"
    return list(found.items())


filter_overrides = config_overrides  # the earlier name


def _subcommand_at(args: Sequence[str]) -> int:
    """Index of the subcommand after git's own options (`-c k=v`, `-C dir`, `--literal-pathspecs`)."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in ("-c", "-C", "--git-dir", "--work-tree", "--namespace") else 1
    return i


def _with_diff_flags(args: Sequence[str]) -> list[str]:
    args = list(args)
    i = _subcommand_at(args)
    if i < len(args) and args[i] in _DIFF_COMMANDS:
        args = [*args[: i + 1], "--no-ext-diff", "--no-textconv", *args[i + 1 :]]
    return args


def _transport(remote: bool) -> list[tuple[str, str]]:
    return [] if remote else [("protocol.allow", "never")]


def git_argv(
    args: Sequence[str], extra_config: Sequence[tuple[str, str]] = (), *, remote: bool = False
) -> list[str]:
    """`git <hardening> <args>` as one argv (for an environment's `run`, where only the argv travels);
    diff-rendering subcommands also get --no-ext-diff --no-textconv. No transport is allowed (no
    clone, fetch or push reaches anything) unless `remote`. Raises ValueError for an override git
    cannot take on a command line (a key with '=' in it): refuse rather than run its driver."""
    return [
        "git",
        "--no-pager",
        *_config_args([*HARDENING, *_transport(remote), *extra_config]),
        *_with_diff_flags(args),
    ]


# Reads the repository's own config (and what it includes); reading config runs no program.
CONFIG_SCOPES = (
    ["git", "config", "--local", "--list", "--includes", "-z"],
    ["git", "config", "--worktree", "--list", "--includes", "-z"],
)


def read_overrides(cwd: str, env: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The overrides for the repository at `cwd`, from its own config (the user's global one
    stays). Other environments run CONFIG_SCOPES through their own `run` and pass the output to
    `config_overrides`."""
    found: list[tuple[str, str]] = []
    for argv in CONFIG_SCOPES:
        try:
            proc = subprocess.run(
                argv,
                cwd=cwd,
                env=dict(env) if env is not None else safe_env(),
                capture_output=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        found += config_overrides(proc.stdout.decode("utf-8", "surrogateescape"))
    return list(dict.fromkeys(found))


read_filters = read_overrides  # the earlier name


def config_env(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Command-scope config as GIT_CONFIG_COUNT / GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n: the key is
    taken whole, whatever it contains."""
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env


def run_git(
    args: Sequence[str],
    cwd: str,
    *,
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    timeout: float = 600,
    remote: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    """Run hardened git on this machine; raises OSError / TimeoutExpired like subprocess.run."""
    env = safe_env() if env is None else safe_env(env)
    pairs = [*HARDENING, *_transport(remote), *read_overrides(cwd, env)]
    argv = ["git", "--no-pager", *_with_diff_flags(args)]
    return subprocess.run(
        argv, cwd=cwd, env={**env, **config_env(pairs)}, input=input, capture_output=True, timeout=timeout
    )
