"""UNOFFICIAL local grader: no Docker. Per instance a clean work tree at base_commit, a venv on the
Python version swebench's spec names, the repo's install command and pins, the model patch
(fallback chain), the test patch, the repo's test command; the log is parsed with swebench's
parser and graded with swebench's rule. Reports use swebench's schema.

`gold` and `empty` predictions calibrate it: an instance can be judged here when the gold patch
resolves it and the empty patch does not (network-bound or flaky tests fail that check). This module
grades one instance; local_batch.py grades a batch and writes the run's report."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from clover.evals import grading
from clover.evals.grading import reset_tree
from clover.evals.swebench.dataset import Instance, modified_files
from clover.evals.swebench.judge import (
    InstallError,
    error_kind,
    judge_without,
    missing_package_tests,
    unrunnable_tests,
)
from clover.evals.swebench.local_setup import Shell, install_repository, needs_reinstall, setup_environment
from clover.evals.swebench.local_spec import SYSTEM_COMMAND, LocalSpec, resolve_spec
from clover.evals.swebench.runner import write_json_atomic, write_text_atomic
from clover.evals.swebench.system_packages import system_package_tests
from clover.evals.swebench.tox_command import ToxError, is_tox_command, tox_run
from clover.evals.swebench.workspace import RepoCache, default_cache_dir, make_workspace

# The official harness tries git apply, then --reject, then patch --fuzz; --3way sits between.


@dataclass
class GradeConfig:
    output_dir: Path
    cache_dir: str | None = None
    repo_map: dict[str, str] = field(default_factory=dict)
    online: bool = True
    work_dir: str | None = None
    keep: bool = False
    test_timeout: float = 1800.0
    setup_timeout: float = 1800.0
    test_network: bool = True  # False: tests run with loopback only (offline_script)

    def __post_init__(self) -> None:
        # Commands run with cwd = the work tree: a relative -o would put the venv on PATH and the
        # patch file where they cannot be found (and pip would install into the caller's venv).
        self.output_dir = Path(self.output_dir).absolute()
        if self.work_dir:
            self.work_dir = str(Path(self.work_dir).absolute())


def _markers() -> tuple[str, str, list[str]]:
    from swebench.harness.constants import (
        APPLY_PATCH_FAIL,
        END_TEST_OUTPUT,
        RESET_FAILED,
        START_TEST_OUTPUT,
        TESTS_ERROR,
        TESTS_TIMEOUT,
    )

    return START_TEST_OUTPUT, END_TEST_OUTPUT, [APPLY_PATCH_FAIL, RESET_FAILED, TESTS_ERROR, TESTS_TIMEOUT]


def apply_patch(sh: Shell, ws: Path, patch: str, timeout: float = 300) -> bool:
    """The grader core's patch chain (evals/grading.py), each try run and logged in the venv shell."""
    return grading.apply_patch(ws, patch, run=lambda argv: sh.run(argv, timeout)[0])


def run_tests(
    sh: Shell,
    ws: Path,
    instance: Instance,
    spec: LocalSpec,
    patch: str,
    log: Path,
    timeout: float,
    network: bool = True,
) -> None:
    """Apply the model patch and the test patch, run the tests; everything goes into `log`."""
    start, end, bad = _markers()
    sh.log = log
    if patch.strip() and not apply_patch(sh, ws, patch):
        log.open("a").write(f"{bad[0]}\n")
        return
    # The official eval script installs again: the patch may change what gets built. Skipped when
    # it cannot (only Python modules changed: the editable install already sees them).
    if spec.install and needs_reinstall(patch):
        with contextlib.suppress(InstallError):  # logged; the tests say what it broke
            install_repository(spec.install, sh, sh.installer, timeout, again=True)
    existing = [f for f in modified_files(instance["test_patch"]) if (ws / f).exists()]
    if existing:
        sh.run(["git", "checkout", instance["base_commit"], "--", *existing], 120)
    rc, _ = sh.run(["git", "apply", "-v", "-"], 120, stdin=instance["test_patch"])
    if rc != 0:
        log.open("a").write(f"{bad[0]} (test patch)\n")
        return
    test_cmd, test_env = direct_test_command(spec.test_cmd, ws, sh)
    script = "\n".join([c for c in spec.eval_commands if not SYSTEM_COMMAND.search(c)] + [test_cmd + " 2>&1"])
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"{start}\n")
    if not network:
        script = offline_script(script, sh)
    rc, _ = sh.run(script, timeout, env=test_env)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"{end}\n" if rc != 124 else f"{bad[3]}\n")


