"""The local grader's environment matches the official image's where verdicts depend on it: tags
reachable from base_commit (setuptools_scm versions), a tox-only repository's test command run
directly with its setenv, an environment.yml read as conda means it (channels, a pip section,
conda-only packages named), HOME and TMPDIR of the instance's own. Fixture repositories are real
git repositories in a temp dir; installs are real uv runs against a local wheelhouse, offline."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("swebench")

from clover.evals.swebench.calibration import by_repository, render_table, why_not_judgeable  # noqa: E402
from clover.evals.swebench.conda_env import parse_environment_yml  # noqa: E402
from clover.evals.swebench.dataset import validate  # noqa: E402
from clover.evals.swebench.grade_local import GradeConfig, evaluate_log, offline_script  # noqa: E402
from clover.evals.swebench.local_batch import grade_batch  # noqa: E402
from clover.evals.swebench.local_setup import Shell, drop_unimportable, install_requirements  # noqa: E402
from clover.evals.swebench.local_spec import LocalSpec, default_spec, make_venv, resolve_spec, venv_env  # noqa: E402
from clover.evals.swebench.packages import EDITABLE_BUILD_CONSTRAINTS, HARNESS_DATE, Installer, uv_binary  # noqa: E402
from clover.evals.swebench.tox_command import tox_run  # noqa: E402
from clover.evals.swebench.workspace import RepoCache, make_workspace  # noqa: E402
from tests.swebench_fixtures import NEW_TEST, OLD_TEST, SOURCE, _diff_after, _git  # noqa: E402


def _commit(repo: Path, files: dict[str, str], message: str, tag: str | None = None) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    if tag:
        _git(repo, "tag", tag)
    return _git(repo, "rev-parse", "HEAD").strip()


def _instance(repo: Path, base: str, name: str) -> dict:
    """The calc fixture's row at `base` (the repository's tree must be at base)."""
    return validate(
        {
            "repo": str(repo),
            "instance_id": name,
            "base_commit": base,
            "patch": _diff_after(repo, "calc/core.py", SOURCE.format(op="+")),
            "test_patch": _diff_after(repo, "tests/test_core.py", NEW_TEST),
            "problem_statement": "combine() subtracts.",
            "hints_text": "",
            "created_at": "2024-01-01T00:00:00Z",
            "version": "0.1",
            "FAIL_TO_PASS": json.dumps(["tests/test_core.py::test_combine_adds"]),
            "PASS_TO_PASS": json.dumps(["tests/test_core.py::test_double"]),
            "environment_setup_commit": base,
        },
        "fixture",
    )


# --------------------------------------------------------------------------- setuptools_scm


SCM_INIT = """from pathlib import Path

from setuptools_scm import get_version

__version__ = get_version(root=str(Path(__file__).resolve().parents[1]))
"""
# pytest's own `minversion` check, in miniature: the suite refuses a checkout that calls itself 0.x.
MINVERSION_CONFTEST = """from pathlib import Path

import pytest
from packaging.version import Version

import calc


def pytest_configure(config):
    (Path.home() / ".calc-was-here").write_text(calc.__version__)
    if Version(calc.__version__) < Version("1.0"):
        raise pytest.UsageError(f"'minversion' requires calc-1.0, actual calc-{calc.__version__}")
"""


def _scm_repo(root: Path) -> tuple[Path, str]:
    """calc at 1.0 (tag v1.0), the base commit after it, then the fix released as v1.1 and a tag
    on a side branch: only v1.0 is in the base commit's past."""
    pytest.importorskip("setuptools_scm")
    repo = root / "scm"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _commit(
        repo,
        {
            "calc/__init__.py": SCM_INIT,
            "calc/core.py": SOURCE.format(op="-"),
            "tests/test_core.py": OLD_TEST,
            "conftest.py": MINVERSION_CONFTEST,
        },
        "calc 1.0",
        tag="v1.0",
    )
    base = _commit(repo, {"README": "calc\n"}, "docs")
    _git(repo, "checkout", "-q", "-b", "side")
    _commit(repo, {"SIDE": "x\n"}, "side work", tag="v7.0")
    _git(repo, "checkout", "-q", "main")
    _commit(repo, {"calc/core.py": SOURCE.format(op="+")}, "fix", tag="v1.1")
    _git(repo, "checkout", "-q", base)
    return repo, base


