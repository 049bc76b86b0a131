"""UNOFFICIAL local grader: no Docker. Per instance a clean work tree at base_commit, a venv on the
Python version swebench's spec names, the repo's install command and pins, the model patch
(fallback chain), the test patch, the repo's test command; the log is parsed with swebench's
parser and graded with swebench's rule. Reports use swebench's schema.

`gold` and `empty` predictions calibrate it: an instance can be judged here when the gold patch
resolves it and the empty patch does not (network-bound or flaky tests fail that check)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
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
    cannot_judge,
    error_kind,
    failure_messages,
    grade_on_subset,
    pip_error,
    unrunnable_tests,
)
from clover.evals.swebench.local_spec import (
    SYSTEM_COMMAND,
    LocalSpec,
    make_venv,
    requirement_problems,
    resolve_spec,
    venv_env,
)
from clover.evals.swebench.runner import write_json_atomic, write_text_atomic
from clover.evals.swebench.workspace import RepoCache, git, make_workspace

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


class _Shell:
    """Runs commands in the work tree with the venv first on PATH, appending to one log."""

    def __init__(self, cwd: Path, venv: Path, log: Path, extra_env: dict[str, str] | None = None) -> None:
        self.cwd, self.env, self.log = cwd, {**venv_env(venv), **(extra_env or {})}, log

    def run(self, command: str | list[str], timeout: float, stdin: str | None = None) -> tuple[int, str]:
        shown = command if isinstance(command, str) else " ".join(command)
        args = ["bash", "-c", command] if isinstance(command, str) else command
        # Own process group, so a timeout kills the test run's children too, not only bash.
        proc = subprocess.Popen(args, cwd=self.cwd, env=self.env, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                                start_new_session=True)
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


def setup_environment(spec: LocalSpec, ws: Path, venv: Path, log: Path, timeout: float) -> _Shell:
    make_venv(spec, venv)
    sh = _Shell(ws, venv, log, spec.env)
    for note in spec.notes:
        sh.log.open("a").write(f"# {note}\n")
    for step in install_steps(spec, venv.parent / "requirements.txt", sh.log):
        rc, out = sh.run(step, timeout)
        if rc != 0:
            raise InstallError(f"dependency install failed ({step}): {_last_error(out)}", pip_error(out))
    for cmd in spec.pre_install:
        if SYSTEM_COMMAND.search(cmd):
            sh.log.open("a").write(f"# skipped (changes the machine): {cmd}\n")
            continue
        sh.run(cmd, timeout)
    if spec.install:
        rc, out = sh.run(spec.install, timeout)
        if rc != 0 and "pip install" in spec.install:  # setup.py that imports its own package
            rc, out = sh.run(spec.install + " --no-build-isolation", timeout)
        if rc != 0:
            raise InstallError(f"install failed ({spec.install}): {_last_error(out)}", pip_error(out))
    # Like the official image: commit what setup changed so resets return to this state.
    git("add", "-A", cwd=ws)
    git("commit", "--quiet", "--allow-empty", "--no-verify", "-m", "grader setup", cwd=ws)
    return sh


def install_steps(spec: LocalSpec, requirements_file: Path, log: Path) -> list[str]:
    """The pip commands before the install. Requirement lines go to a file for `pip install -r`:
    pip's own parser then handles comments, `-e URL`, `--hash` and markers, as swebench's image does."""
    import shlex

    pip = "python -m pip install"
    steps: list[str] = []
    if spec.official:
        steps.append(f"{pip} -q setuptools wheel")
    if spec.requirements:
        requirements_file.write_text("\n".join(spec.requirements) + "\n", encoding="utf-8")
        with log.open("a", encoding="utf-8") as fh:
            fh.write(f"# {requirements_file.name}:\n" + "".join(f"#   {r}\n" for r in spec.requirements))
            for problem in requirement_problems(spec.requirements):
                fh.write(f"# pip will reject the requirement {problem.splitlines()[0]}\n")
        steps.append(f"{pip} -r {shlex.quote(str(requirements_file))}")
    if spec.pip_packages:
        steps.append(f"{pip} " + " ".join(shlex.quote(p) for p in spec.pip_packages))
    return steps


def _last_error(output: str) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("ERROR:", "error:"))]
    return (errors or lines or ["(no output)"])[-1]


def apply_patch(sh: _Shell, ws: Path, patch: str, timeout: float = 300) -> bool:
    """The grader core's patch chain (evals/grading.py), each try run and logged in the venv shell."""
    return grading.apply_patch(ws, patch, run=lambda argv: sh.run(argv, timeout)[0])


