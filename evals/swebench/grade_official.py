"""The official grader: swebench's own harness (`python -m swebench.harness.run_evaluation`), for
machines with Docker, or Modal with `--modal`. We only build its command line, run it in the
output directory and collect the report it writes there."""

from __future__ import annotations

import json
import os
import re
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
        python or sys.executable,
        "-m",
        "swebench.harness.run_evaluation",
        "--dataset_name",
        hub_name(dataset) if not Path(dataset).exists() else str(Path(dataset).resolve()),
        "--split",
        split,
        "--predictions_path",
        predictions_path if predictions_path == "gold" else str(Path(predictions_path).resolve()),
        "--max_workers",
        str(max_workers),
        "--run_id",
        run_id,
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
    check_backend(modal)
    output_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(cmd, cwd=output_dir)
    if proc.returncode != 0:
        raise OfficialGraderError(
            f"swebench harness exited with status {proc.returncode}; logs in {output_dir / 'logs'}"
        )
    run_id = cmd[cmd.index("--run_id") + 1]
    reports = sorted(output_dir.glob(f"*.{run_id}.json"), key=lambda p: p.stat().st_mtime)
    if not reports:
        raise OfficialGraderError(f"the harness wrote no report (*.{run_id}.json) in {output_dir}")
    report = json.loads(reports[-1].read_text(encoding="utf-8"))
    report.update(grader="swebench", official=True)
    (output_dir / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report


def check_backend(modal: bool) -> None:
    """The harness can start here: swebench, and Docker or (with --modal) a configured Modal."""
    try:
        import swebench.harness.run_evaluation  # noqa: F401
    except ImportError:
        raise OfficialGraderError(
            "--grader swebench needs the swebench package: pip install 'clover-cli[swebench]'"
        ) from None
    if not modal:
        problem = docker_problem()
        if problem:
            raise OfficialGraderError(
                problem.replace("--env docker", "--grader swebench").replace(
                    "use --env local", "use --grader local, or --modal"
                )
            )
        return
    if not _modal_importable():
        raise OfficialGraderError("--modal needs the modal client: pip install modal, then modal setup")
    problem = modal_credentials_problem()
    if problem:
        raise OfficialGraderError(f"--modal: {problem}")


def _modal_importable() -> bool:
    try:
        import modal  # noqa: F401
    except ImportError:
        return False
    return True


def modal_credentials_problem(environ: dict[str, str] | None = None) -> str | None:
    """Why Modal would refuse to authenticate, or None. Modal reads MODAL_TOKEN_ID and
    MODAL_TOKEN_SECRET, else the active profile of ~/.modal.toml (MODAL_CONFIG_PATH moves it;
    MODAL_PROFILE picks the profile, else the one marked `active`, else the only one)."""
    from clover.core.compat import tomllib

    env = os.environ if environ is None else environ
    if env.get("MODAL_TOKEN_ID") and env.get("MODAL_TOKEN_SECRET"):
        return None
    if env.get("MODAL_TOKEN_ID") or env.get("MODAL_TOKEN_SECRET"):
        return "MODAL_TOKEN_ID and MODAL_TOKEN_SECRET must both be set"
    path = Path(env.get("MODAL_CONFIG_PATH") or Path(env.get("HOME", str(Path.home()))) / ".modal.toml")
    if not path.is_file():
        return (
            f"no Modal credentials (MODAL_TOKEN_ID/MODAL_TOKEN_SECRET unset, {path} missing): run modal setup"
        )
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        return f"{path}: {exc}"
    profiles = {k: v for k, v in config.items() if isinstance(v, dict)}
    name = env.get("MODAL_PROFILE") or next((k for k, v in profiles.items() if v.get("active")), None)
    if name is None and len(profiles) == 1:
        name = next(iter(profiles))
    if name is None or name not in profiles:
        return f"{path}: no active profile" + (f" named {name!r}" if name else "") + ": run modal setup"
    missing = [k for k in ("token_id", "token_secret") if not profiles[name].get(k)]
    if missing:
        return f"{path}: profile {name!r} lacks {' and '.join(missing)}: run modal setup"
    return None
