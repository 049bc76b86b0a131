"""An instance's environment for the local grader, built the way the official image is: the
interpreter with its base packages, the requirements (requirements.txt or environment.yml), the
spec's pip packages, its pre-install commands and the repository's install, then one commit so a
reset returns here. Official specs install with uv, held to the environment's date (packages.py);
the default spec (repositories swebench does not know) borrows the grader's pip and pytest.

Everything runs through one Shell: the venv first on PATH, a HOME of the instance's own, and every
command with its output appended to the instance's log."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from pathlib import Path

from clover.evals.swebench.judge import InstallError, pip_error
from clover.evals.swebench.local_spec import (
    SYSTEM_COMMAND,
    LocalSpec,
    SpecError,
    make_venv,
    requirement_problems,
    venv_env,
)
from clover.evals.swebench.packages import (
    HARNESS_DATE,
    RUNNER,
    Installer,
    UvMissing,
    build_failures,
    needs_legacy_editable,
    normalize,
    not_found,
    pinned_names,
    pip_install_args,
    uv_binary,
)
from clover.evals.swebench.system_packages import missing_system_packages
from clover.evals.swebench.tox_command import is_tox_command
from clover.evals.swebench.workspace import git


def uv_cache_dir() -> Path:
    """Shared by every instance and run (uv hard-links from it: a venv costs seconds, not minutes)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "clover" / "swebench" / "uv"