def run_tests(sh: _Shell, ws: Path, instance: Instance, spec: LocalSpec, patch: str, log: Path,
              timeout: float) -> None:
    """Apply the model patch and the test patch, run the tests; everything goes into `log`."""
    start, end, bad = _markers()
    sh.log = log
    if patch.strip() and not apply_patch(sh, ws, patch):
        log.open("a").write(f"{bad[0]}\n")
        return
    if spec.install:  # as the official eval script does: the patch may change what gets installed
        rc, _ = sh.run(spec.install, timeout)
        if rc != 0 and "pip install" in spec.install:
            sh.run(spec.install + " --no-build-isolation", timeout)
    existing = [f for f in modified_files(instance["test_patch"]) if (ws / f).exists()]
    if existing:
        sh.run(["git", "checkout", instance["base_commit"], "--", *existing], 120)
    rc, _ = sh.run(["git", "apply", "-v", "-"], 120, stdin=instance["test_patch"])
    if rc != 0:
        log.open("a").write(f"{bad[0]} (test patch)\n")
        return
    script = "\n".join([c for c in spec.eval_commands if not SYSTEM_COMMAND.search(c)] + [spec.test_cmd + " 2>&1"])
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"{start}\n")
    rc, _ = sh.run(script, timeout)
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"{end}\n" if rc != 124 else f"{bad[3]}\n")


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
    report: dict[str, Any] = {"patch_is_None": False, "patch_exists": bool(patch.strip()),
                              "patch_successfully_applied": False, "resolved": False}
    if any(code in log_text for code in bad) or start not in log_text or end not in log_text:
        return report
    report["patch_successfully_applied"] = True
    test_ns = SimpleNamespace(repo=instance["repo"], version=instance.get("version", ""),
                              instance_id=instance["instance_id"])
    status_map = spec.parser(log_text.split(start)[1].split(end)[0], test_ns)
    eval_type = EvalType.FAIL_ONLY if instance["repo"] in FAIL_ONLY_REPOS else EvalType.PASS_AND_FAIL
    gold = {"instance_id": instance["instance_id"], FAIL_TO_PASS: instance["FAIL_TO_PASS"],
            PASS_TO_PASS: instance["PASS_TO_PASS"]}
    tests = get_eval_tests_report(status_map, gold, eval_type=eval_type)
    report["resolved"] = get_resolution_status(tests) == ResolvedStatus.FULL.value
    report["tests_status"] = tests
    body = log_text.split(start)[1].split(end)[0]
    excluded = unrunnable_tests(body, [*gold[FAIL_TO_PASS], *gold[PASS_TO_PASS]], status_map)
    grade_on_subset(report, excluded, gold, status_map, eval_type)
    return report


def grade_instance(instance: Instance, preds: dict[str, str], config: GradeConfig) -> dict[str, Any]:
    """Grade one instance under each named patch (e.g. {"model": p} or {"gold": g, "empty": ""}),
    sharing one environment. Returns {name: swebench-schema report (+ "error")} and writes logs."""
    iid = instance["instance_id"]
    inst_dir = config.output_dir / iid
    inst_dir.mkdir(parents=True, exist_ok=True)
    work = Path(config.work_dir) if config.work_dir else config.output_dir / ".work"
    ws, venv = work / iid / "repo", work / iid / "venv"
    setup_log = inst_dir / "run_instance.log"
    setup_log.write_text("")
    results: dict[str, Any] = {}
    started = time.monotonic()
    try:
        make_workspace(instance, ws, RepoCache(config.cache_dir, config.repo_map, online=config.online))
        spec = resolve_spec(instance, ws)
        sh = setup_environment(spec, ws, venv, setup_log, config.setup_timeout)
        for name, patch in preds.items():
            log = inst_dir / (f"test_output.{name}.txt" if len(preds) > 1 else "test_output.txt")
            log.write_text("")
            reset_tree(ws)
            run_tests(sh, ws, instance, spec, patch or "", log, config.test_timeout)
            write_text_atomic(inst_dir / (f"patch.{name}.diff" if len(preds) > 1 else "patch.diff"), patch or "")
            results[name] = evaluate_log(log.read_text(encoding="utf-8", errors="replace"), instance, spec, patch or "")
            results[name]["empty_patch"] = not (patch or "").strip()
    except Exception as exc:  # any failure is this instance's error, not the batch's
        failure = describe_failure(exc)
        with setup_log.open("a") as fh:
            fh.write(f"ERROR ({failure['error_kind']}) {failure['error']}\n{failure.get('error_detail', '')}\n")
        for name, patch in preds.items():
            results.setdefault(name, {"patch_is_None": False, "patch_exists": bool((patch or "").strip()),
                                      "patch_successfully_applied": False, "resolved": False,
                                      "empty_patch": not (patch or "").strip(), **failure})
    finally:
        if not config.keep:
            shutil.rmtree(work / iid, ignore_errors=True)
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
    failure = {"error": f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}", "error_kind": error_kind(exc)}
    if isinstance(exc, InstallError):
        failure["error_detail"] = exc.detail
    elif failure["error_kind"] == "grader":
        failure["error_detail"] = traceback.format_exc(limit=12)
    return failure


# --------------------------------------------------------------------------- the batch


