"""A conda `environment.yml` read for pip: what pip can install, and what only conda has.

`channels:` are where conda looks, not packages. `dependencies:` holds conda specs (`numpy=1.19`,
`python>=3.8`) and may hold a `pip:` list that is pip's already. A conda name is given to pip under
its PyPI name where the two differ (`dask-core` is `dask`); whether a name exists on PyPI at all is
the registry's answer at install time (packages.not_found), never a guess here. What stays
conda-only is named in the report as the reason a test that needs it cannot run here."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# conda-forge names whose PyPI distribution is called otherwise (the package is the same).
CONDA_TO_PYPI = {
    "dask-core": "dask",
    "matplotlib-base": "matplotlib",
    "pytables": "tables",
    "pytorch": "torch",
    "iris": "scitools-iris",
    "msgpack-python": "msgpack",
    "pyqt": "PyQt5",
    "python-graphviz": "graphviz",
    "typing_extensions": "typing-extensions",
}
# The interpreter and the installer: the venv has its own.
_SKIP = {"python", "pip"}


class EnvironmentYmlError(ValueError):
    pass


@dataclass
class CondaEnvironment:
    channels: list[str] = field(default_factory=list)
    conda: dict[str, str] = field(default_factory=dict)  # pip requirement -> the conda spec it came from
    pip: list[str] = field(default_factory=list)  # the `pip:` section, as written

    def requirements(self) -> list[str]:
        return [*self.conda, *self.pip]


def parse_environment_yml(text: str) -> CondaEnvironment:
    import yaml

    try:
        doc: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise EnvironmentYmlError(f"environment.yml is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise EnvironmentYmlError("environment.yml is not a mapping")
    env = CondaEnvironment(channels=[str(c) for c in doc.get("channels") or []])
    for dep in doc.get("dependencies") or []:
        if isinstance(dep, dict):
            for pkg in dep.get("pip") or []:
                env.pip.append(str(pkg).strip())
            continue
        spec = str(dep).strip()
        name = re.split(r"[\s=<>!~\[]", spec, maxsplit=1)[0]
        if "::" in name:  # channel::package
            name = name.split("::", 1)[1]
            spec = spec.split("::", 1)[1]
        if not name or name.lower() in _SKIP:
            continue
        env.conda[conda_to_pip(spec, CONDA_TO_PYPI.get(name.lower(), name))] = str(dep).strip()
    return env


def conda_to_pip(spec: str, pypi_name: str | None = None) -> str:
    """A conda match spec as a pip requirement: `numpy=1.19` (conda: 1.19.*) -> `numpy==1.19.*`,
    `numpy 1.19.2` -> `numpy==1.19.2`, build strings dropped; pip-style specs pass through."""
    spec = spec.strip()
    name = re.split(r"[\s=<>!~\[]", spec, maxsplit=1)[0]
    rest = spec[len(name) :].strip()
    name = pypi_name or name
    if not rest:
        return name
    if re.fullmatch(r"=[^=<>!~\s]+(\s+\S+)?", rest):  # `=1.19` or `=1.19 build`
        version = rest[1:].split()[0]
        return f"{name}=={version}" if "*" in version or version.count(".") >= 2 else f"{name}=={version}.*"
    if re.fullmatch(r"[0-9][^\s]*(\s+\S+)?", rest):  # `1.19.2` or `1.19.2 py39_0`
        return f"{name}=={rest.split()[0]}"
    return name + rest
