"""The batch runner on real temporary repositories: scripted agent, workers, resume after errors
and a killed worker."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from clover.backends.scripted import ScriptedModel
from clover.evals.swebench.dataset import load_instances, load_predictions
from clover.evals.swebench.grade_local import GradeConfig
from clover.evals.swebench.local_batch import grade_batch
from clover.evals.swebench.report import collect
from clover.evals.swebench.runner import RunConfig, run_batch
from clover.settings import Settings
from tests.swebench_fixtures import FixtureModel, fix_script, write_dataset


def _config(out: Path, model, workers: int = 1) -> RunConfig:
    return RunConfig(
        output_dir=out, settings=Settings(max_steps=5), workers=workers, model=model, online=False
    )


def test_scripted_agent_resolves_one_of_one_and_the_local_grader_says_so(tmp_path):
    pytest.importorskip("swebench", reason="the local grader needs the swebench extra")
    path, _ = write_dataset(tmp_path, 1)
    insts = load_instances(str(path))
    out = tmp_path / "run"
    summary = run_batch(insts, _config(out, ScriptedModel(fix_script())), progress=False)
    assert (summary.done, summary.errors, summary.unfinished) == (1, 0, [])

    preds = json.loads((out / "preds.json").read_text())
    pred = preds["fixture__calc-1"]
    assert pred["model_name_or_path"] == "scripted:<list>"
    assert "-    return a - b\n+    return a + b" in pred["model_patch"]
    assert [json.loads(line) for line in (out / "preds.jsonl").read_text().splitlines()] == [pred]
    traj = json.loads((out / "fixture__calc-1" / "fixture__calc-1.traj.json").read_text())
    assert traj["info"]["exit_status"] == "submitted" and traj["info"]["submission"] == pred["model_patch"]
    kinds = [r["type"] for r in traj["records"]]
    assert kinds[0] == "user" and "tool" in kinds and kinds[-1] == "summary"
    assert (out / "fixture__calc-1" / "fixture__calc-1.traj.jsonl").is_file()
    run = json.loads((out / "run.json").read_text())
    assert run["totals"]["instances"] == 1 and run["instances"]["fixture__calc-1"]["steps"] == 2
    assert not (out / ".work" / "fixture__calc-1").exists()  # work tree removed

    report = grade_batch(
        insts,
        load_predictions(str(out / "preds.json"), insts),
        GradeConfig(output_dir=out / "grade_local", online=False),
        progress=False,
    )
    assert report["resolved_ids"] == ["fixture__calc-1"] and report["official"] is False
    per = json.loads((out / "grade_local" / "fixture__calc-1" / "report.json").read_text())["fixture__calc-1"]
    assert per["tests_status"]["FAIL_TO_PASS"]["success"] == ["tests/test_core.py::test_combine_adds"]
    assert per["tests_status"]["PASS_TO_PASS"]["success"] == ["tests/test_core.py::test_double"]


def test_two_workers_and_tokens_per_forward(tmp_path):
    path, _ = write_dataset(tmp_path, 3)
    insts = load_instances(str(path))
    out = tmp_path / "run"
    model = FixtureModel(calls_log=str(tmp_path / "calls.log"), delay=0.8)
    summary = run_batch(insts, _config(out, model, workers=2), progress=False)
    assert (summary.done, summary.errors) == (3, 0)
    results = {p.parent.name: json.loads(p.read_text()) for p in out.glob("*/result.json")}
    assert sorted(results) == ["fixture__calc-1", "fixture__calc-2", "fixture__calc-3"]
    for r in results.values():
        assert r["exit_status"] == "submitted" and r["model_patch"]
        assert (r["steps"], r["tokens"], r["tokens_per_forward"]) == (2, 280, 2.0)  # 30 tokens / 15 forwards
        assert r["stats"] == {
            "forwards": 15.0
        }  # the per-turn ratios (4.0 + 1.0 summed) are not a second figure
    assert collect(out)["totals"]["tokens_per_forward"] == 2.0  # 90 tokens / 45 forwards
    pids = {line.split()[2] for line in (tmp_path / "calls.log").read_text().splitlines()}
    assert len(pids) == 2  # both worker processes took instances
    assert json.loads((out / "run.json").read_text())["totals"]["tokens"] == 840


def test_kill_and_resume_loses_and_repeats_nothing(tmp_path):
    path, _ = write_dataset(tmp_path, 3)
    insts = load_instances(str(path))
    out, log, marker = tmp_path / "run", tmp_path / "calls.log", tmp_path / "crash-once"
    marker.write_text("x")
    # calc-2's model server fails; calc-3's worker process dies mid-run.
    first = FixtureModel(
        calls_log=str(log), raise_for="fixture__calc-2", crash_for="fixture__calc-3", crash_once=str(marker)
    )
    summary = run_batch(insts, _config(out, first), progress=False)
    assert summary.unfinished == ["fixture__calc-3"] and "resume" in summary.message
    done_first = json.loads((out / "fixture__calc-1" / "result.json").read_text())
    assert done_first["exit_status"] == "submitted"
    assert json.loads((out / "fixture__calc-2" / "result.json").read_text())["exit_status"] == "model_error"
    assert not (out / "fixture__calc-3" / "result.json").exists()
    assert set(json.loads((out / "preds.json").read_text())) == {"fixture__calc-1", "fixture__calc-2"}

    second = FixtureModel(calls_log=str(log))
    summary = run_batch(insts, _config(out, second), progress=False)
    assert (summary.skipped, summary.done, summary.errors, summary.unfinished) == (1, 2, 0, [])
    assert json.loads((out / "fixture__calc-1" / "result.json").read_text()) == done_first  # not redone
    starts = Counter(line.split()[0] for line in log.read_text().splitlines() if line.split()[1] == "1")
    assert starts == {"fixture__calc-1": 1, "fixture__calc-2": 2, "fixture__calc-3": 2}
    preds = json.loads((out / "preds.json").read_text())
    assert sorted(preds) == ["fixture__calc-1", "fixture__calc-2", "fixture__calc-3"]
    assert all("+    return a + b" in p["model_patch"] for p in preds.values())
    # The redone trajectory is fresh, not appended to the failed one.
    traj = (out / "fixture__calc-2" / "fixture__calc-2.traj.jsonl").read_text().splitlines()
    assert sum(json.loads(line)["type"] == "user" for line in traj) == 1

    again = run_batch(insts, _config(out, second), progress=False)
    assert (again.skipped, again.done) == (3, 0) and "nothing to do" in again.message


DRIVER = """
import sys
from pathlib import Path
from clover.evals.swebench.dataset import load_instances
from clover.evals.swebench.runner import RunConfig, run_batch
from clover.settings import Settings
from tests.swebench_fixtures import FixtureModel