def test_workspace_keeps_only_the_tags_in_the_base_commits_past(tmp_path):
    from setuptools_scm import get_version

    repo, base = _scm_repo(tmp_path)
    ws = make_workspace(_instance(repo, base, "fixture__scm-1"), tmp_path / "ws", RepoCache(online=False))
    tags = subprocess.run(["git", "tag"], cwd=ws, capture_output=True, text=True, check=True).stdout.split()
    assert tags == ["v1.0"]  # v1.1 (the fix's release) and v7.0 (another branch) are gone
    branches = subprocess.run(["git", "branch", "-a"], cwd=ws, capture_output=True, text=True).stdout
    assert "main" not in branches and "side" not in branches
    assert get_version(root=str(ws)).startswith(
        "1.1.dev1+g"
    )  # the next release, 1 commit on; without tags 0.1.devN


def test_setuptools_scm_repository_is_judged_and_home_is_the_instances_own(tmp_path, monkeypatch):
    # Without its tags the checkout is calc 0.1.devN, the minversion check stops pytest before any
    # test, and gold and empty both "fail": no verdict at all (pytest's 19 rows).
    repo, base = _scm_repo(tmp_path)
    inst = _instance(repo, base, "fixture__scm-1")
    user_home = tmp_path / "user-home"
    user_home.mkdir()
    monkeypatch.setenv("HOME", str(user_home))
    out = tmp_path / "grade"
    report = grade_batch(
        [inst],
        None,
        GradeConfig(output_dir=out, online=False, work_dir=str(tmp_path / "work")),
        progress=False,
    )
    assert report["calibration"]["fixture__scm-1"]["judgeable"] is True, report["calibration"]
    assert not (user_home / ".calc-was-here").exists()  # the tests' HOME was the instance's


# --------------------------------------------------------------------------- tox


TOX_INI = """[tox]
envlist = py311, lint

[testenv]
deps = pytest
setenv =
    CALC_MODE = strict
    PYTEST_ADDOPTS = {env:PYTEST_ADDOPTS:} --tb=short
commands =
    python -m pytest {posargs:tests}
    lint: flake8 calc

[testenv:lint]
commands = flake8 {posargs}
"""
STRICT_TEST = (
    OLD_TEST
    + """

def test_runs_in_the_testenv():
    import os

    assert os.environ["CALC_MODE"] == "strict"
"""
)


def test_tox_only_repository_runs_its_testenv_directly(tmp_path):
    # Run as `pytest` the suite misses the testenv's setenv and a passing test fails: the gold
    # patch "did not resolve". Through `tox` the venv's python is resolved past the venv. Run
    # directly, the testenv's command and environment are the repository's own.
    repo = tmp_path / "toxonly"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    base = _commit(
        repo,
        {
            "calc/__init__.py": "",
            "calc/core.py": SOURCE.format(op="-"),
            "tests/test_core.py": STRICT_TEST,
            "tox.ini": TOX_INI,
        },
        "calc, tested by tox",
    )
    inst = _instance(repo, base, "fixture__tox-1")
    inst["test_patch"] = _diff_after(
        repo,
        "tests/test_core.py",
        STRICT_TEST.replace("import double", "import combine, double")
        + "\n\ndef test_combine_adds():\n    assert combine(2, 3) == 5\n",
    )
    inst["PASS_TO_PASS"] = ["tests/test_core.py::test_double", "tests/test_core.py::test_runs_in_the_testenv"]
    out = tmp_path / "grade"
    report = grade_batch(
        [inst],
        None,
        GradeConfig(output_dir=out, online=False, work_dir=str(tmp_path / "work")),
        progress=False,
    )
    assert report["calibration"]["fixture__tox-1"]["judgeable"] is True, report["calibration"]
    log = (out / "fixture__tox-1" / "test_output.gold.txt").read_text()
    assert "runs tox.ini's py311 testenv" in log
    assert "\n+ python -m pytest tests/test_core.py 2>&1\n" in log  # the testenv's command, not tox


