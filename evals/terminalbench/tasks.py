"""Terminal-Bench task directories: loading and Dockerfile reading.

Two layouts are read:
- Harbor (Terminal-Bench 2.x): task.toml, instruction.md, environment/Dockerfile, tests/test.sh
  (writes /logs/verifier/reward.txt), solution/solve.sh.
- Terminal-Bench 1: task.yaml (`instruction`), Dockerfile, run-tests.sh (pass = exit status 0),
  solution.sh, tests/.

Without Docker a task runs in a TaskContainer (container.py): the root of its FROM image
(images.py) under a throwaway overlay, the task's paths as they are (/app stays /app). The
Dockerfile is read, not built by Docker: WORKDIR, ENV, ARG, COPY/ADD and RUN are applied in order
inside the container (build.py), an earlier stage is built in a container of its own for
`COPY --from=<stage>`. Only what cannot be done that way is unsupported (FROM an earlier stage,
ADD from a URL, RUN with BuildKit options other than a cache mount or a network choice).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from clover.core.compat import tomllib


class TaskError(ValueError):
    """A task directory that cannot be read; the message is one line for the user."""


@dataclass
class DockerSpec:
    """What the local runner can do with a Dockerfile: the final stage's base, WORKDIR and steps, in
    order, and the earlier stages it copies from."""

    base: str = ""
    workdir: str = "/"  # the last WORKDIR: where the agent, the solution and the tests start
    # In order: ("workdir", path) | ("env", "NAME\0value") | ("arg", "NAME\0default": the build's only)
    # | ("run", cmd) | ("copy", "src\0dest") | ("copy-from", "source\0src...\0dest": a stage or an image)
    steps: list[tuple[str, str]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # every ENV, for the commands after the build
    unsupported: list[str] = field(default_factory=list)  # reasons the spec cannot run locally
    name: str = ""  # FROM ... AS name
    stages: list[DockerSpec] = field(default_factory=list)  # the earlier stages, in order (final stage only)


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
    build_timeout: float = 600.0
    network: bool = True  # task.toml [environment] network_mode = "none" / allow_internet = false: off
    # task.toml's env tables as written (${NAME} / ${NAME:-default} resolved from this machine at run time):
    # [environment].env for every command after the build, [solution].env for the oracle, [verifier].env the tests
    env: dict[str, str] = field(default_factory=dict)
    solution_env: dict[str, str] = field(default_factory=dict)
    verifier_env: dict[str, str] = field(default_factory=dict)
    prebuilt_image: str = ""  # task.toml's docker_image: what Harbor pulls instead of building (not here)


# Instructions that change nothing the local container needs.
_IGNORED = {
    "LABEL",
    "MAINTAINER",
    "EXPOSE",
    "CMD",
    "ENTRYPOINT",
    "VOLUME",
    "STOPSIGNAL",
    "USER",
    "HEALTHCHECK",
    "SHELL",
}


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
    """The final stage (with the earlier ones in `.stages`); unsupported instructions are listed,
    with the reason, in the final stage's `unsupported`."""
    stages: list[DockerSpec] = []
    spec = DockerSpec()
    global_args: dict[str, str] = {}  # ARGs before the first FROM: only for FROM lines
    for line in _logical_lines(text):
        keyword, _, arg = line.partition(" ")
        keyword, arg = keyword.upper(), arg.strip()
        if keyword == "FROM":
            words = [word for word in arg.split() if not word.startswith("--")]  # --platform=...
            if stages or spec.base:
                stages.append(spec)
                spec = DockerSpec()
            spec.base = _expand_args(words[0], global_args) if words else ""
            spec.name = words[2].lower() if len(words) > 2 and words[1].lower() == "as" else ""
            if any(spec.base.lower() in (s.name, str(i)) for i, s in enumerate(stages)):
                spec.unsupported.append(f"FROM an earlier stage ({spec.base})")
        elif keyword == "WORKDIR":
            spec.workdir = str(PurePosixPath(spec.workdir) / arg.strip("\"'"))
            spec.steps.append(("workdir", spec.workdir))
        elif keyword == "ENV":
            pairs: list[tuple[str, str]] = []
            if "=" in arg.split()[0]:
                for item in shlex.split(arg):
                    name, _, value = item.partition("=")
                    pairs.append((name, value))
            else:
                name, _, value = arg.partition(" ")
                pairs.append((name, value.strip()))
            for name, value in pairs:
                spec.env[name] = value
                spec.steps.append(("env", f"{name}\0{value}"))
        elif keyword == "ARG":  # a build variable with its default
            name, eq, value = arg.partition("=")
            if not spec.base and not stages:
                global_args[name.strip()] = _unquote(value.strip())
            elif eq:
                spec.steps.append(("arg", f"{name.strip()}\0{_unquote(value.strip())}"))
        elif keyword == "RUN":
            arg = _IGNORABLE_RUN_OPTIONS.sub("", arg)  # a cache mount or a network choice: same result here
            argv = _exec_form(arg)
            command = shlex.join(argv) if argv is not None else arg
            if command.startswith("--"):
                spec.unsupported.append(f"RUN with options: {command[:60]}")
                continue
            spec.steps.append(("run", command))
        elif keyword in ("COPY", "ADD"):
            parts = _exec_form(arg) or shlex.split(arg)
            options = [p for p in parts if p.startswith("--")]
            paths = [p for p in parts if not p.startswith("--")]
            source = next((o.split("=", 1)[1] for o in options if o.startswith("--from=")), None)
            if len(paths) < 2:
                spec.unsupported.append(f"malformed {keyword}: {arg}")
            elif keyword == "ADD" and any("://" in p for p in paths):
                spec.unsupported.append("ADD from a URL")
            elif source is not None:
                spec.steps.append(("copy-from", "\0".join([source, *paths])))
            else:
                for src in paths[:-1]:
                    spec.steps.append(("copy", f"{src}\0{paths[-1]}"))
        elif keyword not in _IGNORED:
            spec.unsupported.append(f"Dockerfile instruction {keyword}")
    spec.stages = stages
    for stage in stages:  # an earlier stage's problems are the build's
        spec.unsupported += stage.unsupported
    return spec