def offline_script(script: str, sh: Shell) -> str:
    """`script` in a network namespace of its own with only loopback up: a test that needs the
    internet fails as such (and is named), instead of meeting whatever this machine's network does
    (here a gateway answers every address, and requests' connect-timeout tests fail oddly)."""
    if not (shutil.which("unshare") and shutil.which("ip")):
        sh.note("--no-test-network: unshare or ip missing; the tests run with the machine's network")
        return script
    inner = "ip link set lo up || exit 97\n" + script
    return f"unshare --net {'' if os.geteuid() == 0 else '--map-root-user '}bash -c {shlex.quote(inner)}"


def direct_test_command(test_cmd: str, ws: Path, sh: Shell) -> tuple[str, dict[str, str]]:
    """The command that runs the tests, and its extra environment. A `tox ...` command becomes its
    testenv's commands, read from the work tree's tox.ini (after the pre-install edits) and run
    in the venv directly (tox_command.py says why)."""
    if not is_tox_command(test_cmd):
        return test_cmd, {}
    try:
        run = tox_run(test_cmd, ws, environ=sh.env)
    except ToxError as exc:
        sh.note(f"tox command not translated ({exc}); running it as given")
        return test_cmd, {}
    sh.note(f"{test_cmd!r} runs tox.ini's {run.env_name} testenv; run directly: {run.script()}")
    if run.setenv:
        sh.note("with " + " ".join(f"{k}={shlex.quote(v)}" for k, v in run.setenv.items()))
    return run.script(), run.setenv


def evaluate_log(log_text: str, instance: Instance, spec: LocalSpec, patch: str) -> dict[str, Any]:
    """swebench's per-instance report for one log (its parser, its grading rule)."""
    from swebench.harness.constants import (
        FAIL_ONLY_REPOS,
        FAIL_TO_PASS,
        PASS_TO_PASS,
        EvalType,
        ResolvedStatus,
    )
    from swebench.harness.grading import get_eval_tests_report, get_resolution_status

    start, end, bad = _markers()
    report: dict[str, Any] = {
        "patch_is_None": False,
        "patch_exists": bool(patch.strip()),
        "patch_successfully_applied": False,
        "resolved": False,
    }
    if unfinished := _unfinished(log_text, bad):  # the tests never ran to the end here
        report["patch_successfully_applied"] = bad[0] not in log_text or f"{bad[0]} (test patch)" in log_text
        report.update(resolved=None, verdict="cannot judge", cannot_judge=unfinished[1])
        report["cannot_judge_kind"] = unfinished[0]
        return report
    if any(code in log_text for code in bad) or start not in log_text or end not in log_text:
        report["verdict"] = "unresolved"  # the model patch does not apply (the official chain)
        return report
    report["patch_successfully_applied"] = True
    test_ns = SimpleNamespace(
        repo=instance["repo"], version=instance.get("version", ""), instance_id=instance["instance_id"]
    )
    status_map = spec.parser(log_text.split(start)[1].split(end)[0], test_ns)
    eval_type = EvalType.FAIL_ONLY if instance["repo"] in FAIL_ONLY_REPOS else EvalType.PASS_AND_FAIL
    gold = {
        "instance_id": instance["instance_id"],
        FAIL_TO_PASS: instance["FAIL_TO_PASS"],
        PASS_TO_PASS: instance["PASS_TO_PASS"],
    }
    tests = get_eval_tests_report(status_map, gold, eval_type=eval_type)
    report["resolved"] = get_resolution_status(tests) == ResolvedStatus.FULL.value
    report["tests_status"] = tests
    body = log_text.split(start)[1].split(end)[0]
    judged = [*gold[FAIL_TO_PASS], *gold[PASS_TO_PASS]]
    report["tests_run"] = sum(t in status_map for t in judged)  # 0: the run stopped before any of them
    excluded = {
        **unrunnable_tests(body, judged, status_map),
        **missing_package_tests(body, judged, status_map, spec.missing_packages),
        **system_package_tests(body, judged, status_map, spec.missing_system_packages),
    }
    judge_without(report, excluded, gold, status_map, eval_type)
    return report


