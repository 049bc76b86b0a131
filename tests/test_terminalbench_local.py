"""The local Terminal-Bench runner and `clover eval terminalbench`: oracle, scripted agent, no-op agent."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from clover.backends.scripted import ScriptedModel
from clover.evals.terminalbench.cli import terminalbench_app
from clover.evals.terminalbench.local_runner import run_tasks, summarize
from clover.evals.terminalbench.tasks import find_tasks
from clover.settings import Settings
from clover.trajectory import Trajectory

TASKS = Path(__file__).parent / "tbench_tasks"
SCRIPTS = TASKS / "_scripts"
SETTINGS = Settings(mode="yolo", checkpoints=False, live=False, command_timeout=30)


def test_every_task_passes_with_the_oracle(tmp_path):
    results = run_tasks(find_tasks(TASKS), settings=SETTINGS, model_factory=None, out_dir=tmp_path, workers=2)
    assert [(r.id, r.status, r.reward) for r in results] == [
        (t, "passed", 1.0) for t in ("count-lines", "fix-script", "hello-file", "sort-scores")
    ]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["summary"]["pass_rate"] == 1.0 and len(saved["tasks"]) == 4
    assert (tmp_path / "hello-file" / "logs" / "verifier" / "reward.txt").read_text().strip() == "1"


def test_a_scripted_model_that_does_the_work_passes(tmp_path):
    tasks = find_tasks(TASKS)
    results = run_tasks(tasks, settings=SETTINGS, model_factory=lambda t: ScriptedModel(SCRIPTS / f"{t.id}.json"),
                        out_dir=tmp_path, workers=2)
    assert all(r.status == "passed" and r.exit_status == "submitted" for r in results), results
    assert {r.id: r.steps for r in results} == {"count-lines": 2, "fix-script": 4, "hello-file": 3, "sort-scores": 2}
    assert all(r.tokens > 0 and r.agent_seconds > 0 for r in results)
    records = Trajectory.read(tmp_path / "fix-script" / "trajectory.jsonl")
    # The instruction's /app was mapped to the task's temporary working directory.
    assert "/app/" not in records[0]["content"] and "workdir/sum.sh" in records[0]["content"]
    edits = [r for r in records if r["type"] == "tool" and r["name"] == "str_replace"]
    assert edits and not edits[0]["is_error"]


def test_a_model_that_does_nothing_fails(tmp_path):
    results = run_tasks(find_tasks(TASKS), settings=SETTINGS, model_factory=lambda t: ScriptedModel(SCRIPTS / "nothing.json"),
                        out_dir=tmp_path)
    assert [(r.status, r.reward, r.steps) for r in results] == [("failed", 0.0, 1)] * 4
    assert summarize(results)["pass_rate"] == 0.0


def _task(root: Path, dockerfile: str, test: str, solve: str = "#!/bin/bash\ntrue\n") -> Path:
    for sub in ("environment", "tests", "solution"):
        (root / sub).mkdir(parents=True)
    (root / "task.toml").write_text("[agent]\ntimeout_sec = 30.0\n[verifier]\ntimeout_sec = 30.0\n")
    (root / "instruction.md").write_text("Do the thing in /app.\n")
    (root / "environment" / "Dockerfile").write_text(dockerfile)
    (root / "tests" / "test.sh").write_text(test)
    (root / "solution" / "solve.sh").write_text(solve)
    return root


def test_tasks_that_need_their_container_are_skipped_with_the_reason(tmp_path):
    ok = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"
    _task(tmp_path / "a-apt", "FROM ubuntu\nWORKDIR /app\nRUN apt-get install -y jq\n", ok)
    _task(tmp_path / "b-root", "FROM ubuntu\nWORKDIR /app\n", "#!/bin/bash\ncat /data/x > /logs/verifier/reward.txt\n")
    _task(tmp_path / "c-uv", "FROM ubuntu\nWORKDIR /app\n", "#!/bin/bash\ncurl -LsSf https://astral.sh/uv/install.sh | sh\n")
    _task(tmp_path / "d-noreward", "FROM ubuntu\nWORKDIR /app\n", "#!/bin/bash\nexit 0\n")
    _task(tmp_path / "e-badbuild", "FROM ubuntu\nWORKDIR /app\nRUN false\n", ok)
    results = {r.id: r for r in run_tasks(find_tasks(tmp_path), settings=SETTINGS, model_factory=None,
                                          out_dir=tmp_path / "out")}
    assert results["a-apt"].status == "skipped" and "(apt-get)" in results["a-apt"].reason
    assert results["b-root"].status == "skipped" and "root path /data/x" in results["b-root"].reason
    assert results["c-uv"].status == "skipped" and "(curl)" in results["c-uv"].reason
    assert (results["d-noreward"].status, results["d-noreward"].reason) == ("failed", "the tests wrote no reward")
    assert results["e-badbuild"].status == "error" and "environment build failed" in results["e-badbuild"].reason
    assert summarize(list(results.values()))["skipped"] == 3


def test_terminal_bench_1_format(tmp_path):
    root = tmp_path / "tb1-task"
    (root / "tests").mkdir(parents=True)
    (root / "task.yaml").write_text("instruction: |\n  Write 42 to /app/answer.txt.\nmax_agent_timeout_sec: 30\n")
    (root / "Dockerfile").write_text("FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest\nWORKDIR /app\n")
    (root / "run-tests.sh").write_text("#!/bin/bash\nbash $TEST_DIR/check.sh\n")
    (root / "tests" / "check.sh").write_text('[ "$(cat /app/answer.txt)" = 42 ]\n')
    (root / "solution.sh").write_text("echo 42 > /app/answer.txt\n")
    [task] = find_tasks(root)
    assert (task.format, task.agent_timeout) == ("tb1", 30.0)
    [oracle] = run_tasks([task], settings=SETTINGS, model_factory=None, out_dir=tmp_path / "o")
    [idle] = run_tasks([task], settings=SETTINGS, model_factory=lambda t: ScriptedModel(SCRIPTS / "nothing.json"),
                       out_dir=tmp_path / "n")
    assert (oracle.status, oracle.reward, idle.status, idle.reward) == ("passed", 1.0, "failed", 0.0)


def test_cli_runs_tasks_and_reports(tmp_path):
    runner = CliRunner()
    out = tmp_path / "out"
    result = runner.invoke(terminalbench_app, ["--tasks", str(TASKS), "--model", f"scripted:{SCRIPTS}", "-n", "2",
                                               "-o", str(out), "--task", "hello-file,sort-scores"])
    assert result.exit_code == 0, result.output
    assert "passed 2/2 (100.0%)" in result.output
    assert [t["id"] for t in json.loads((out / "results.json").read_text())["tasks"]] == ["hello-file", "sort-scores"]
    result = runner.invoke(terminalbench_app, ["--tasks", str(TASKS), "--oracle", "--task", "fix-script", "-o", str(out)])
    assert result.exit_code == 0 and "passed 1/1" in result.output
    bad = runner.invoke(terminalbench_app, ["--tasks", str(tmp_path / "none"), "--oracle"])
    assert bad.exit_code == 2 and "not a directory" in bad.output and "Traceback" not in bad.output