def _why_not_judgeable(gold: dict[str, Any], empty: dict[str, Any], gold_log: str = "") -> str:
    for report in (gold, empty):
        if reason := cannot_judge(report):
            return reason
    if not gold.get("resolved"):
        tests = gold.get("tests_status", {})
        failing = [t for k in ("FAIL_TO_PASS", "PASS_TO_PASS") for t in tests.get(k, {}).get("failure", [])]
        messages = failure_messages(gold_log)
        shown = [f"{t} ({messages[t][:80]})" if t in messages else t for t in failing[:5]]
        return "gold patch does not resolve here" + (f"; failing: {', '.join(shown)}" if failing else "")
    if empty.get("resolved"):
        return "empty patch also resolves (the tests do not catch the bug here)"
    return ""


def _gold_log(config: GradeConfig, iid: str) -> str:
    path = config.output_dir / iid / "test_output.gold.txt"
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


def judge_notes(reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per instance: why it cannot be judged here, and which tests the verdict leaves out."""
    return {
        "cannot_judge": {i: r for i in sorted(reports) if (r := cannot_judge(reports[i]))},
        "excluded_tests": {i: reports[i]["excluded_tests"] for i in sorted(reports) if reports[i].get("excluded_tests")},
    }


def summarize(reports: dict[str, dict[str, Any]], total: int, label: str) -> dict[str, Any]:
    """swebench's run-report fields, over per-instance reports {id: report}."""
    ids = sorted(reports)
    errors = [i for i in ids if reports[i].get("error")]
    empty = [i for i in ids if reports[i].get("empty_patch")]
    completed = [i for i in ids if i not in errors]
    resolved = [i for i in completed if reports[i].get("resolved")]
    return {
        "grader": "local", "official": False, "label": label,
        "note": "UNOFFICIAL: graded locally without Docker; official numbers need `--grader swebench`",
        "total_instances": total, "submitted_instances": len(ids), "completed_instances": len(completed),
        "resolved_instances": len(resolved), "unresolved_instances": len(completed) - len(resolved),
        "empty_patch_instances": len(empty), "error_instances": len(errors),
        "completed_ids": completed, "resolved_ids": resolved,
        "unresolved_ids": [i for i in completed if i not in resolved], "empty_patch_ids": empty,
        "error_ids": errors, "schema_version": 2,
    }


def grade_batch(instances: list[Instance], predictions: dict[str, dict[str, Any]] | None, config: GradeConfig,
                *, workers: int = 1, label: str = "model", progress: bool = True) -> dict[str, Any]:
    """Grade `predictions` ({id: pred}); None means calibrate: gold and empty for every instance."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    config.output_dir.mkdir(parents=True, exist_ok=True)
    jobs: list[tuple[Instance, dict[str, str]]] = []
    for inst in instances:
        iid = inst["instance_id"]
        if predictions is None:
            jobs.append((inst, {"gold": inst.get("patch", ""), "empty": ""}))
        elif iid in predictions:
            jobs.append((inst, {label: predictions[iid].get("model_patch") or ""}))
    results: dict[str, dict[str, Any]] = {}
    bar = _progress(len(jobs)) if progress else None
    with bar or contextlib.nullcontext():
        task = bar.add_task("grade (local, UNOFFICIAL)", total=len(jobs)) if bar else None
        if workers <= 1:  # in this process: no start-up cost
            for inst, preds in jobs:
                results[inst["instance_id"]] = grade_instance(inst, preds, config)
                if bar:
                    bar.advance(task)
        else:
            with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
                futures = {pool.submit(grade_instance, inst, preds, config): inst["instance_id"] for inst, preds in jobs}
                for fut in as_completed(futures):
                    results[futures[fut]] = fut.result()
                    if bar:
                        bar.advance(task)
    if predictions is not None:
        graded = {i: r[label] for i, r in results.items()}
        summary = {**summarize(graded, len(instances), label), **judge_notes(graded)}
    else:
        gold = {i: r["gold"] for i, r in results.items()}
        empty = {i: r["empty"] for i, r in results.items()}
        why = {i: _why_not_judgeable(gold[i], empty[i], _gold_log(config, i)) for i in results}
        calib = {i: {"gold_resolved": gold[i].get("resolved", False), "empty_resolved": empty[i].get("resolved", False),
                     "judgeable": not why[i], "why_not": why[i]}
                 for i in sorted(results)}
        for i, c in calib.items():
            if gold[i].get("excluded_tests") or empty[i].get("excluded_tests"):
                c["excluded_tests"] = {**empty[i].get("excluded_tests", {}), **gold[i].get("excluded_tests", {})}
        summary = {
            **summarize(gold, len(instances), "calibrate"),
            "judgeable_ids": [i for i, c in calib.items() if c["judgeable"]],
            "calibration": calib,
            "gold": summarize(gold, len(instances), "gold"),
            "empty": summarize(empty, len(instances), "empty"),
        }
    write_json_atomic(config.output_dir / "report.json", summary)
    return summary


def _progress(total: int) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