def _unfinished(log_text: str, bad: list[str]) -> tuple[str, str] | None:
    """(kind, why) when the test run did not finish for a reason of this machine, not the patch's:
    it ran out of time (slower or busier than the official one), or the test patch, which applies
    in the official image, did not apply here."""
    if bad[3] in log_text:
        return (
            "timeout",
            "cannot judge here: the tests did not finish within the test timeout on this machine",
        )
    if f"{bad[0]} (test patch)" in log_text:
        return "test-patch", "cannot judge here: the test patch does not apply to the work tree here"
    return None


def default_work_dir() -> Path:
    """Work trees and venvs: beside the repository cache, not under the system temp directory
    (the instance's TMPDIR), whose paths must not share a first directory with the work tree."""
    return default_cache_dir().parent / "work"


def grade_instance(instance: Instance, preds: dict[str, str], config: GradeConfig) -> dict[str, Any]:
    """Grade one instance under each named patch (e.g. {"model": p} or {"gold": g, "empty": ""}),
    sharing one environment. Returns {name: swebench-schema report (+ "error")} and writes logs."""
    iid = instance["instance_id"]
    inst_dir = config.output_dir / iid
    inst_dir.mkdir(parents=True, exist_ok=True)
    work = Path(config.work_dir) if config.work_dir else default_work_dir()
    own = work / f"{iid}-{os.getpid()}"  # two runs grading one instance at once do not meet
    ws, venv = own / "repo", own / "venv"
    setup_log = inst_dir / "run_instance.log"
    setup_log.write_text("")
    results: dict[str, Any] = {}
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix=f"clover-grade-{iid[:40]}-"))
    try:
        make_workspace(instance, ws, RepoCache(config.cache_dir, config.repo_map, online=config.online))
        spec = resolve_spec(instance, ws)
        sh = setup_environment(spec, ws, venv, setup_log, config.setup_timeout, tmp=tmp)
        for name, patch in preds.items():
            log = inst_dir / (f"test_output.{name}.txt" if len(preds) > 1 else "test_output.txt")
            log.write_text("")
            reset_tree(ws)
            run_tests(sh, ws, instance, spec, patch or "", log, config.test_timeout, config.test_network)
            write_text_atomic(
                inst_dir / (f"patch.{name}.diff" if len(preds) > 1 else "patch.diff"), patch or ""
            )
            results[name] = evaluate_log(
                log.read_text(encoding="utf-8", errors="replace"), instance, spec, patch or ""
            )
            results[name]["empty_patch"] = not (patch or "").strip()
    except Exception as exc:  # any failure is this instance's error, not the batch's
        failure = describe_failure(exc)
        with setup_log.open("a") as fh:
            fh.write(
                f"ERROR ({failure['error_kind']}) {failure['error']}\n{failure.get('error_detail', '')}\n"
            )
        for name, patch in preds.items():
            results.setdefault(
                name,
                {
                    "patch_is_None": False,
                    "patch_exists": bool((patch or "").strip()),
                    "patch_successfully_applied": False,
                    "resolved": False,
                    "empty_patch": not (patch or "").strip(),
                    **failure,
                },
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not config.keep:
            shutil.rmtree(own, ignore_errors=True)
    seconds = round(time.monotonic() - started, 2)
    for name, rep in results.items():
        rep["seconds"] = seconds
        path = inst_dir / (f"report.{name}.json" if len(preds) > 1 else "report.json")
        write_json_atomic(path, {iid: rep})
    return results


def describe_failure(exc: BaseException) -> dict[str, str]:
    """An instance's error for its report: one line, its kind, and the whole detail (pip's full
    message, or the traceback of a grader bug)."""
    import traceback

    text = str(exc).strip()
    failure = {
        "error": f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}",
        "error_kind": error_kind(exc),
    }
    if isinstance(exc, InstallError):
        failure["error_detail"] = exc.detail
    elif failure["error_kind"] == "grader":
        failure["error_detail"] = traceback.format_exc(limit=12)
    return failure
