"""The local grader says what it cannot judge here and why: requirement files as pip reads them,
install failures with pip's whole message, tests that need the network or more CPUs excluded and
listed, grader bugs told apart from environment errors."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytest.importorskip("swebench")

from clover.evals.swebench.grade_local import describe_failure, evaluate_log, setup_environment  # noqa: E402
from clover.evals.swebench.judge import InstallError, unrunnable_tests  # noqa: E402
from clover.evals.swebench.local_spec import (  # noqa: E402
    LocalSpec,
    default_spec,
    requirement_lines,
    requirement_problems,
    requirements_from_mirror,
)

REQUIREMENTS = """\
# pylint's requirements_test.txt style
-r requirements_test_min.txt
astroid==2.6.5  # Pinned to a specific version for tests
coverage~=5.5 ; python_version < "3.11"   # marker and comment
-e .
black==21.6b0 \\
    --hash=sha256:0123
-e git+https://github.com/x/y.git#egg=y
"""


def _git_repo(path: Path, files: dict[str, str]) -> str:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run([*git, "add", "-A"], cwd=path, check=True)
    subprocess.run([*git, "commit", "-qm", "reqs"], cwd=path, check=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True
    ).stdout.strip()


def test_requirement_lines_with_inline_comments_and_options():
    lines = requirement_lines(REQUIREMENTS)
    assert lines == [
        "astroid==2.6.5",
        'coverage~=5.5 ; python_version < "3.11"',
        "black==21.6b0     --hash=sha256:0123",
        "-e git+https://github.com/x/y.git#egg=y",
    ]
    assert requirement_problems(lines) == []
    assert requirement_problems(["not a req!!"])[0].startswith("'not a req!!'")


def test_requirements_from_the_mirror_follow_r_and_drop_comments(tmp_path):
    commit = _git_repo(
        tmp_path / "pylint",
        {"requirements_test.txt": REQUIREMENTS, "requirements_test_min.txt": "pytest~=6.2  # min\n"},
    )
    inst = {"repo": "pylint-dev/pylint", "base_commit": commit, "environment_setup_commit": commit}
    lines = requirements_from_mirror(inst, tmp_path / "pylint")
    assert (
        lines[0] == "pytest~=6.2"
        and "astroid==2.6.5" in lines
        and not any("#" in ln and "#egg" not in ln for ln in lines)
    )


def test_pip_reads_the_requirement_file_and_a_failure_keeps_pips_whole_message(tmp_path):
    # A real venv and a real pip, offline: the commented and marker lines install (or are skipped
    # by their marker); an unknown package fails with pip's own words, all of them.
    ws = tmp_path / "ws"
    _git_repo(ws, {"README": "x\n"})
    lines = requirement_lines(
        'pip>=1  # the installer itself\nnowhere-pkg==1 ; python_version < "3.0"  # never\n'
    )
    # inherit_site: the venv borrows the grader's pip instead of installing its own (seconds saved)
    good = LocalSpec(python=None, requirements=lines, env={"PIP_NO_INDEX": "1"}, inherit_site=True)
    setup_environment(good, ws, tmp_path / "venv", tmp_path / "setup.log", 300)
    log = (tmp_path / "setup.log").read_text()
    assert "-r " in log and "Ignoring nowhere-pkg" in log

    bad = LocalSpec(
        python=None,
        requirements=["clover-no-such-package==1.0"],
        env={"PIP_NO_INDEX": "1"},
        inherit_site=True,
    )
    with pytest.raises(InstallError) as info:
        setup_environment(bad, ws, tmp_path / "venv2", tmp_path / "setup2.log", 300)
    failure = describe_failure(info.value)
    assert failure["error_kind"] == "install" and "\n" not in failure["error"]
    assert "No matching distribution found for clover-no-such-package==1.0" in failure["error"]
    assert "Could not find a version that satisfies" in failure["error_detail"]
    assert "No matching distribution" in failure["error_detail"]


def test_grader_bug_is_not_an_environment_error():
    try:
        {}["missing"]
    except KeyError as exc:
        bug = describe_failure(exc)
    assert bug["error_kind"] == "grader" and "Traceback" in bug["error_detail"]
    assert describe_failure(OSError("disk full"))["error_kind"] == "environment"


LOG = """>>>>> Start Test Output
PASSED t.py::a
FAILED net.py::get - requests.exceptions.ConnectionError: HTTPSConnectionPool(host='httpbin.org', port=443): Max retries exceeded
PASSED t.py::b
SKIPPED [2] par.py:12: needs at least 2 CPUs (multiprocessing.cpu_count() == 1)
FAILED t.py::c - assert 1 == 2
>>>>> End Test Output
"""


def _inst(f2p, p2p):
    return {"instance_id": "x", "repo": "local/x", "FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p, "test_patch": ""}


def test_network_and_cpu_tests_are_excluded_and_listed():
    inst = _inst(["t.py::a"], ["t.py::b", "net.py::get", "par.py::test_jobs"])
    spec = default_spec(inst, Path("/nonexistent"))
    report = evaluate_log(LOG, inst, spec, "p")
    # Every test that ran passes: the two that could not run decide, so there is no verdict.
    assert report["resolved"] is None and report["verdict"] == "cannot judge"
    assert report["cannot_judge"].startswith("cannot judge here: net.py::get: needs the network")
    assert report["excluded_tests"]["net.py::get"].startswith(
        "needs the network: requests.exceptions.ConnectionError"
    )
    assert report["excluded_tests"]["par.py::test_jobs"].startswith(
        "too few CPUs here: needs at least 2 CPUs"
    )
    # A real failure is still a failure.
    inst2 = _inst(["t.py::a"], ["t.py::c", "net.py::get"])
    report2 = evaluate_log(LOG, inst2, default_spec(inst2, Path("/nonexistent")), "p")
    assert report2["resolved"] is False and report2["tests_status"]["PASS_TO_PASS"]["failure"] == ["t.py::c"]


def test_every_fail_to_pass_excluded_cannot_be_judged():
    inst = _inst(["net.py::get"], ["t.py::a"])
    report = evaluate_log(LOG, inst, default_spec(inst, Path("/nonexistent")), "")
    assert report["resolved"] is None and report["cannot_judge_kind"] == "network"
    assert report["cannot_judge"].startswith("cannot judge here: net.py::get: needs the network")


def test_a_test_missing_from_a_file_without_skips_is_not_excluded():
    assert unrunnable_tests(LOG, ["t.py::gone", "par.py::x"], {"t.py::a": "PASSED"}) == {
        "par.py::x": "too few CPUs here: needs at least 2 CPUs (multiprocessing.cpu_count() == 1)"
    }


def test_the_network_error_is_read_from_the_failure_section_when_the_summary_is_cut():
    log = """>>>>> Start Test Output
