"""Terminal-Bench task directories: loading, Dockerfile reading, and the host path mapping.

Two layouts are read:
- Harbor (Terminal-Bench 2.x): task.toml, instruction.md, environment/Dockerfile, tests/test.sh
  (writes /logs/verifier/reward.txt), solution/solve.sh.
- Terminal-Bench 1: task.yaml (`instruction`), Dockerfile, run-tests.sh (pass = exit status 0),
  solution.sh, tests/.

Without Docker a task runs on this machine in a temporary directory. Its WORKDIR, /tests, /solution
and /logs map to directories there; the mapping is applied to the instruction and to our copies of
the Dockerfile's RUN steps and of the test and solution scripts (never to the agent's commands).
Tasks that need anything else (packages, other root paths, multi-stage builds) are skipped with the
reason. `mapping_problem` says why a text cannot run under the mapping.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class TaskError(ValueError):
    """A task directory that cannot be read; the message is one line for the user."""


@dataclass
class DockerSpec:
    """What the local runner can do with a Dockerfile: the WORKDIR and the steps, in order."""

    base: str = ""
    workdir: str = "/"
    steps: list[tuple[str, str]] = field(default_factory=list)  # ("run", cmd) | ("copy", "src\0dest")
    env: dict[str, str] = field(default_factory=dict)
    unsupported: list[str] = field(default_factory=list)  # reasons the spec cannot run locally


@dataclass
class Task:
    id: str
    path: Path
    format: str  # "harbor" | "tb1"
    instruction: str
    docker: DockerSpec
    context_dir: Path  # COPY sources are relative to this
    test_script: Path
    tests_dir: Path
    solution_script: Path | None
    agent_timeout: float = 600.0
    test_timeout: float = 600.0


# Instructions that change nothing a shell-only task needs.
_IGNORED = {"LABEL", "MAINTAINER", "EXPOSE", "CMD", "ENTRYPOINT", "VOLUME", "STOPSIGNAL", "ARG", "USER"}
# RUN steps that install software or fetch from the network are more than "shell-only".
# Only in command position (line start, after ; && || | $( or sudo), so prose and echo text pass.
_INSTALLERS = re.compile(
    r"(?:^|[;&|(`]|\bthen\b|\bdo\b|\bsudo\b|\bexec\b)\s*"
    r"(apt-get|apt|apk|yum|dnf|pip3?|python3?\s+-m\s+pip|uv|uvx|conda|npm|npx|yarn|cargo|gem|go|curl|wget|"
    r"git\s+clone|add-apt-repository|dpkg|rpm|snap|brew)(?![\w-])",
    re.MULTILINE,
)


def _logical_lines(text: str) -> list[str]:
    lines, current = [], ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):  # comments inside a continued instruction
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append((current + stripped).strip())
        current = ""
    if current.strip():
        lines.append(current.strip())
    return lines


def _exec_form(arg: str) -> list[str] | None:
    if arg.startswith("["):
        try:
            value = json.loads(arg)
        except json.JSONDecodeError:
            return None
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
    return None


def parse_dockerfile(text: str) -> DockerSpec:
    spec = DockerSpec()
    stages = 0
    for line in _logical_lines(text):
        keyword, _, arg = line.partition(" ")
        keyword, arg = keyword.upper(), arg.strip()
        if keyword == "FROM":
            stages += 1
            spec.base = arg.split()[0] if arg else ""
            if stages > 1:
                spec.unsupported.append("multi-stage Dockerfile")
        elif keyword == "WORKDIR":
            spec.workdir = str(PurePosixPath(spec.workdir) / arg.strip("\"'"))
        elif keyword == "ENV":
            if "=" in arg.split()[0]:
                for item in shlex.split(arg):
                    name, _, value = item.partition("=")
                    spec.env[name] = value
            else:
                name, _, value = arg.partition(" ")
                spec.env[name] = value.strip()
        elif keyword == "RUN":
            argv = _exec_form(arg)
            command = shlex.join(argv) if argv is not None else arg
            if command.startswith("--"):
                spec.unsupported.append(f"RUN with options: {command[:60]}")
                continue
            installer = _INSTALLERS.search(command)
            if installer:
                spec.unsupported.append(f"RUN installs or downloads software ({installer.group(1)})")
            spec.steps.append(("run", command))
        elif keyword in ("COPY", "ADD"):
            parts = _exec_form(arg) or shlex.split(arg)
            options = [p for p in parts if p.startswith("--")]
            paths = [p for p in parts if not p.startswith("--")]
            if any(o.startswith("--from") for o in options):
                spec.unsupported.append(f"{keyword} --from (multi-stage)")
            elif len(paths) < 2:
                spec.unsupported.append(f"malformed {keyword}: {arg}")
            elif keyword == "ADD" and any("://" in p for p in paths):
                spec.unsupported.append("ADD from a URL")
            else:
                for src in paths[:-1]:
                    spec.steps.append(("copy", f"{src}\0{paths[-1]}"))
        elif keyword not in _IGNORED:
            spec.unsupported.append(f"Dockerfile instruction {keyword}")
    return spec


# --------------------------------------------------------------------------- loading


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskError(f"{path}: {exc.strerror or exc}") from None


def load_task(path: str | Path) -> Task:
    root = Path(path)
    if (root / "task.toml").is_file():
        return _load_harbor(root)
    if (root / "task.yaml").is_file():
        return _load_tb1(root)
    raise TaskError(f"{root}: not a task directory (no task.toml or task.yaml)")


def _load_harbor(root: Path) -> Task:
    try:
        config = tomllib.loads(_read(root / "task.toml"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{root / 'task.toml'}: {exc}") from None
    dockerfile = root / "environment" / "Dockerfile"
    if not dockerfile.is_file():
        raise TaskError(f"{root}: environment/Dockerfile is missing")
    if not (root / "tests" / "test.sh").is_file():
        raise TaskError(f"{root}: tests/test.sh is missing")
    solve = root / "solution" / "solve.sh"
    docker = parse_dockerfile(_read(dockerfile))
    workdir = (config.get("environment") or {}).get("workdir")
    if workdir:
        docker.workdir = str(workdir)
    return Task(
        id=root.name,
        path=root,
        format="harbor",
        instruction=_read(root / "instruction.md"),
        docker=docker,
        context_dir=root / "environment",
        test_script=root / "tests" / "test.sh",
        tests_dir=root / "tests",
        solution_script=solve if solve.is_file() else None,
        agent_timeout=float((config.get("agent") or {}).get("timeout_sec") or 600.0),
        test_timeout=float((config.get("verifier") or {}).get("timeout_sec") or 600.0),
    )


def _load_tb1(root: Path) -> Task:
    import yaml  # only the older format needs it

    try:
        config = yaml.safe_load(_read(root / "task.yaml")) or {}
    except yaml.YAMLError as exc:
        raise TaskError(f"{root / 'task.yaml'}: {str(exc).splitlines()[0]}") from None
    if not isinstance(config, dict) or not isinstance(config.get("instruction"), str):
        raise TaskError(f"{root / 'task.yaml'}: no 'instruction' text")
    for name in ("Dockerfile", "run-tests.sh"):
        if not (root / name).is_file():
            raise TaskError(f"{root}: {name} is missing")
    solve = root / "solution.sh"
    return Task(
        id=root.name,
        path=root,
        format="tb1",
        instruction=config["instruction"],
        docker=parse_dockerfile(_read(root / "Dockerfile")),
        context_dir=root,
        test_script=root / "run-tests.sh",
        tests_dir=root / "tests",
        solution_script=solve if solve.is_file() else None,
        agent_timeout=float(config.get("max_agent_timeout_sec") or 600.0),
        test_timeout=float(config.get("max_test_timeout_sec") or 600.0),
    )


def find_tasks(root: str | Path, ids: list[str] | None = None) -> list[Task]:
    """Every task directory at or directly under `root`, sorted by id; `ids` picks some."""
    base = Path(root)
    if not base.is_dir():
        raise TaskError(f"{base}: not a directory")
    if (base / "task.toml").is_file() or (base / "task.yaml").is_file():
        dirs = [base]
    else:
        dirs = sorted(d for d in base.iterdir() if (d / "task.toml").is_file() or (d / "task.yaml").is_file())
    tasks = [load_task(d) for d in dirs]
    if ids:
        known = {t.id: t for t in tasks}
        missing = [i for i in ids if i not in known]
        if missing:
            raise TaskError(f"unknown task id(s) in {base}: {', '.join(missing)}")
        tasks = [known[i] for i in ids]
    if not tasks:
        raise TaskError(f"{base}: no task directories found")
    return tasks


# --------------------------------------------------------------------------- path mapping

# Root paths a script may use on this machine as they are (system files, scratch space).
_HOST_PATHS = ("/dev/", "/usr/", "/bin/", "/sbin/", "/lib", "/proc/", "/etc/", "/tmp", "/dev")
_ABS_PATH = re.compile(r"(?<![\w./$}~:@-])/[A-Za-z0-9_][A-Za-z0-9_.+-]*(?:/[A-Za-z0-9_.+-]*)*")


def sandbox_paths(task: Task) -> list[str]:
    """The container paths the local mapping covers, longest first."""
    paths = {"/tests", "/solution", "/logs", "/logs/verifier", "/logs/agent"}
    if task.docker.workdir not in ("/", ""):
        paths.add(task.docker.workdir.rstrip("/"))
    return sorted(paths, key=len, reverse=True)


def map_paths(text: str, mapping: dict[str, str]) -> str:
    """Replace each container path in `mapping` (whole path components only) by its host path."""
    for container in sorted(mapping, key=len, reverse=True):
        pattern = re.compile(r"(?<![\w.$}~:@/-])" + re.escape(container) + r"(?=/|\.(?![\w+-])|[^\w.+-]|$)")  # "/app." ends a sentence
        text = pattern.sub(lambda _m, c=container: mapping[c], text)
    return text


def mapping_problem(text: str, mapping: dict[str, str], what: str) -> str | None:
    """Why `text` (already mapped) still needs the container's file system, or None."""
    hosts = tuple(mapping.values())
    for match in _ABS_PATH.finditer(text):
        found = match.group(0).rstrip(".")
        if found.startswith(hosts) or found.startswith(_HOST_PATHS):
            continue
        line = text[: match.start()].count("\n")
        if line == 0 and text.startswith("#!"):
            continue
        return f"{what} uses the root path {found}"
    installer = _INSTALLERS.search(text)
    if installer and what != "the instruction":
        return f"{what} installs or downloads software ({installer.group(1)})"
    return None