class Shell:
    """Runs commands in the work tree with the venv first on PATH, appending to one log."""

    def __init__(
        self,
        cwd: Path,
        venv: Path,
        log: Path,
        extra_env: dict[str, str] | None = None,
        home: Path | None = None,
        tmp: Path | None = None,
    ) -> None:
        self.cwd, self.venv, self.log = cwd, venv, log
        self.installer: Installer | None = None  # the setup's, reused when a patch is installed
        self.env = {**venv_env(venv, home, tmp), "UV_CACHE_DIR": str(uv_cache_dir()), **(extra_env or {})}

    def note(self, text: str) -> None:
        with self.log.open("a", encoding="utf-8") as fh:
            fh.write("".join(f"# {line}\n" for line in text.splitlines()))

    def run(
        self,
        command: str | list[str],
        timeout: float,
        stdin: str | None = None,
        env: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        shown = command if isinstance(command, str) else shlex.join(command)
        args = ["bash", "-c", command] if isinstance(command, str) else command
        # Own process group, so a timeout kills the test run's children too, not only bash.
        try:
            proc = subprocess.Popen(
                args,
                cwd=self.cwd,
                env={**self.env, **(env or {})},
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                start_new_session=True,
            )
        except OSError as exc:  # e.g. no `patch` program
            out, rc = f"{exc}\n", 127
        else:
            try:
                out, _ = proc.communicate(stdin, timeout=timeout)
                rc = proc.returncode
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
                out, rc = (out or "") + f"\n[timed out after {timeout:.0f} s]", 124
        with self.log.open("a", encoding="utf-8") as fh:
            fh.write(f"+ {shown}\n{out}{'' if out.endswith(chr(10)) or not out else chr(10)}[exit {rc}]\n")
        return rc, out


def setup_environment(
    spec: LocalSpec, ws: Path, venv: Path, log: Path, timeout: float, tmp: Path | None = None
) -> Shell:
    """Build the instance's environment; raises InstallError (with the installer's whole message)
    or SpecError. `tmp` is the instance's TMPDIR (the caller removes it)."""
    make_venv(spec, venv)
    sh = Shell(ws, venv, log, spec.env, home=venv.parent / "home", tmp=tmp)
    for note in spec.notes:
        sh.note(note)
    if tmp is not None and ws.resolve().parts[:2] == tmp.resolve().parts[:2]:
        # docutils' relative_path() turns a path that shares its first directory with the work tree
        # into a relative one (sphinx-11510's docnames); the official image keeps /testbed and /tmp apart.
        sh.note(
            f"warning: the work tree and TMPDIR share {Path(*ws.resolve().parts[:2])}; "
            "docutils will see relative paths the official image does not"
        )
    check_system_packages(spec, sh)
    if spec.inherit_site:
        _pip_steps(spec, sh, venv.parent / "requirements.txt", timeout)
    else:
        try:
            _uv_steps(spec, sh, venv.parent / "requirements.txt", timeout)
        except UvMissing as exc:
            raise SpecError(str(exc)) from None
    # Like the official image: commit what setup changed so resets return to this state.
    git("add", "-A", cwd=ws)
    git("commit", "--quiet", "--allow-empty", "--no-verify", "-m", "grader setup", cwd=ws)
    return sh


def check_system_packages(spec: LocalSpec, sh: Shell) -> None:
    """The spec's apt-get packages are not installed by the grader (system_packages.py says why):
    the missing ones are logged, and named when a judged test needs one."""
    if not spec.system_packages:
        return
    missing, unknown = missing_system_packages(spec.system_packages)
    spec.missing_system_packages = missing
    present = [p for p in spec.system_packages if p not in missing and p not in unknown]
    sh.note(
        f"system packages the official image installs: {', '.join(spec.system_packages)}; "
        f"here: {', '.join(present) or 'none'}"
        + (f"; missing: {', '.join(missing)} (apt-get install {' '.join(missing)})" if missing else "")
        + (f"; not checked (no dpkg): {', '.join(unknown)}" if unknown else "")
    )


def _uv_steps(spec: LocalSpec, sh: Shell, requirements_file: Path, timeout: float) -> None:
    # The spec's exact pins resolve as of the official images' date (what they need too, if hidden).
    pins = pinned_names([*spec.base_packages, *spec.requirements, *spec.pip_packages])
    inst = sh.installer = Installer(
        sh.venv, spec.exclude_newer, let_through=dict.fromkeys(pins, HARNESS_DATE)
    )
    run = lambda argv: sh.run(argv, timeout)  # noqa: E731
    base = ["pip", "setuptools", "wheel", *spec.base_packages]
    rc, out = inst.install(base, run, why="the interpreter's base packages")
    _raise_if_failed(rc, out, "base packages")
    if RUNNER in spec.test_cmd or is_tox_command(spec.test_cmd):
        rc, out = inst.install([RUNNER], run, as_of=HARNESS_DATE, why="the test runner")
        _raise_if_failed(rc, out, "test runner")
    if spec.requirements:
        install_requirements(spec, sh, inst, requirements_file, run)
    if spec.pip_packages:
        rc, out = inst.install(list(spec.pip_packages), run, why="the spec's pip packages")
        _raise_if_failed(rc, out, "pip packages")
    if spec.conda_env is not None:  # with the spec's pins in place (numpy 1.23, not 2.0)
        drop_unimportable(spec, sh, [_req_name(line) for line in spec.conda_env.requirements()])
    for cmd in spec.pre_install:
        if SYSTEM_COMMAND.search(cmd):
            sh.note(f"skipped (changes the machine): {cmd}")
        elif (args := pip_install_args(cmd)) is not None:
            inst.install(args, run, why=cmd)
        else:
            sh.run(cmd, timeout)
    if spec.install:
        install_repository(spec.install, sh, inst, timeout)
    for note in inst.notes:
        sh.note(f"let through: {note}")


def install_repository(
    command: str, sh: Shell, inst: Installer | None, timeout: float, *, again: bool = False
) -> None:
    """The spec's install command (`python -m pip install -e .[test]`): through uv, held to the
    date, built by a setuptools that can make editables (packages.EDITABLE_BUILD_CONSTRAINTS);
    where none can (Python 3.6), pip's legacy develop install, as the official image. `again`:
    after a patch, rebuild the project itself (uv would reuse its cached build)."""
    args = pip_install_args(command)
    if inst is None or args is None:
        rc, out = sh.run(command, timeout)
        if rc != 0 and args is not None:  # setup.py that imports its own package
            rc, out = sh.run(command + " --no-build-isolation", timeout)
    else:
        extra = ["--reinstall-package", inst.project] if again and inst.project else []
        if "-e" in args or "--editable" in args:
            # The era's `pip install -e .` ran `setup.py develop`: the work tree itself on sys.path.
            # setuptools' compat mode does the same; its default finder does not (pylint finds its
            # checkers by path on sys.path, and every Run() test failed).
            extra += ["--config-settings", "editable_mode=compat"]
        rc, out = inst.install(
            [*extra, *args], lambda argv: sh.run(argv, timeout), build_tools_now=True, why=command
        )
        if rc != 0:
            why = "no PEP 660 backend here" if needs_legacy_editable(out) else _last_error(out)
            sh.note(f"uv could not install the repository ({why}): pip's own install, as the official image")
            rc, out = sh.run(["python", "-m", "pip", "install", *args], timeout)
        inst.project = inst.project or project_name(out, sh.cwd)
    if rc != 0:
        raise InstallError(f"install failed ({command}): {_last_error(out)}", pip_error(out))


def needs_reinstall(patch: str) -> bool:
    """Whether a patch can change what the install built: anything but Python modules (an
    editable install sees those as they are), or the packaging files themselves."""
    from clover.evals.grading import touched_files

    packaging = {"setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in"}
    return any(not f.endswith(".py") or Path(f).name in packaging for f in touched_files(patch))


def project_name(output: str, root: Path) -> str | None:
    """The distribution uv installed from the work tree (`+ astropy==5.1.dev (from file:///...)`)."""
    import re

    m = re.search(
        rf"^\s*[+~]\s*([A-Za-z0-9_.\-]+)==\S+ \(from file://{re.escape(str(root))}/?\)", output, re.MULTILINE
    )
    return m.group(1) if m else None


def install_requirements(spec: LocalSpec, sh: Shell, inst: Installer, requirements_file: Path, run) -> None:
    """requirements.txt lines as one `-r` install. From an environment.yml, a package pip cannot
    have (not on PyPI: conda-only; or failing to build here) is dropped and named, and the rest
    installed; the report names what is missing when a test needs it."""
    lines = list(spec.requirements)
    for problem in requirement_problems(lines):
        sh.note(f"the installer will reject the requirement {problem.splitlines()[0]}")
    conda = spec.conda_env
    # conda resolved an environment.yml when the official image was built, from binaries for
    # every Python; held to the environment's date, pip finds only sdists for a newer Python
    # (xarray 0.12's 2021 environment on Python 3.10: numpy 1.17, bottleneck 1.3.2 to compile).
    as_of = HARNESS_DATE if conda is not None else None
    if as_of:
        sh.note(f"environment.yml's packages resolve as of {as_of[:10]}, when the official image's conda did")
    while True:
        requirements_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
        sh.note(f"{requirements_file.name}:\n" + "\n".join(f"  {r}" for r in lines))
        rc, out = inst.install(["-r", str(requirements_file)], run, as_of=as_of, why="the requirements")
        if rc == 0 or conda is None:
            _raise_if_failed(rc, out, "dependency install")
            return
        missing = {normalize(n): "not on PyPI (conda-only)" for n in not_found(out)}
        missing.update(
            {normalize(n): "does not build here" for n in build_failures(out) if normalize(n) not in missing}
        )
        dropped = [line for line in lines if _req_name(line) in missing]
        if not dropped:
            _raise_if_failed(rc, out, "dependency install")
        for line in dropped:
            why = missing[_req_name(line)]
            origin = conda.conda.get(line, line)
            spec.missing_packages[_req_name(line)] = f"{origin}: {why}"
            sh.note(f"environment.yml's {origin!r} left out: {why}")
        lines = [line for line in lines if line not in dropped]


_IMPORT_CHECK = """
import importlib, importlib.metadata as md, json, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
modules = {}
for mod, dists in md.packages_distributions().items():
    for dist in dists:
        modules.setdefault(norm(dist), []).append(mod)
bad = {}
for name in json.loads(sys.argv[1]):
    for mod in sorted(m for m in modules.get(name, []) if not m.startswith("_")):
        try:
            importlib.import_module(mod)
        except ImportError:
            pass  # a test's importorskip handles that
        except Exception as exc:
            bad[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            break
print(json.dumps(bad))
"""


def drop_unimportable(spec: LocalSpec, sh: Shell, names: list[str]) -> None:
    """conda ships C libraries with its packages, pip's wheels not always: a package that installs
    but raises on import (cfgrib: `Cannot find the ecCodes library`) stops test collection, where
    conda's would import and a missing one would be skipped. Such packages are uninstalled and
    named, like conda-only ones."""
    import json

    rc, out = sh.run(["python", "-c", _IMPORT_CHECK, json.dumps(names)], 600)
    try:
        bad = json.loads(out.strip().splitlines()[-1]) if rc == 0 else {}
    except (ValueError, IndexError):
        bad = {}
    for name, error in bad.items():
        sh.run([uv_binary(), "pip", "uninstall", "--python", str(sh.venv / "bin" / "python"), name], 300)
        conda = spec.conda_env.conda if spec.conda_env else {}
        origin = next((spec for line, spec in conda.items() if _req_name(line) == name), name)
        spec.missing_packages[name] = f"{origin}: installs but does not import here ({error})"
        sh.note(f"environment.yml's {origin!r} left out: installs but does not import here ({error})")


def _req_name(line: str) -> str:
    import re

    return normalize(re.split(r"[\s\[=<>!~;]", line.strip(), maxsplit=1)[0])


def _raise_if_failed(rc: int, out: str, what: str) -> None:
    if rc != 0:
        raise InstallError(f"{what} failed: {_last_error(out)}", pip_error(out))


def _pip_steps(spec: LocalSpec, sh: Shell, requirements_file: Path, timeout: float) -> None:
    """The default spec: the grader's pip (borrowed through the venv's .pth), not held to a date."""
    pip = "python -m pip install"
    steps: list[str] = []
    if spec.requirements:
        requirements_file.write_text("\n".join(spec.requirements) + "\n", encoding="utf-8")
        sh.note(f"{requirements_file.name}:\n" + "\n".join(f"  {r}" for r in spec.requirements))
        for problem in requirement_problems(spec.requirements):
            sh.note(f"pip will reject the requirement {problem.splitlines()[0]}")
        steps.append(f"{pip} -r {shlex.quote(str(requirements_file))}")
    if spec.pip_packages:
        steps.append(f"{pip} " + " ".join(shlex.quote(p) for p in spec.pip_packages))
    for step in steps:
        rc, out = sh.run(step, timeout)
        if rc != 0:
            raise InstallError(f"dependency install failed ({step}): {_last_error(out)}", pip_error(out))
    for cmd in spec.pre_install:
        if SYSTEM_COMMAND.search(cmd):
            sh.note(f"skipped (changes the machine): {cmd}")
        else:
            sh.run(cmd, timeout)
    if spec.install:
        install_repository(spec.install, sh, None, timeout)


def _last_error(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("ERROR:", "error:", "× ", "╰─▶"))]
    causes = [ln for ln in lines if ln.startswith("cause:") or ln.startswith("Because ")]
    return (causes or errors or lines or ["(no output)"])[-1]