=================================== FAILURES ===================================
____________ RequestsTestCase.test_BASICAUTH_TUPLE_HTTP_200_OK_GET _____________
    def test_BASICAUTH_TUPLE_HTTP_200_OK_GET(self):
E       socket.gaierror: [Errno -2] Name or service not known
E           requests.exceptions.ConnectionError: HTTPConnectionPool(host='httpbin.org', port=80): Max retries
_____________________________ test_plain_failure _____________________________
E       assert 1 == 2
=========================== short test summary info ============================
FAILED test_requests.py::RequestsTestCase::test_BASICAUTH_TUPLE_HTTP_200_OK_GET - requ...
FAILED test_requests.py::test_plain_failure
PASSED test_requests.py::test_ok
>>>>> End Test Output
"""
    net, plain = (
        "test_requests.py::RequestsTestCase::test_BASICAUTH_TUPLE_HTTP_200_OK_GET",
        "test_requests.py::test_plain_failure",
    )
    inst = _inst(["test_requests.py::test_ok"], [net, plain])
    report = evaluate_log(log, inst, default_spec(inst, Path("/nonexistent")), "p")
    assert report["excluded_tests"] == {
        net: "needs the network: requests.exceptions.ConnectionError: HTTPConnectionPool("
        "host='httpbin.org', port=80): Max retries | socket.gaierror: [Errno -2] Name or service not known"
    }
    assert report["tests_status"]["PASS_TO_PASS"]["failure"] == [plain] and report["resolved"] is False


def test_a_failure_whose_captured_output_shows_the_network_is_excluded():
    # sphinx's test_latex_images fails an assert; the reason is in its captured output only.
    log = """>>>>> Start Test Output
______________________________ test_latex_images _______________________________
E       AssertionError: assert '\\\\sphinxincludegraphics{{python-logo}.png}' in '...'
----------------------------- Captured stdout teardown -----------------------------
WARNING: Could not fetch remote image: https://www.python.org/static/img/python-logo.png [HTTPSConnectionPool(host='www.python.org', port=443): Max retries exceeded]
______________________________ test_latex_other _______________________________
E       AssertionError: assert 1 == 2
=========================== short test summary info ============================
FAILED tests/test_build_latex.py::test_latex_images - AssertionError: assert ...
FAILED tests/test_build_latex.py::test_latex_other - AssertionError: assert 1 == 2
>>>>> End Test Output
"""
    status = {
        "tests/test_build_latex.py::test_latex_images": "FAILED",
        "tests/test_build_latex.py::test_latex_other": "FAILED",
    }
    out = unrunnable_tests(log, list(status), status)
    assert list(out) == ["tests/test_build_latex.py::test_latex_images"]
    assert out["tests/test_build_latex.py::test_latex_images"].startswith(
        "needs the network: WARNING: Could not fetch"
    )
