"""The environment commands get: an allowlist, not the whole of Clover's (Codex's
`shell_environment_policy`, inherit "core").

Commands see PATH, HOME, USER, LOGNAME, SHELL, TERM, TMPDIR, TZ, LANG, LANGUAGE, LC_*, the
user's activated virtualenv (VIRTUAL_ENV), the git identity (GIT_AUTHOR_*/GIT_COMMITTER_* names
and e-mails) and the names the user lists in the config
(`pass_env`, globs allowed). Everything else (tokens, passwords, cloud credentials, SSH agent
sockets) is withheld; output redaction (tools/safety/redact.py) stays as a second layer.

Clover's own virtualenv never reaches them: when Clover runs from a venv (sys.prefix is not sys.base_prefix; a
conda env counts as a base interpreter), that venv's bin/ leaves PATH and VIRTUAL_ENV/PYTHONHOME/PYTHONPATH
pointing into it are dropped, so `python3 -m pytest` runs the user's Python, not Clover's. This holds also
when the user activated Clover's venv to start Clover (the README's install): that venv holds Clover, not the
project. The exception is a venv inside the workspace (the project's own venv, with Clover installed into it):
that one is the project's and stays. Another venv the user activated stays (Clover in venv A, project venv B
active: commands get B)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

CORE_NAMES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "TMPDIR",
    "TZ",
    "LANG",
    "LANGUAGE",
    "VIRTUAL_ENV",
    "LC_*",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
)
_PYTHON_PATHS = ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH")


def clover_venv(workspace: str | None = None) -> str | None:
    """Clover's own virtualenv or conda prefix, when it must not leak into commands (see the
    module doc); None when Clover runs from a base interpreter or from the workspace's own venv."""
    prefix = os.path.realpath(sys.prefix)
    if prefix == os.path.realpath(sys.base_prefix):
        return None
    if workspace:
        root = os.path.realpath(workspace)
        if prefix == root or prefix.startswith(root + os.sep):
            return None
    return prefix


def command_environment(
    environ: Mapping[str, str], pass_env: Iterable[str] = (), workspace: str | None = None
) -> dict[str, str]:
    """The allowlisted copy of `environ` for commands (see the module doc)."""
    patterns = [*CORE_NAMES, *pass_env]
    env = {k: v for k, v in environ.items() if any(fnmatchcase(k, p) for p in patterns)}
    own = clover_venv(workspace)
    if own is None:
        return env
    for name in _PYTHON_PATHS:
        value = env.get(name)
        if value and _inside(value.split(os.pathsep)[0], own):
            env.pop(name)
    if "PATH" in env:
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not _inside(p, own))
    return env


def _inside(path: str, prefix: str) -> bool:
    if not path:
        return False
    real = os.path.realpath(path)
    return real == prefix or real.startswith(prefix + os.sep)


def interpreter_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allowlisted environment with Clover's own interpreter first on PATH: for Clover's own
    pipelines whose generated projects need the packages Clover runs with (the SynthFix oracle runs
    their pytest), never for the agent's commands in a user's workspace."""
    env = command_environment(os.environ if environ is None else environ)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join(
        [bindir, *(p for p in env.get("PATH", os.defpath).split(os.pathsep) if p != bindir)]
    )
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    return env
