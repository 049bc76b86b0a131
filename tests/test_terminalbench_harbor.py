"""CloverAgent through Harbor's own job and trial machinery, with a sandbox that needs no Docker.

Harbor needs Python >= 3.12, so this test keeps a py3.12 virtual environment (default
~/.cache/clover/harbor-venv, or $CLOVER_HARBOR_VENV) with `pip install -e <repo>[harbor]` (which
must not pull torch) and runs `harbor run` there as a subprocess:
`-a clover.evals.terminalbench.harbor_agent:CloverAgent -e clover.evals.terminalbench.harbor_sandbox:BwrapEnvironment`
on one of tests/tbench_tasks, once with a scripted model that fixes the task and once with one
that does nothing. Cold cache: about a minute (venv + pip); warm: about 15 s (Harbor imports litellm).
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clover.tools.safety.sandbox import bwrap_available, unavailable_reason
from tests.fakeserver import FakeChatServer, FakeReply

# A Python 3.12 virtual environment with Harbor (pip, from PyPI on a cold cache: about a minute) and
# Harbor runs of 15-40 s each: `python -m pytest -m slow` runs them.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "tests" / "tbench_tasks"


def _python312() -> str | None:
    candidates = [
        shutil.which("python3.12"),
        *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python"))),
    ]
    if sys.version_info[:2] == (3, 12):
        candidates.insert(0, sys.executable)
    for candidate in candidates:
        if not candidate:
            continue
        try:  # a pyenv shim exists even when 3.12 is not selected: it must really run
            out = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2] >= (3, 12))"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == "True":
            return candidate
    return None


def _harbor_venv(python: str) -> Path:
    venv = Path(os.environ.get("CLOVER_HARBOR_VENV", "~/.cache/clover/harbor-venv")).expanduser()
    venv.parent.mkdir(parents=True, exist_ok=True)
    stamp = hashlib.sha256(f"{REPO}\n{(REPO / 'pyproject.toml').read_text()}".encode()).hexdigest()
    with open(f"{venv}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel test runs share one venv
        if not (venv / "bin" / "python").exists():
            subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
        stamp_file = venv / "clover-stamp"
        if not stamp_file.exists() or stamp_file.read_text() != stamp:
            pip = subprocess.run(
                [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-e", f"{REPO}[harbor]"],
                capture_output=True,
                text=True,
                timeout=1200,
            )
            assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
            stamp_file.write_text(stamp)
    return venv


@pytest.fixture(scope="module")
def harbor_venv() -> Path:
    python = _python312()
    if python is None:
        pytest.skip("Harbor needs Python >= 3.12 and no python3.12 is installed")
    return _harbor_venv(python)


def test_harbor_extra_installs_without_torch(harbor_venv):
    probe = (
        "import importlib.util, harbor, clover.evals.terminalbench.harbor_agent as a; "
        "print(importlib.util.find_spec('torch') is None, a.CloverAgent.name())"
    )
    out = subprocess.run(
        [str(harbor_venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["True", "clover"]


def test_clover_agent_runs_a_task_through_harbor_trials(harbor_venv, tmp_path):
    if not bwrap_available():  # the Docker-free sandbox needs it; .ci/run installs it with apt
        pytest.skip(f"no usable bwrap: {unavailable_reason()} (apt-get install bubblewrap)")
    scripts = TASKS / "_scripts"
    server = FakeChatServer(
        [  # the OpenAI-compatible path: a real HTTP server on 127.0.0.1
            FakeReply(
                tool_calls=[
                    {
                        "name": "str_replace",
                        "arguments": {
                            "path": "sum.sh",
                            "old_str": "  total=$n",
                            "new_str": "  total=$((total + n))",
                        },
                    }
                ]
            ),
            FakeReply(text="Fixed the sum."),
        ]
    )
    command = [
        str(harbor_venv / "bin" / "harbor"),
        "run",
        "-p",
        str(TASKS / "fix-script"),
        "-a",
        "clover.evals.terminalbench.harbor_agent:CloverAgent",
        "-m",
        f"scripted:{scripts / 'fix-script.json'}",
        "-m",
        f"scripted:{scripts / 'nothing.json'}",
        "-m",
        "openai/fake-model",
        "--ak",
        f"api_base={server.url}",
        "-e",
        "clover.evals.terminalbench.harbor_sandbox:BwrapEnvironment",
        "-o",
        str(tmp_path),
        "--job-name",
        "job",
        "-n",
        "3",
        "-y",
        "-q",
    ]
    # No fetch of litellm's price list; any key will do for the fake server. The task runs on the host
    # image (no root to build from an archive: this test is about Harbor's machinery; the real images
    # are tested in test_terminalbench_images.py).
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENAI_API_KEY": "sk-test",
        "CLOVER_TBENCH_IMAGE": "host",
    }
    env.pop("VIRTUAL_ENV", None)
    env.pop("OPENAI_BASE_URL", None)
    with server:
        run = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    trials = {}
    for result_file in (tmp_path / "job").glob("*/result.json"):
        result = json.loads(result_file.read_text())
        config = json.loads((result_file.parent / "config.json").read_text())
        trials[Path(config["agent"]["model_name"]).name] = (result, result_file.parent)
    assert set(trials) == {"fix-script.json", "nothing.json", "fake-model"}, run.stdout[-3000:]

    solved, trial_dir = trials["fix-script.json"]
    assert solved["exception_info"] is None, solved["exception_info"]
    assert solved["verifier_result"]["rewards"]["reward"] == 1.0
    agent = solved["agent_result"]
    assert agent["n_input_tokens"] > 0 and agent["n_output_tokens"] > 0
    assert agent["metadata"]["steps"] == 4 and agent["metadata"]["exit_status"] == "submitted"
    assert agent["metadata"]["workdir"] == "/app"
    records = [
        json.loads(line)
        for line in (trial_dir / "agent" / "clover-trajectory.jsonl").read_text().splitlines()
    ]
    tools = [(r["name"], r["is_error"]) for r in records if r["type"] == "tool"]
    assert tools == [("view", False), ("str_replace", False), ("bash", False)]
    assert any(r.get("output", "").startswith("6\n[exit code 0]") for r in records)  # the agent's own check
    assert (trial_dir / "verifier" / "test-stdout.txt").read_text().startswith("PASS")

    idle, _ = trials["nothing.json"]
    assert idle["exception_info"] is None, idle["exception_info"]
    assert idle["verifier_result"]["rewards"]["reward"] == 0.0
    assert idle["agent_result"]["metadata"]["steps"] == 1

    served, _ = trials["fake-model"]
    assert served["exception_info"] is None, served["exception_info"]
    assert served["verifier_result"]["rewards"]["reward"] == 1.0
    assert [r["model"] for r in server.requests] == ["fake-model", "fake-model"]  # "openai/" dropped
    assert served["agent_result"]["n_input_tokens"] == 22 and served["agent_result"]["n_output_tokens"] == 14


def test_a_mistyped_agent_option_is_an_error(harbor_venv):
    probe = (
        "from pathlib import Path; from clover.evals.terminalbench.harbor_agent import CloverAgent\n"
        "a = CloverAgent(Path('logs'), 'scripted:x', max_steps='3', api_base='http://127.0.0.1:1')\n"
        "print(a._options, a._api_base)\n"
        "try:\n    CloverAgent(Path('logs'), 'scripted:x', max_step=3)\n"
        "except ValueError as exc:\n    print('refused:', str(exc).splitlines()[1].strip())\n"
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run(
        [str(harbor_venv / "bin" / "python"), "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == [
        "{'max_steps': 3} http://127.0.0.1:1",
        "refused: Unknown option 'max_step'.",
    ]


@pytest.mark.slow
def test_a_failed_build_says_why_and_leaves_the_log_folders(harbor_venv, tmp_path):
    task = tmp_path / "tasks" / "bad-build"
    for sub in ("environment", "tests", "solution"):
        (task / sub).mkdir(parents=True)
    (task / "task.toml").write_text((TASKS / "hello-file" / "task.toml").read_text())
    (task / "instruction.md").write_text("Nothing to do.\n")
    (task / "environment" / "Dockerfile").write_text(
        "FROM ubuntu:24.04\nWORKDIR /app\nRUN echo building; clover-no-such-tool --flag\n"
    )
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")
    command = [
        str(harbor_venv / "bin" / "harbor"),
        "run",
        "-p",
        str(task),
        "-a",
        "oracle",
        "-e",
        "clover.evals.terminalbench.harbor_sandbox:BwrapEnvironment",
        "-o",
        str(tmp_path / "jobs"),
        "--job-name",
        "job",
        "-n",
        "1",
        "-y",
        "-q",
    ]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "CLOVER_TBENCH_IMAGE": "host"}
    env.pop("VIRTUAL_ENV", None)
    run = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    [result_file] = (tmp_path / "jobs" / "job").glob("*/result.json")
    info = json.loads(result_file.read_text())["exception_info"]
    assert info is not None, run.stdout[-3000:]
    assert info["exception_type"] == "SandboxBuildFailedError", info
    message = info["exception_message"]
    assert "exited with 127" in message and "clover-no-such-tool: command not found" in message, message
    assert "building" in message  # the step's output, stdout and stderr
    assert "FileNotFoundError" not in json.dumps(info)  # no second traceback from a missing /logs/agent
