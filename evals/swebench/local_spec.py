"""What the local grader needs to know per instance, taken from the `swebench` package (4.x) where
it knows the repository: Python version, requirements, install command, test command and log
parser. Instances it does not know (synthfix, local repos) get a default pytest spec."""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clover.evals.swebench.conda_env import (
    CondaEnvironment,
    EnvironmentYmlError,
    conda_to_pip,
    parse_environment_yml,
)
from clover.evals.swebench.dataset import Instance, modified_files
from clover.evals.swebench.system_packages import spec_system_packages
from clover.evals.swebench.tox_command import is_tox_command
from clover.evals.swebench.workspace import WorkspaceError, git

Parser = Callable[[str, Any], dict[str, str]]

# Commands in official specs that change the machine (apt, /etc, locales): a Docker image may run
# them, a grader on a shared machine must not. Skipped, and logged as skipped.
SYSTEM_COMMAND = re.compile(r"\bapt(-get)?\b|/etc/|\blocale-gen\b|\bwget\b|\bcurl\b")


class SpecError(RuntimeError):
    """The environment cannot be built here; one line for the report."""


@dataclass
class LocalSpec:
    python: str | None  # "3.9", or None: the interpreter running the grader
    requirements: list[str] = field(default_factory=list)  # pip requirement lines
    base_packages: list[str] = field(default_factory=list)  # installed with the interpreter (conda create's)
    pip_packages: list[str] = field(default_factory=list)
    pre_install: list[str] = field(default_factory=list)
    install: str | None = None
    eval_commands: list[str] = field(default_factory=list)
    test_cmd: str = ""  # with the test directives appended
    parser: Parser | None = None
    official: bool = False  # from swebench's spec map
    inherit_site: bool = False  # default spec: the venv sees the grader's packages (pytest)
    env: dict[str, str] = field(default_factory=dict)  # extra environment for every command
    notes: list[str] = field(default_factory=list)
    # Packages resolve as of this date (uv --exclude-newer), None: not held (the default spec).
    exclude_newer: str | None = None
    conda_env: CondaEnvironment | None = None  # when the requirements come from an environment.yml
    missing_packages: dict[str, str] = field(default_factory=dict)  # left out at install: name -> why
    system_packages: list[str] = field(default_factory=list)  # the spec's apt-get installs (not run here)
    missing_system_packages: list[str] = field(default_factory=list)  # of those, not on this machine


def _default_parser() -> Parser:
    try:
        from swebench.harness.log_parsers.python import parse_log_pytest

        return parse_log_pytest
    except ImportError:
        raise SpecError(
            "the local grader needs the swebench package: pip install 'clover-cli[swebench]'"
        ) from None


def resolve_spec(instance: Instance, workspace: Path) -> LocalSpec:
    try:
        from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS
        from swebench.harness.log_parsers import MAP_REPO_TO_PARSER
        from swebench.harness.test_spec.python import get_test_directives
    except ImportError:
        raise SpecError(
            "the local grader needs the swebench package: pip install 'clover-cli[swebench]'"
        ) from None
    specs = MAP_REPO_VERSION_TO_SPECS.get(instance["repo"], {}).get(instance.get("version", ""))
    if specs is None:
        return default_spec(instance, workspace)
    # get_test_directives is functools.cache'd on the (unhashable) instance dict: call the original.
    directives = getattr(get_test_directives, "__wrapped__", get_test_directives)(instance)
    test_cmd = specs["test_cmd"] if isinstance(specs["test_cmd"], str) else specs["test_cmd"][-1]
    spec = LocalSpec(
        python=str(specs["python"]),
        pip_packages=list(specs.get("pip_packages", [])),
        pre_install=list(specs.get("pre_install", [])),
        install=specs.get("install"),
        eval_commands=list(specs.get("eval_commands", [])),
        test_cmd=" ".join([test_cmd, *directives]),
        parser=MAP_REPO_TO_PARSER[instance["repo"]],
        official=True,
        exclude_newer=max(
            environment_date(instance, workspace), PYTHON_RELEASED.get(str(specs["python"]), "")
        ),
    )
    spec.system_packages = spec_system_packages([*spec.pre_install, *spec.eval_commands])
    if is_tox_command(test_cmd):  # run directly (tox_command.py): tox and its plugins are not needed
        dropped = [p for p in spec.pip_packages if re.match(r"^tox([-_.]|$|[=<>!~ ])", p.lower())]
        spec.pip_packages = [p for p in spec.pip_packages if p not in dropped]
        spec.notes.append(f"not installed: {', '.join(dropped)} (the tests run without tox)")
    packages = specs.get("packages", "")
    if packages == "requirements.txt":
        spec.requirements = requirements_from_mirror(instance, workspace)
    elif packages == "environment.yml":
        spec.conda_env = environment_yml_from_mirror(instance, workspace)
        spec.requirements = spec.conda_env.requirements()
        spec.notes.append(
            "environment.yml read for pip: channels skipped, conda names given their PyPI names"
        )
    elif packages:  # conda packages on `conda create`'s command line: with the interpreter
        spec.base_packages = [conda_to_pip(p) for p in shlex.split(packages)]
    spec.notes.append(
        f"packages resolved as of {spec.exclude_newer}: the environment_setup_commit's date, "
        f"or Python {spec.python}'s release if that is later"
    )
    return spec