def _expand_args(word: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), ""), word)


_IGNORABLE_RUN_OPTIONS = re.compile(r"^(?:\s*--(?:mount=type=cache\S*|network=\S+))+\s*")


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) > 1 and value[0] == value[-1] and value[0] in "\"'" else value


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


_TEMPLATE = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def resolve_env(table: dict[str, str], where: str = "task.toml") -> dict[str, str]:
    """Harbor's env templating: ${NAME} and ${NAME:-default} come from this machine's environment."""

    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is None:
            raise TaskError(f"{where}: ${{{name}}} is not set on this machine")
        return default

    return {key: _TEMPLATE.sub(value, raw) for key, raw in table.items()}


def _env_table(config: dict, section: str, path: Path) -> dict[str, str]:
    table = (config.get(section) or {}).get("env") or {}
    if not isinstance(table, dict) or any(isinstance(v, (dict, list)) for v in table.values()):
        raise TaskError(f"{path}: [{section}].env must be a table of NAME = value")
    return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in table.items()}


def _load_harbor(root: Path) -> Task:
    try:
        config = tomllib.loads(_read(root / "task.toml"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{root / 'task.toml'}: {exc}") from None
    dockerfile = root / "environment" / "Dockerfile"
    environment = config.get("environment") or {}
    image = environment.get("docker_image")
    if not dockerfile.is_file() and not image:
        raise TaskError(f"{root}: environment/Dockerfile is missing")
    if not (root / "tests" / "test.sh").is_file():
        raise TaskError(f"{root}: tests/test.sh is missing")
    solve = root / "solution" / "solve.sh"
    if dockerfile.is_file():
        docker = parse_dockerfile(_read(dockerfile))
    else:  # Harbor pulls the image; here it is skipped with the reason, the other tasks still run
        docker = DockerSpec(
            base=str(image),
            unsupported=[
                f"only a prebuilt image ({image}), which is not pulled "
                "here, and no environment/Dockerfile to build"
            ],
        )
    if environment.get("workdir"):
        docker.workdir = str(environment["workdir"])
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
        build_timeout=float(environment.get("build_timeout_sec") or 600.0),
        network=environment.get("network_mode", "public") != "none"
        and environment.get("allow_internet", True) is not False,
        env=_env_table(config, "environment", root / "task.toml"),
        solution_env=_env_table(config, "solution", root / "task.toml"),
        verifier_env=_env_table(config, "verifier", root / "task.toml"),
        prebuilt_image=str(image or ""),
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