SPHINX_TOX = """[testenv]
usedevelop = True
deps =
    du16: docutils==0.16.*
extras =
    test
setenv =
    PYTHONWARNINGS = all,ignore::DeprecationWarning:distutils
    PYTEST_ADDOPTS = {env:PYTEST_ADDOPTS:} --color yes
commands=
    python -X dev -m pytest --durations 25 {posargs}

[testenv:du-latest]
commands =
    python -m pip install "git+https://repo.or.cz/docutils.git#subdirectory=docutils"
    {[testenv]commands}
"""


def test_sphinx_tox_command_after_the_specs_edit(tmp_path):
    (tmp_path / "tox.ini").write_text(
        SPHINX_TOX.replace("pytest", "pytest -rA")
    )  # the spec's pre_install sed
    run = tox_run(
        "tox --current-env -epy39 -v --", tmp_path, ["tests/test_ext_autodoc.py"], {"PYTEST_ADDOPTS": "-x"}
    )
    assert run.script() == "python -X dev -m pytest -rA --durations 25 tests/test_ext_autodoc.py"
    assert run.setenv == {
        "PYTHONWARNINGS": "all,ignore::DeprecationWarning:distutils",
        "PYTEST_ADDOPTS": "-x --color yes",
    }
    latest = tox_run("tox -e du-latest", tmp_path, [], {})
    assert latest.commands[0].startswith("python -m pip install") and latest.commands[1].startswith(
        "python -X dev"
    )


def test_sphinx_spec_runs_without_tox(tmp_path):
    row = {
        "repo": "sphinx-doc/sphinx",
        "instance_id": "sphinx-doc__sphinx-1",
        "version": "7.1",
        "base_commit": "0" * 40,
        "environment_setup_commit": "0" * 40,
        "created_at": "2023-05-28T19:15:07Z",
        "test_patch": "diff --git a/tests/test_x.py b/tests/test_x.py\n",
        "FAIL_TO_PASS": "[]",
        "PASS_TO_PASS": "[]",
    }
    spec = resolve_spec(row, tmp_path)  # no mirror: the date falls back to created_at
    assert spec.test_cmd == "tox --current-env -epy39 -v -- tests/test_x.py"
    assert not any(p.startswith("tox") for p in spec.pip_packages) and "Jinja2==3.0.3" in spec.pip_packages
    assert spec.exclude_newer == "2023-05-28T19:15:07Z"


# --------------------------------------------------------------------------- environment.yml


ENV_YML = """name: calc-tests
channels:
  - conda-forge
  - nodefaults
dependencies:
  - python=3.10
  - pip
  - tinydep=1.0
  - cdms2          # conda-forge only
  - dask-core
  - brokendep      # its C library is conda's
  - pip:
    - tinyextra>=2
"""


def test_environment_yml_channels_are_not_packages():
    env = parse_environment_yml(ENV_YML)
    assert env.channels == ["conda-forge", "nodefaults"]
    assert env.requirements() == ["tinydep==1.0.*", "cdms2", "dask", "brokendep", "tinyextra>=2"]
    assert env.conda["dask"] == "dask-core" and env.conda["tinydep==1.0.*"] == "tinydep=1.0"


def _wheel(where: Path, name: str, version: str, code: str = "") -> None:
    """A real (tiny, pure-Python) wheel, so uv installs offline from a local directory."""
    dist = f"{name}-{version}"
    files = {
        f"{name}/__init__.py": code or f"VERSION = {version!r}\n",
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist}.dist-info/RECORD,,")
    with zipfile.ZipFile(where / f"{dist}-py3-none-any.whl", "w") as whl:
        for path, text in {**files, f"{dist}.dist-info/RECORD": "\n".join(record) + "\n"}.items():
            whl.writestr(path, text)