# First releases: packages older than their interpreter do not know it (swebench's specs run
# requests' 2013 environment on Python 3.9; pip 1.3 and pytest 2.3 do not run there), so an
# environment resolves no earlier than its Python.
PYTHON_RELEASED = {
    "3.5": "2015-09-13T00:00:00Z",
    "3.6": "2016-12-23T00:00:00Z",
    "3.7": "2018-06-27T00:00:00Z",
    "3.8": "2019-10-14T00:00:00Z",
    "3.9": "2020-10-05T00:00:00Z",
    "3.10": "2021-10-04T00:00:00Z",
    "3.11": "2022-10-24T00:00:00Z",
    "3.12": "2023-10-02T00:00:00Z",
    "3.13": "2024-10-07T00:00:00Z",
}


def environment_date(instance: Instance, workspace: Path) -> str:
    """The date the packages resolve at: the commit date of environment_setup_commit, the commit
    swebench builds the (repo, version) environment from (its requirement files, its pins' era), in
    UTC. created_at is not used: it is the pull request's date, and base_commit may be years newer
    (pydata__xarray-2905: created 2019-04, base commit 2021-02, environment 2021-05)."""
    from datetime import datetime, timezone

    commit = instance.get("environment_setup_commit") or instance["base_commit"]
    try:
        stamp = git("show", "-s", "--format=%cI", commit, cwd=workspace).strip()
    except WorkspaceError:
        stamp = str(instance.get("created_at") or "")
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        raise SpecError(f"no date for the environment of {instance['instance_id']} ({commit[:12]})") from None
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def default_spec(instance: Instance, workspace: Path) -> LocalSpec:
    has_project = any((workspace / f).is_file() for f in ("setup.py", "pyproject.toml", "setup.cfg"))
    tests = [f for f in modified_files(instance["test_patch"]) if f.endswith(".py")]
    # Also run every file the judged tests live in (`path.py::name`): a PASS_TO_PASS test outside
    # the test patch's files (SynthFix lists the whole suite) would otherwise count as failed.
    for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        for test_id in instance.get(key) or []:
            path = str(test_id).split("::", 1)[0]
            if (
                "::" in str(test_id)
                and path.endswith(".py")
                and path not in tests
                and (workspace / path).is_file()
            ):
                tests.append(path)
    spec = LocalSpec(
        python=None,
        install="python -m pip install -e ." if has_project else None,
        # The grader's own pytest plugins are not the repository's (and hypothesis alone costs a
        # second per run); a repository that installs itself gets autoloading back.
        env={} if has_project else {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        test_cmd=" ".join(["python -m pytest -rA -p no:cacheprovider", *map(shlex.quote, tests)]),
        parser=_default_parser(),
        inherit_site=True,
        notes=["default spec (repo/version not in swebench's spec map)"],
    )
    if not has_project and tox_testenv_runs_pytest(workspace):
        # A tox-only repository: its tests are what its testenv runs, with its setenv; run directly
        # (tox_command.py), with the summary the parser reads.
        spec.test_cmd = " ".join(["tox --", *map(shlex.quote, tests)])
        spec.env["PYTEST_ADDOPTS"] = "-rA -p no:cacheprovider"
        spec.notes.append("tox-only repository: the tests run as tox.ini's testenv runs them")
    return spec


def tox_testenv_runs_pytest(workspace: Path) -> bool:
    from clover.evals.swebench.tox_command import ToxError, tox_run

    if not (workspace / "tox.ini").is_file():
        return False
    try:
        return "pytest" in tox_run("tox", workspace, environ={}).script()
    except ToxError:
        return False


def _show(workspace: Path, commit: str, path: str) -> str | None:
    try:
        return git("show", f"{commit}:{path}", cwd=workspace)
    except WorkspaceError:
        return None


def requirements_from_mirror(instance: Instance, workspace: Path) -> list[str]:
    """swebench reads these over HTTP from GitHub; we read the same files from the mirror."""
    from swebench.harness.constants import MAP_REPO_TO_REQS_PATHS
    from swebench.harness.test_spec.python import clean_requirements

    commit = instance.get("environment_setup_commit") or instance["base_commit"]
    for req_path in MAP_REPO_TO_REQS_PATHS.get(instance["repo"], []):
        text = _show(workspace, commit, req_path)
        if text is not None:
            break
    else:
        raise SpecError(f"no requirements file of {instance['repo']} at {commit[:12]} in the mirror")
    lines: list[str] = []
    req_dir = os.path.dirname(req_path)
    for line in text.splitlines():
        included = re.match(r"^\s*(?:-r|--requirement)[\s=]*(\S+)", _COMMENT.sub("", line))
        if included:  # one level, as swebench does
            extra = _show(workspace, commit, os.path.normpath(os.path.join(req_dir, included.group(1))))
            lines.extend((extra or "").splitlines())
        else:
            lines.append(line)
    return requirement_lines(clean_requirements("\n".join(lines)))


# Options that are the project itself (installed by the install command) or that pip reads from a
# requirements file only; the others pass through to pip unchanged.
_SELF_INSTALL = re.compile(r"^(-e|--editable)\s*\.(\[[^\]]*\])?/?$|^\.(\[[^\]]*\])?/?$")
_COMMENT = re.compile(r"(^|\s+)#.*$")  # pip's rule: '#' at the start or after whitespace (keeps #egg=)


def requirement_lines(text: str) -> list[str]:
    """The logical lines of a requirements file as pip reads them: continuations joined, comments
    (also inline: `astroid==2.6.5  # Pinned`) removed, the project's own `-e .` / `.[test]`
    dropped. Options (`-e URL`, `--hash`, `--pre`) and environment markers stay: the lines are
    given to `pip install -r`, which understands them, never as command-line arguments."""
    out: list[str] = []
    for line in text.replace("\\\n", "").splitlines():
        line = _COMMENT.sub("", line).strip()
        if not line or line.startswith(("-r ", "--requirement")) or _SELF_INSTALL.match(line):
            continue
        out.append(line)
    return out


def requirement_problems(lines: list[str]) -> list[str]:
    """Lines that are neither an option nor a valid PEP 508 requirement (packaging's parser);
    they would make pip fail, so the grader says which before it runs."""
    from packaging.requirements import InvalidRequirement, Requirement

    problems = []
    for line in lines:
        if line.startswith("-") or "://" in line or line.startswith((".", "/")):
            continue
        spec = re.split(r"\s+--?[a-z]", line, maxsplit=1)[0]  # per-requirement options: --hash=...
        try:
            Requirement(spec)
        except InvalidRequirement as exc:
            problems.append(f"{line!r}: {exc}")
    return problems


def environment_yml_from_mirror(instance: Instance, workspace: Path) -> CondaEnvironment:
    from swebench.harness.constants import MAP_REPO_TO_ENV_YML_PATHS
    from swebench.harness.test_spec.python import clean_environment_yml

    commit = instance.get("environment_setup_commit") or instance["base_commit"]
    for path in MAP_REPO_TO_ENV_YML_PATHS.get(instance["repo"], []):
        text = _show(workspace, commit, path)
        if text is not None:
            break
    else:
        raise SpecError(f"no environment.yml of {instance['repo']} at {commit[:12]} in the mirror")
    try:
        return parse_environment_yml(clean_environment_yml(text))
    except EnvironmentYmlError as exc:
        raise SpecError(f"{path} of {instance['repo']} at {commit[:12]}: {exc}") from None


# --------------------------------------------------------------------------- interpreters and venvs


def python_version_of(exe: str) -> str | None:
    try:
        proc = subprocess.run(
            [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def find_python(version: str | None) -> str:
    """An interpreter of `version` (pyenv installs first, then PATH); None: the current one."""
    if version is None:
        return sys.executable
    home = os.environ.get("PYENV_ROOT") or str(Path.home() / ".pyenv")
    candidates = sorted(glob.glob(f"{home}/versions/{version}.*/bin/python{version}"), reverse=True)
    candidates += sorted(glob.glob(f"{home}/versions/{version}.*/bin/python"), reverse=True)
    candidates += [f"/usr/bin/python{version}", f"/usr/local/bin/python{version}", f"python{version}"]
    for exe in candidates:
        if python_version_of(exe) == version:
            return exe
    raise SpecError(
        f"no Python {version} interpreter found (pyenv install {version}, or put python{version} on PATH)"
    )


def parent_site_dirs() -> list[str]:
    import site
    import sysconfig

    dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()]
    return list(dict.fromkeys(d for d in dirs if os.path.isdir(d)))


def venv_env(venv: Path, home: Path | None = None, tmp: Path | None = None) -> dict[str, str]:
    """The environment of every command in an instance's venv: its bin first on PATH (the grader's
    venv and pyenv's interpreters taken off it: a missing `pytest` is missing, not borrowed), and a
    HOME and TMPDIR of its own when given (tests write ~/.astropy, ~/.config, pytest's numbered tmp
    dirs; nothing lands in the user's, and parallel instances do not share them)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "PYTHONPATH", "VIRTUAL_ENV")}
    own = {str(Path(sys.prefix) / "bin")} if sys.prefix != sys.base_prefix else set()
    if os.environ.get("VIRTUAL_ENV"):
        own.add(str(Path(os.environ["VIRTUAL_ENV"]) / "bin"))
    pyenv = str(Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")) + os.sep
    # Other interpreters' scripts too (pyenv's shims and versions): requests 1.x's pytest 2.4 has
    # no `pytest` script, and the Python 3.11 one found on PATH ran its tests instead.
    path = [
        p
        for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and p not in own and not (p + os.sep).startswith(pyenv)
    ]
    env.update(
        PATH=os.pathsep.join([str(venv / "bin"), *path]),
        VIRTUAL_ENV=str(venv),
        PYTHONNOUSERSITE="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    if home is not None:
        home.mkdir(parents=True, exist_ok=True)
        for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
            env.pop(var, None)
        env["HOME"] = str(home)
    if tmp is not None:
        for var in ("TMP", "TEMP"):
            env.pop(var, None)
        env["TMPDIR"] = str(tmp)
    return env


def make_venv(spec: LocalSpec, venv: Path) -> None:
    """The official specs' venv is bare (uv venv; pip, setuptools and wheel are installed as of the
    environment's date); the default spec's borrows the grader's site-packages (pytest, pip)."""
    python = find_python(spec.python)
    if spec.inherit_site:
        args = [python, "-m", "venv", "--without-pip", str(venv)]
    else:
        from clover.evals.swebench.packages import uv_binary

        args = [uv_binary(), "venv", "--quiet", "--python", python, str(venv)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()
        raise SpecError(f"venv with {python} failed: {last[-1] if last else proc.returncode}")
    if spec.inherit_site:
        site = next((venv / "lib").glob("python*/site-packages"))
        (site / "_clover_grader_parent.pth").write_text("\n".join(parent_site_dirs()) + "\n")