dataset, out, log, delay = sys.argv[1:5]
model = FixtureModel(calls_log=log, delay=float(delay))
config = RunConfig(output_dir=Path(out), settings=Settings(max_steps=5), workers=2, model=model, online=False)
summary = run_batch(load_instances(dataset), config, progress=False)
print("unfinished", sorted(summary.unfinished), summary.message, flush=True)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state  # a zombie has finished


def test_sigterm_stops_the_workers_and_the_run_resumes(tmp_path):
    """`kill PID` on a real run: no worker outlives it, interrupted instances get no prediction,
    and the same command again finishes every instance."""
    import os
    import signal
    import subprocess
    import sys
    import time

    dataset, _ = write_dataset(tmp_path, 2)
    out, log, driver = tmp_path / "run", tmp_path / "calls.log", tmp_path / "driver.py"
    driver.write_text(DRIVER)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    first = subprocess.Popen(
        [sys.executable, str(driver), str(dataset), str(out), str(log), "120"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not log.exists() or len(log.read_text().splitlines()) < 2):
        time.sleep(0.2)
    workers = {int(line.split()[2]) for line in log.read_text().splitlines()}
    assert len(workers) == 2  # both workers are inside an instance (sleeping in the model)
    first.send_signal(signal.SIGTERM)
    output, _ = first.communicate(timeout=60)
    assert "interrupted: run the same command again to resume" in output, output
    time.sleep(0.5)
    assert not [pid for pid in workers if _alive(pid)]  # no orphan keeps running
    results = {p.parent.name: json.loads(p.read_text()) for p in out.glob("*/result.json")}
    assert sorted(results) == ["fixture__calc-1", "fixture__calc-2"]
    assert all(r["exit_status"] == "interrupted" for r in results.values())
    assert json.loads((out / "preds.json").read_text()) == {}  # no empty-patch predictions
    assert not any((out / ".work").glob("fixture__calc-*"))  # work trees cleaned up

    second = subprocess.run(
        [sys.executable, str(driver), str(dataset), str(out), str(log), "0"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0 and "unfinished []" in second.stdout, second.stdout + second.stderr
    preds = json.loads((out / "preds.json").read_text())
    assert sorted(preds) == ["fixture__calc-1", "fixture__calc-2"]
    assert all("+    return a + b" in p["model_patch"] for p in preds.values())