def test_environment_yml_installs_what_pip_can_and_names_conda_only_packages(tmp_path):
    uv_binary()
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name, version in (("tinydep", "1.0.3"), ("tinyextra", "2.1"), ("dask", "2024.1.0")):
        _wheel(wheels, name, version)
    _wheel(wheels, "brokendep", "1.0", 'raise RuntimeError("Cannot find the ecCodes library")\n')
    env = parse_environment_yml(ENV_YML)
    spec = LocalSpec(python=None, requirements=env.requirements(), conda_env=env)
    venv = tmp_path / "venv"
    make_venv(spec, venv)
    log = tmp_path / "setup.log"
    sh = Shell(tmp_path, venv, log)
    inst = Installer(venv, None, index_args=["--offline", "--no-index", "--find-links", str(wheels)])
    install_requirements(spec, sh, inst, tmp_path / "requirements.txt", lambda argv: sh.run(argv, 300))
    drop_unimportable(spec, sh, ["tinydep", "tinyextra", "dask", "brokendep"])
    assert spec.missing_packages == {
        "cdms2": "cdms2: not on PyPI (conda-only)",
        "brokendep": "brokendep: installs but does not import here (RuntimeError: Cannot find the ecCodes library)",
    }
    listed = subprocess.run(
        [uv_binary(), "pip", "list", "--python", str(venv / "bin" / "python")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "tinydep" in listed and "tinyextra" in listed and "dask" in listed
    assert "cdms2" not in listed and "brokendep" not in listed  # it would stop test collection
    assert "environment.yml's 'cdms2' left out: not on PyPI (conda-only)" in log.read_text()

    # A judged test that skips for want of cdms2 is not the patch's failure: the report says why.
    row = {
        "instance_id": "x",
        "repo": "local/x",
        "test_patch": "",
        "FAIL_TO_PASS": ["t.py::uses_cdms2"],
        "PASS_TO_PASS": ["t.py::plain"],
    }
    spec2 = default_spec(row, Path("/nonexistent"))
    spec2.missing_packages = spec.missing_packages
    test_log = (
        ">>>>> Start Test Output\nPASSED t.py::plain\n"
        "SKIPPED [1] t.py:3: could not import 'cdms2': No module named 'cdms2'\n>>>>> End Test Output\n"
    )
    report = evaluate_log(test_log, row, spec2, "p")
    assert report["cannot_judge_kind"] == "package"
    assert report["cannot_judge"].startswith("cannot judge here: t.py::uses_cdms2: needs the package cdms2")
    assert "conda-only" in report["cannot_judge"]


def test_installer_holds_the_date_and_lets_the_specs_pins_through(tmp_path):
    inst = Installer(tmp_path, "2020-08-07T16:15:20Z", let_through={"jinja2": HARNESS_DATE})
    argv = inst.argv(["-e", ".[test]"], build_tools_now=True)
    assert argv[argv.index("--exclude-newer") + 1] == "2020-08-07T16:15:20Z"
    assert f"jinja2={HARNESS_DATE}" in argv and f"setuptools={HARNESS_DATE}" in argv
    constraints = Path(argv[argv.index("--build-constraints") + 1])
    assert constraints.read_text() == EDITABLE_BUILD_CONSTRAINTS and argv[-2:] == ["-e", ".[test]"]
    # uv names what the date hides; it is let through to the official images' date, then further.
    hidden = "hint: `markupsafe` was filtered by `exclude-newer` to only include packages uploaded before ..."
    calls = []

    def run(argv):
        calls.append(argv)
        return (1, hidden) if len(calls) <= 2 else (0, "Installed 2 packages")

    assert inst.install(["Jinja2==3.0.3"], run, why="the spec's pip packages") == (0, "Installed 2 packages")
    assert not any(a.startswith("markupsafe=") for a in calls[0])
    assert f"markupsafe={HARNESS_DATE}" in calls[1] and "markupsafe=2100-01-01T00:00:00Z" in calls[2]
    assert inst.notes == [
        "markupsafe: as of 2024-08-13, needed by the spec's pip packages",
        "markupsafe: as of 2100-01-01, needed by the spec's pip packages",
    ]
    assert Installer(tmp_path, "2025-01-01T00:00:00Z", {"pytest": HARNESS_DATE}).argv([])[-2:] == [
        "--exclude-newer",
        "2025-01-01T00:00:00Z",
    ]  # a cutoff earlier than the date is no exception


# --------------------------------------------------------------------------- calibration


def test_calibration_names_a_cause_or_counts_a_wrong_verdict():
    ok = {"resolved": True, "patch_successfully_applied": True, "tests_run": 3}
    no = {"resolved": False, "patch_successfully_applied": True, "tests_run": 3}
    install = {
        "resolved": False,
        "error": "InstallError: dependency install failed: x",
        "error_kind": "install",
    }
    nothing_ran = {**no, "tests_run": 0}
    log = (
        ">>>>> Start Test Output\n+ pytest -rA\n"
        "ERROR: 'minversion' requires pytest-2.0, actual pytest-0.1.dev14530\n>>>>> End Test Output\n"
    )
    assert why_not_judgeable(ok, no) == ("", "")
    assert why_not_judgeable(install, install)[0] == "install"
    assert why_not_judgeable(nothing_ran, no, log) == (
        "no-tests",
        (
            "none of the judged tests ran under the gold patch: ERROR: 'minversion' requires pytest-2.0, "
            "actual pytest-0.1.dev14530"
        ),
    )
    assert why_not_judgeable(no, no)[0] == "gold-fails" and why_not_judgeable(ok, ok)[0] == "empty-resolves"
    calib = {
        "psf__requests-1": {"judgeable": True, "why_kind": ""},
        "psf__requests-2": {"judgeable": False, "why_kind": "network"},
        "pytest-dev__pytest-3": {"judgeable": False, "why_kind": "gold-fails"},
    }
    table = by_repository(calib)
    assert table == {
        "psf/requests": {"rows": 2, "correct": 1, "cannot_judge": {"network": 1}, "wrong": 0},
        "pytest-dev/pytest": {"rows": 1, "correct": 0, "cannot_judge": {}, "wrong": 1},
    }
    text = render_table(table)
    assert "| psf/requests | 2 | 1 | 1 network | 0 |" in text and "| all | 3 | 1 (33%) | 1 | 1 |" in text


def test_an_environment_resolves_no_earlier_than_its_python(tmp_path):
    # requests 1.1's environment is from 2013, its spec's Python 3.9 from 2020: pip 1.3 and pytest
    # 2.3 do not run there, so the packages resolve as of Python 3.9's release.
    row = {
        "repo": "psf/requests",
        "instance_id": "psf__requests-1",
        "version": "1.1",
        "base_commit": "0" * 40,
        "created_at": "2013-01-23T16:38:17Z",
        "test_patch": "diff --git a/test_requests.py b/test_requests.py\n",
        "FAIL_TO_PASS": "[]",
        "PASS_TO_PASS": "[]",
    }
    assert resolve_spec(row, tmp_path).exclude_newer == "2020-10-05T00:00:00Z"


def test_the_venvs_path_borrows_no_other_interpreters_scripts(tmp_path, monkeypatch):
    pyenv = tmp_path / "pyenv"
    monkeypatch.setenv("PYENV_ROOT", str(pyenv))
    monkeypatch.setenv("PATH", f"{pyenv}/shims:{pyenv}/versions/3.11.7/bin:/usr/bin:/bin")
    env = venv_env(tmp_path / "venv", tmp_path / "home", tmp_path / "tmp")
    assert env["PATH"] == f"{tmp_path / 'venv'}/bin:/usr/bin:/bin"
    assert env["HOME"] == str(tmp_path / "home") and env["TMPDIR"] == str(tmp_path / "tmp")


PROBE = """import socket, threading
server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen()
threading.Thread(target=lambda: server.accept(), daemon=True).start()
socket.create_connection(server.getsockname(), timeout=5).close()
print("loopback ok")
try:
    socket.create_connection(("10.255.255.1", 80), timeout=5)
    print("outside reached")
except OSError as exc:
    print("outside:", type(exc).__name__, exc.errno)
"""


@pytest.mark.skipif(not (shutil.which("unshare") and shutil.which("ip")), reason="needs unshare and ip")
def test_no_test_network_leaves_loopback_only(tmp_path):
    sh = Shell(tmp_path, Path(sys.prefix), tmp_path / "log")
    (tmp_path / "probe.py").write_text(PROBE)
    rc, out = sh.run(offline_script("python probe.py", sh), 60)
    if rc == 97 or "Operation not permitted" in out:
        pytest.skip("no network namespaces here")
    assert rc == 0 and "loopback ok" in out and "outside reached" not in out
    assert "outside: OSError 101" in out  # ENETUNREACH: a test that needs the internet says so


# --------------------------------------------------------------------------- system packages


def test_the_specs_apt_packages_are_read_and_not_installed(tmp_path):
    from clover.evals.swebench.system_packages import apt_packages, package_words

    assert apt_packages("apt-get update && apt-get install -y graphviz") == ["graphviz"]
    assert apt_packages(
        "apt-get -y update && apt-get -y upgrade && DEBIAN_FRONTEND=noninteractive "
        "apt-get install -y imagemagick ffmpeg=7:5.1 cm-super"
    ) == ["imagemagick", "ffmpeg", "cm-super"]
    assert apt_packages("apt-get update && apt-get install -y locales; locale-gen en_US.UTF-8") == ["locales"]
    assert apt_packages("pip install apt-get") == [] and apt_packages("apt-get update") == []
    assert package_words("libenchant-2-dev") == ["libenchant-2-dev", "enchant"]
    assert package_words("hunspell-en-us") == ["hunspell-en-us", "hunspell"]
    spec = resolve_spec(
        {
            "repo": "sphinx-doc/sphinx",
            "instance_id": "sphinx-doc__sphinx-1",
            "version": "7.2",
            "base_commit": "0" * 40,
            "created_at": "2023-05-28T19:15:07Z",
            "test_patch": "diff --git a/tests/test_x.py b/tests/test_x.py\n",
            "FAIL_TO_PASS": "[]",
            "PASS_TO_PASS": "[]",
        },
        tmp_path,
    )
    assert spec.system_packages == ["graphviz"]


@pytest.mark.skipif(not shutil.which("dpkg-query"), reason="needs dpkg")
def test_a_missing_system_package_is_checked_by_dpkg_and_logged(tmp_path):
    from clover.evals.swebench.local_setup import check_system_packages

    spec = LocalSpec(python=None, system_packages=["dpkg", "clover-no-such-package"])
    sh = Shell(tmp_path, Path(sys.prefix), tmp_path / "log")
    check_system_packages(spec, sh)
    assert spec.missing_system_packages == ["clover-no-such-package"]
    assert (
        "here: dpkg; missing: clover-no-such-package (apt-get install clover-no-such-package)"
        in (tmp_path / "log").read_text()
    )


def test_a_test_skipped_for_a_missing_system_package_names_it():
    # sphinx-doc__sphinx-10614: every FAIL_TO_PASS test skips without graphviz, which the official
    # image installs with apt-get. The cause is the package, not "skipped".
    tests = [
        "tests/test_ext_inheritance_diagram.py::test_inheritance_diagram",
        "tests/test_ext_inheritance_diagram.py::test_inheritance_diagram_svg_html",
    ]
    row = {
        "instance_id": "x",
        "repo": "local/x",
        "test_patch": "",
        "FAIL_TO_PASS": tests,
        "PASS_TO_PASS": ["tests/test_ext_inheritance_diagram.py::test_import_classes"],
    }
    spec = default_spec(row, Path("/nonexistent"))
    log = (
        ">>>>> Start Test Output\n"
        "\x1b[32mPASSED\x1b[0m tests/test_ext_inheritance_diagram.py::test_import_classes\n"
        '\x1b[33mSKIPPED\x1b[0m [1] tests/test_ext_inheritance_diagram.py:18: graphviz "dot" is not available\n'
        '\x1b[33mSKIPPED\x1b[0m [1] tests/test_ext_inheritance_diagram.py:151: graphviz "dot" is not available\n'
        ">>>>> End Test Output\n"
    )
    assert evaluate_log(log, row, spec, "p")["cannot_judge_kind"] == "skipped"  # graphviz is here, or unknown
    spec.missing_system_packages = ["graphviz"]
    report = evaluate_log(log, row, spec, "p")
    assert report["cannot_judge_kind"] == "system-package"
    assert report["cannot_judge"].startswith(
        "cannot judge here: tests/test_ext_inheritance_diagram.py::test_inheritance_diagram: "
        "needs the system package "
        "graphviz, which the official image installs and this machine has not"
    )
    assert "apt-get install graphviz" in report["cannot_judge"]
