"""The official grader: swebench's own harness (`python -m swebench.harness.run_evaluation`), for
machines with Docker, or Modal with `--modal`. We only build its command line, run it in the
output directory and collect the report it writes there."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from clover.evals.swebench.dataset import hub_name
from clover.evals.swebench.workspace import docker_problem


class OfficialGraderError(RuntimeError):
    """One line for the user."""


def official_command(
    *,
    dataset: str,
    predictions_path: str,
    run_id: str,
    max_workers: int = 4,
    instance_ids: list[str] | None = None,
    split: str = "test",
    modal: bool = False,
    timeout: int | None = None,
    python: str | None = None,
) -> list[str]:
    """The harness command. `predictions_path` is a preds file or the harness's own `gold`;
    `dataset` is a short name (verified), a hub id or a local file the harness can read."""
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", run_id):
        raise OfficialGraderError(f"run id {run_id!r}: use letters, digits, '.', '_' or '-'")
    if max_workers < 1:
        raise OfficialGraderError("--workers must be at least 1")
    cmd = [
        python or sys.executable, "-m", "swebench.harness.run_evaluation",
        "--dataset_name", hub_name(dataset) if not Path(dataset).exists() else str(Path(dataset).resolve()),
        "--split", split,
        "--predictions_path", predictions_path if predictions_path == "gold" else str(Path(predictions_path).resolve()),
        "--max_workers", str(max_workers),
        "--run_id", run_id,
    ]
    if instance_ids:
        cmd += ["--instance_ids", *instance_ids]
    if timeout:
        cmd += ["--timeout", str(int(timeout))]
    if modal:
        cmd += ["--modal", "true"]
    return cmd


def write_predictions(preds: dict[str, dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(list(preds.values()), indent=1), encoding="utf-8")
    return path


def run_official(cmd: list[str], output_dir: Path, modal: bool) -> dict[str, Any]:
    """Run the harness in `output_dir`; return its run report (the newest *.<run_id>.json there)."""
    try:
        import swebench.harness.run_evaluation  # noqa: F401
    except ImportError:
        raise OfficialGraderError("--grader swebench needs the swebench package: pip install 'clover-cli[swebench]'") from None
    if not modal:
        problem = docker_problem()
        if problem:
            raise OfficialGraderError(problem.replace("--env docker", "--grader swebench").replace(
                "use --env local", "use --grader local, or --modal"))
    elif shutil.which("modal") is None and not _modal_importable():
        raise OfficialGraderError("--modal needs the modal client configured (pip install modal; modal setup)")
    output_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(cmd, cwd=output_dir)
    if proc.returncode != 0:
        raise OfficialGraderError(f"swebench harness exited with status {proc.returncode}; logs in {output_dir / 'logs'}")
    run_id = cmd[cmd.index("--run_id") + 1]
    reports = sorted(output_dir.glob(f"*.{run_id}.json"), key=lambda p: p.stat().st_mtime)
    if not reports:
        raise OfficialGraderError(f"the harness wrote no report (*.{run_id}.json) in {output_dir}")
    report = json.loads(reports[-1].read_text(encoding="utf-8"))
    report.update(grader="swebench", official=True)
    (output_dir / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report


def _modal_importable() -> bool:
    try:
        import modal  # noqa: F401
    except ImportError:
        return False
    return True
