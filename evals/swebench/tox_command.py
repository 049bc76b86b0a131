"""A `tox ...` test command turned into the commands it runs, to be run directly in the grader's venv.

swebench's specs run some repositories' tests as `tox --current-env -epy39 -v -- <tests>`: tox,
through the tox-current-env plugin, runs the testenv's `commands` with its `setenv` in the current
interpreter. Through tox that breaks here: the venv's python is a symlink, tox resolves it to the
base interpreter and loses the venv (`No module named pytest`). So the grader reads the testenv
from the repository's tox.ini itself (after the spec's pre-install edits to it) and runs its
commands with its environment: the same command line, one process fewer.

The reader covers what test environments use: `[testenv:NAME]` falling back to `[testenv]`, factor
conditions (`py39: ...`), `{posargs}`, `{env:NAME:default}`, `{[section]key}` references,
`{envpython}`, `{toxinidir}`, `{envname}`, a leading `-` (ignore the exit status) and line
continuations."""

from __future__ import annotations

import configparser
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path


class ToxError(ValueError):
    """The tox command or tox.ini cannot be read; one line for the report."""


@dataclass
class ToxRun:
    env_name: str
    commands: list[str]  # shell command lines, substitutions done
    setenv: dict[str, str] = field(default_factory=dict)

    def script(self) -> str:
        """One bash line: the commands in order, stopping at the first failure as tox does."""
        return " && ".join(self.commands)


_SUBST = re.compile(r"\{([^{}]*)\}")


def is_tox_command(command: str) -> bool:
    words = shlex.split(command)
    return bool(words) and (
        words[0] == "tox" or words[:3] in (["python", "-m", "tox"], ["python3", "-m", "tox"])
    )


def parse_tox_argv(command: str) -> tuple[str | None, list[str]]:
    """(the -e environment, the positional arguments after `--`) of a tox command line."""
    words = shlex.split(command)
    env, posargs = None, []
    if "--" in words:
        cut = words.index("--")
        words, posargs = words[:cut], words[cut + 1 :]
    for i, word in enumerate(words):
        if word in ("-e", "--env") and i + 1 < len(words):
            env = words[i + 1]
        elif word.startswith("-e") and not word.startswith("--") and len(word) > 2:
            env = word[2:]
        elif word.startswith("--env="):
            env = word.split("=", 1)[1]
    if env and "," in env:
        raise ToxError(f"tox command runs several environments ({env}); the grader runs one")
    return env, posargs


def read_tox_ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys and env names keep their case
    try:
        parser.read_string(path.read_text(encoding="utf-8"))
    except (OSError, configparser.Error) as exc:
        raise ToxError(f"cannot read {path.name}: {str(exc).splitlines()[0]}") from None
    return parser


def tox_run(
    command: str, root: Path, extra_posargs: list[str] | None = None, environ: dict[str, str] | None = None
) -> ToxRun:
    """What `command` (a tox command line, with `extra_posargs` appended) would run in `root`."""
    ini = root / "tox.ini"
    if not ini.is_file():
        raise ToxError(f"the test command is {command.split()[0]!r} but the repository has no tox.ini")
    cfg = read_tox_ini(ini)
    env_name, posargs = parse_tox_argv(command)
    posargs = [*posargs, *(extra_posargs or [])]
    env_name = env_name or _default_env(cfg)
    section = f"testenv:{env_name}" if cfg.has_section(f"testenv:{env_name}") else "testenv"
    environ = dict(os.environ if environ is None else environ)
    ctx = _Context(cfg, root, env_name, posargs, environ)
    raw = _get(cfg, section, "commands")
    if raw is None:
        raise ToxError(f"tox.ini has no commands for the {env_name} environment")
    setenv: dict[str, str] = {}
    for line in _lines(_get(cfg, section, "setenv") or _get(cfg, section, "set_env") or "", env_name):
        key, sep, value = line.partition("=")
        if sep:
            setenv[key.strip()] = ctx.expand(value.strip(), {**environ, **setenv})
    ctx.environ = {**environ, **setenv}
    commands = []
    for line in _lines(ctx.expand_refs(raw), env_name):
        ignore = line.startswith("-")
        cmd = ctx.expand(line[1:].lstrip() if ignore else line, ctx.environ, quote=True)
        commands.append(f"{{ {cmd} || true; }}" if ignore else cmd)
    if not commands:
        raise ToxError(f"tox.ini's commands for {env_name} are empty")
    return ToxRun(env_name, commands, setenv)


def _default_env(cfg: configparser.ConfigParser) -> str:
    envlist = _get(cfg, "tox", "envlist") or ""
    first = re.split(r"[,\s]+", envlist.strip())[0] if envlist.strip() else ""
    return first if first and "{" not in first else "py"


def _get(cfg: configparser.ConfigParser, section: str, key: str) -> str | None:
    if cfg.has_option(section, key):
        return cfg.get(section, key)
    if section.startswith("testenv:") and cfg.has_option("testenv", key):
        return cfg.get("testenv", key)
    return None


def _lines(value: str, env_name: str) -> list[str]:
    """Logical lines: continuations joined, comments dropped, factor conditions applied."""
    factors = set(env_name.split("-"))
    out = []
    for line in value.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        cond = re.match(r"^([\w,{}!.-]+):\s+(.*)$", line)
        if cond and not re.match(r"^[A-Za-z]:[\\/]", line):
            if not _factors_match(cond.group(1), factors):
                continue
            line = cond.group(2)
        out.append(line)
    return out


def _factors_match(spec: str, factors: set[str]) -> bool:
    """`py39,py310: x` (any of) and `py39-django: x` (all of); `!py39` negates."""
    for alternative in spec.split(","):
        parts = alternative.split("-")
        if all((p[1:] not in factors) if p.startswith("!") else (p in factors) for p in parts if p):
            return True
    return False


@dataclass
class _Context:
    cfg: configparser.ConfigParser
    root: Path
    env_name: str
    posargs: list[str]
    environ: dict[str, str]

    def expand_refs(self, value: str, depth: int = 0) -> str:
        """`{[section]key}` references, which may span several lines."""

        def ref(m: re.Match[str]) -> str:
            inner = re.fullmatch(r"\[([^\]]*)\](\S+)", m.group(1))
            if not inner or depth > 5:
                return m.group(0)
            section = inner.group(1) or "testenv"
            return self.expand_refs(_get(self.cfg, section, inner.group(2)) or "", depth + 1)

        return _SUBST.sub(ref, value)

    def expand(self, value: str, environ: dict[str, str], quote: bool = False) -> str:
        def sub(m: re.Match[str]) -> str:
            name, _, default = m.group(1).partition(":")
            if name == "posargs":
                if self.posargs:
                    return " ".join(map(shlex.quote, self.posargs)) if quote else " ".join(self.posargs)
                return default
            if name == "env":
                var, _, fallback = default.partition(":")
                return environ.get(var, fallback)
            simple = {
                "envpython": "python",
                "toxinidir": str(self.root),
                "tox_root": str(self.root),
                "envname": self.env_name,
                "env_name": self.env_name,
                "/": os.sep,
                ":": os.pathsep,
            }
            return simple.get(m.group(1), m.group(0))

        return _SUBST.sub(sub, value)
