"""What cannot be decided from a command's text (see tools/safety/shellparse.py's module doc): sets a
command's `opaque` reason and `open_tail` flag.

Arithmetic on variables counts as opaque: bash evaluates a variable's value as an expression, and
`x='a[$(cmd)]'` (set earlier, even exported by a previous step) runs cmd in `$((x))`, `(( x ))`,
`let n=x`, `declare -i n=x`, `[[ x -eq 1 ]]`, `${arr[x]}`, `${s:x}`; so do `${!x}` and `${x@P}`.
Only literal numbers (and `$?`, `$#`, `$$`, `$!`, `${#name}`) pass.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from clover.tools.safety.shellnorm import GIT_COMMANDS, GIT_GLOBAL_ARG, env_name, has_glob, risky_env
from clover.tools.safety.shellwords import expand_braces

if TYPE_CHECKING:
    from clover.tools.safety.shellcommand import SimpleCommand

# builtins that change how later words are run: their effect cannot be followed statically
_OPAQUE_BUILTINS = {
    "alias": "defines an alias",
    "hash": "sets a command hash",
    "enable": "loads builtins",
    "trap": "sets a trap",
}
# builtins that assign variables (checked for risky names such as PATH or GIT_CONFIG_*)
_ASSIGNING = {
    "export",
    "declare",
    "typeset",
    "local",
    "readonly",
    "read",
    "mapfile",
    "readarray",
    "getopts",
    "let",
}
# `git -c KEY=VALUE` keys that cannot run code or rename commands
_SAFE_GIT_CONFIG = re.compile(
    r"(?i)^(user\.\w+|color\.[\w.]+|advice\.\w+|init\.defaultbranch|commit\.gpgsign"
    r"|tag\.gpgsign|core\.quotepath|core\.autocrlf|log\.\w+|pull\.rebase|gc\.auto)="
)


def judge(cmd: SimpleCommand, dyn: list[bool]) -> None:
    """Set `opaque` / `open_tail` (see the module doc)."""
    argv = cmd.argv
    prog = os.path.basename(argv[0])
    risky = [env_name(a) for a in cmd.assigns if risky_env(env_name(a))]
    if cmd.dynamic:
        cmd.opaque = "takes its program name from an expansion"
    elif _GLOB_NAME.search(argv[0]) or expand_braces(argv[0]) != [argv[0]]:
        cmd.opaque = "takes its program name from a glob or brace expansion"
        cmd.dynamic = True
    elif risky:
        cmd.opaque = f"sets {risky[0]}, which changes what the command runs"
    elif prog in _OPAQUE_BUILTINS:
        cmd.opaque = f"{_OPAQUE_BUILTINS[prog]} (it can stand in for any command)"
    elif prog == "shopt" and "expand_aliases" in argv:
        cmd.opaque = "turns on aliases (they can stand in for any command)"
    elif prog in _ASSIGNING or (prog == "printf" and "-v" in argv):
        names = [env_name(a) for a in argv[1:] if not a.startswith("-")]
        if bad := next((n for n in names if risky_env(n)), None):
            cmd.opaque = f"sets {bad}, which changes what later commands run"
    elif prog == "git":
        cmd.opaque = git_opaque(argv, dyn)
    if cmd.opaque is None:
        cmd.opaque = _arith_opaque(prog, argv)
    unknown = any(d or (w.startswith("-") and has_glob(w)) for w, d in zip(argv, dyn, strict=False))
    cmd.open_tail = unknown or "xargs" in cmd.wrappers


_GLOB_NAME = re.compile(r"[*?]|\[[^\]]+\]")  # `[` alone is the test command, not a glob
ARITH_MARK = "CLOVERARITH"  # what tools/safety/shellparse.py puts for `(( ... ))` / `[[ x -eq y ]]` on names
_ARITH = "evaluates arithmetic on variables (a variable's value can run code there)"
_SAFE_NUMBER = re.compile(r"^(-?\d+|\$[?#$!]|\$\{[?#$!]\}|\$\{#\w+\})$")
_NAME = re.compile(r"[A-Za-z_]")


def arith_safe(expr: str) -> bool:
    """Literal numbers and operators only (plus `$?`, `$#`, ...): nothing a variable can hide in."""
    stripped = re.sub(r"\$[?#$!]|\$\{[?#$!]\}|\$\{#\w+\}", "0", expr)
    return not _NAME.search(stripped) and "$" not in stripped and "`" not in stripped


def _arith_opaque(prog: str, argv: list[str]) -> str | None:
    if prog == ARITH_MARK:
        return _ARITH
    if prog == "let" and not all(arith_safe(re.sub(r"^\w+\s*[-+*/%]?=", "", a)) for a in argv[1:]):
        return _ARITH
    if prog in ("declare", "typeset", "local", "readonly", "export"):
        flags = "".join(a[1:] for a in argv[1:] if a.startswith("-"))
        if "i" in flags and not all(arith_safe(a.split("=", 1)[1]) for a in argv[1:] if "=" in a):
            return _ARITH
    return None


def param_opaque(value: str) -> str | None:
    """Why a `${...}` expansion (bashlex's parameter value) can run code, or None."""
    if re.match(r"^!\w+$", value) or re.match(r"^!\w+\[[^@*\]]", value):
        return "expands a variable named by another (`${!x}`; a subscript in it runs code)"
    if re.search(r"@P$", value):
        return "expands a value as a prompt (`${x@P}` runs substitutions in it)"
    sub = re.match(r"^#?\w+\[([^\]]*)\]", value)
    if sub and sub.group(1) not in ("@", "*") and not arith_safe(sub.group(1)):
        return _ARITH
    offsets = re.match(r"^\w+:(?![-=?+])(.*)$", value)
    if offsets and not arith_safe(offsets.group(1).replace(":", " ")):
        return _ARITH
    return None


def git_opaque(argv: list[str], dyn: list[bool]) -> str | None:
    """Why `git ...` may run another git command than it names (an alias, `-c`), or None."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        opt = argv[i]
        value = argv[i + 1] if i + 1 < len(argv) else ""
        if opt == "-c" and not _SAFE_GIT_CONFIG.match(value):
            return f"sets git configuration `{value[:60]}` (aliases, pagers and hooks can run any command)"
        if opt in ("--config-env", "--exec-path") or opt.startswith(("--config-env=", "--exec-path=")):
            return f"uses git {opt.split('=')[0]} (it can change what git runs)"
        i += 2 if opt in GIT_GLOBAL_ARG else 1
    if i < len(argv):
        if dyn[i]:
            return "takes its git subcommand from an expansion"
        if argv[i] not in GIT_COMMANDS:
            return f"runs `git {argv[i][:40]}`, not a git command of its own (an alias can run any command)"
    return None
