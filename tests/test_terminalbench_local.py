"""The local Terminal-Bench runner and `clover eval terminalbench`: oracle, scripted agent, no-op agent,
each task in its own container (the task's real paths). These run on the "host" image (this
machine's own system under the overlay: no root to build, so they stay fast and offline); the
images built from the distributions' archives are tested in test_terminalbench_images.py (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clover.backends.scripted import ScriptedModel
from clover.evals.terminalbench.cli import terminalbench_app
from clover.evals.terminalbench.container import container_problem, host_image
from clover.evals.terminalbench.launch import Launch
from clover.evals.terminalbench.local_runner import run_tasks
from clover.evals.terminalbench.pythons import installs as python_installs
from clover.evals.terminalbench.tasks import find_tasks
from clover.evals.terminalbench.verdicts import summarize
from clover.settings import Settings
from clover.trajectory import Trajectory

TASKS = Path(__file__).parent / "tbench_tasks"
SCRIPTS = TASKS / "_scripts"
SETTINGS = Settings(mode="yolo", checkpoints=False, live=False, command_timeout=30)
HOST = Launch(image="host")
SCRIPTED = ["count-lines", "fix-script", "hello-file", "sort-scores"]
ALL = [
    "count-lines",
    "fix-script",
    "generator",
    "hello-file",
    "hidden-solution",
    "install-package",
    "odd-text",
    "sort-scores",
    "task-env",
    "two-workdirs",
]

pytestmark = pytest.mark.skipif(
    container_problem() is not None, reason=f"no local container: {container_problem()}"
)


def test_every_task_passes_with_the_oracle(tmp_path):
    results = run_tasks(
        find_tasks(TASKS), settings=SETTINGS, model_factory=None, out_dir=tmp_path, workers=2, launch=HOST
    )
    assert [(r.id, r.status, r.reward, r.reason) for r in results] == [(t, "passed", 1.0, "") for t in ALL]
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["summary"]["pass_rate"] == 1.0 and len(saved["tasks"]) == len(ALL)
    assert (tmp_path / "hello-file" / "logs" / "verifier" / "reward.txt").read_text().strip() == "1"
    assert not list(tmp_path.glob("*/container"))  # each container's state is removed


def test_nothing_lands_on_the_host(tmp_path):
    """The Dockerfile's package install, the generator's files under /app and in /usr, the COPY
    into /opt: all inside the task's container, none on this machine."""
    run_tasks(
        find_tasks(TASKS, ["install-package", "generator"]),
        settings=SETTINGS,
        model_factory=None,
        out_dir=tmp_path,
        launch=HOST,
    )
    for path in (
        "/app/logs",
        "/usr/local/share/clover-generated",
        "/opt/clover-gen",
        "/usr/local/bin/clover-greet",
    ):
        assert not Path(path).exists(), path
    dpkg = Path("/var/lib/dpkg/status")
    assert not dpkg.exists() or "clover-greet" not in dpkg.read_text(errors="replace")


def test_the_agent_cannot_read_the_solution_or_keep_its_own_tests(tmp_path):
    [task] = find_tasks(TASKS, ["hidden-solution"])
    [result] = run_tasks(
        [task],
        settings=SETTINGS,
        model_factory=lambda t: ScriptedModel(SCRIPTS / f"{t.id}.json"),
        out_dir=tmp_path,
        launch=HOST,
    )
    records = Trajectory.read(tmp_path / "hidden-solution" / "trajectory.jsonl")
    seen = "\n".join(str(r.get("content", "")) + str(r.get("output", "")) for r in records)
    assert "searched" in seen  # the agent did look
    assert "SECRET-7d1f" not in seen and "No such file or directory" in seen
    # It overwrote /tests/test.sh and the reward: the real tests are copied in after it and fail it.
    assert (result.status, result.reward) == ("failed", 0.0)


def test_a_scripted_model_that_does_the_work_passes(tmp_path):
    tasks = find_tasks(TASKS, SCRIPTED)
    results = run_tasks(
        tasks,
        settings=SETTINGS,
        model_factory=lambda t: ScriptedModel(SCRIPTS / f"{t.id}.json"),
        out_dir=tmp_path,
        workers=2,
        launch=HOST,
    )
    assert all(r.status == "passed" and r.exit_status == "submitted" for r in results), results
    assert {r.id: r.steps for r in results} == {
        "count-lines": 2,
        "fix-script": 4,
        "hello-file": 3,
        "sort-scores": 2,
    }
    assert all(r.tokens > 0 and r.agent_seconds > 0 for r in results)
    records = Trajectory.read(tmp_path / "fix-script" / "trajectory.jsonl")
    # The task's paths are its own: nothing is rewritten.
    assert "/app/sum.sh" in records[0]["content"]
    edits = [r for r in records if r["type"] == "tool" and r["name"] == "str_replace"]
    assert edits and not edits[0]["is_error"]


def test_a_model_that_does_nothing_fails(tmp_path):
    results = run_tasks(
        find_tasks(TASKS, SCRIPTED),
        settings=SETTINGS,
        model_factory=lambda t: ScriptedModel(SCRIPTS / "nothing.json"),
        out_dir=tmp_path,
        launch=HOST,
    )
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


def test_build_steps_run_in_the_container_and_failures_show_their_output(tmp_path):
    ok = "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"
    _task(
        tmp_path / "a-root",
        "FROM ubuntu\nWORKDIR /app\nRUN mkdir -p /data && echo 1 > /data/x\n",
        "#!/bin/bash\ncat /data/x > /logs/verifier/reward.txt\n",
    )
    _task(tmp_path / "d-noreward", "FROM ubuntu\nWORKDIR /app\n", "#!/bin/bash\nexit 0\n")
    _task(
        tmp_path / "e-badbuild",
        "FROM ubuntu\nWORKDIR /app\nRUN echo to-stdout; echo no-such-tool >&2; exit 127\n",
        ok,
    )
    _task(tmp_path / "f-unknown-image", "FROM clover-no-such-image:1\nWORKDIR /app\n", ok)
    _task(tmp_path / "g-from-a-stage", "FROM ubuntu AS b\nFROM b\nWORKDIR /app\n", ok)
    results = {
        r.id: r
        for r in run_tasks(
            find_tasks(tmp_path), settings=SETTINGS, model_factory=None, out_dir=tmp_path / "out", launch=HOST
        )
    }
    assert (results["a-root"].status, results["a-root"].reward) == ("passed", 1.0)  # /data is the task's own
    assert (results["d-noreward"].status, results["d-noreward"].reason) == (
        "failed",
        "the tests wrote no reward",
    )
    bad = results["e-badbuild"]
    assert (
        bad.status == "error"
        and "environment build failed: RUN" in bad.reason
        and "exited with 127" in bad.reason
    )
    assert "no-such-tool" in bad.reason  # stderr of the failed step, not only "exited with 127: "
    assert (
        results["g-from-a-stage"].status == "skipped"
        and "FROM an earlier stage" in results["g-from-a-stage"].reason
    )
    assert summarize(list(results.values()))["skipped"] == 1
    [unknown] = run_tasks(
        find_tasks(tmp_path, ["f-unknown-image"]),
        settings=SETTINGS,
        model_factory=None,
        out_dir=tmp_path / "out2",
    )  # on its own image: there is no recipe for it
    assert (
        unknown.status == "skipped"
        and "no recipe for the base image clover-no-such-image:1" in unknown.reason
    )
    assert not Path("/data/x").exists()


def test_terminal_bench_1_format(tmp_path):
    root = tmp_path / "tb1-task"
    (root / "tests").mkdir(parents=True)
    (root / "task.yaml").write_text(
        "instruction: |\n  Write 42 to /app/answer.txt.\nmax_agent_timeout_sec: 30\n"
    )
    (root / "Dockerfile").write_text(
        "FROM ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest\nWORKDIR /app\n"
    )
    (root / "run-tests.sh").write_text("#!/bin/bash\nbash $TEST_DIR/check.sh\n")
    (root / "tests" / "check.sh").write_text('[ "$(cat /app/answer.txt)" = 42 ]\n')
    (root / "solution.sh").write_text("echo 42 > /app/answer.txt\n")
    [task] = find_tasks(root)
    assert (task.format, task.agent_timeout) == ("tb1", 30.0)
    [oracle] = run_tasks([task], settings=SETTINGS, model_factory=None, out_dir=tmp_path / "o", launch=HOST)
    [idle] = run_tasks(
        [task],
        settings=SETTINGS,
        model_factory=lambda t: ScriptedModel(SCRIPTS / "nothing.json"),
        out_dir=tmp_path / "n",
        launch=HOST,
    )
    assert (oracle.status, oracle.reward, idle.status, idle.reward) == ("passed", 1.0, "failed", 0.0)


def test_cli_runs_tasks_and_reports(tmp_path):
    runner = CliRunner()
    out = tmp_path / "out"
    result = runner.invoke(
        terminalbench_app,
        [
            "--tasks",
            str(TASKS),
            "--model",
            f"scripted:{SCRIPTS}",
            "-n",
            "2",
            "-o",
            str(out),
            "--task",
            "hello-file,sort-scores",
            "--image",
            "host",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "passed 2/2 judged (100.0%)" in result.output
    assert [t["id"] for t in json.loads((out / "results.json").read_text())["tasks"]] == [
        "hello-file",
        "sort-scores",
    ]
    result = runner.invoke(
        terminalbench_app,
        ["--tasks", str(TASKS), "--oracle", "--task", "fix-script", "-o", str(out)],
        env={"CLOVER_TBENCH_IMAGE": "host"},
    )
    assert result.exit_code == 0 and "passed 1/1 judged" in result.output
    bad = runner.invoke(terminalbench_app, ["--tasks", str(tmp_path / "none"), "--oracle"])
    assert bad.exit_code == 2 and "not a directory" in bad.output and "Traceback" not in bad.output


def test_uv_and_a_local_interpreter_instead_of_downloads(tmp_path):
    """A test script that sources uv's env and asks `uv -p X.Y` for an interpreter gets this
    machine's, made portable (offline: nothing downloaded; uv itself from the cache or PyPI)."""
    import shutil

    from clover.evals.terminalbench.container import TaskContainer
    from clover.evals.terminalbench.toolchain import (
        PYTHON_DIR,
        STAND_IN_PYTHONS,
        install_uv,
        python_binds,
        uv_dist,
    )

    local = [v for v in STAND_IN_PYTHONS if any(i.startswith(v + ".") for i in python_installs())]
    if not local or shutil.which("patchelf") is None:
        pytest.skip("needs a pyenv interpreter of 3.10-3.13 and patchelf")
    try:
        uv_dist()
    except OSError as exc:
        pytest.skip(f"no uv: {exc}")
    image = host_image(tmp_path / "skeleton")
    box = TaskContainer(
        tmp_path / "box", image, network=False, binds=python_binds(image.glibc, versions=local[-1:])
    )
    box.start()
    try:
        install_uv(box)
        script = (
            f"source $HOME/.local/bin/env && UV_OFFLINE=1 uv run --no-project -p {local[-1]} "
            "python -c 'import sys, ssl, sqlite3; print(sys.version_info[:2])'"
        )
        rc, out, _ = box.exec(script, env={"PATH": f"/usr/bin:/bin:{PYTHON_DIR}/bin"}, timeout=120)
    finally:
        box.remove()
    assert rc == 0, out
    assert out.decode().strip().endswith(str(tuple(int(x) for x in local[-1].split("."))))


def test_which_tasks_get_uv_and_the_registry_settings(tmp_path):
    from clover.evals.terminalbench.toolchain import CA_BUNDLE, installer_version, network_env, uses_uv

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "test.sh").write_text("curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "test.sh").write_text("pip install pytest uvicorn  # not uv-based\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "test.sh").write_text("curl -LsSf https://astral.sh/uv/install.sh | sh\n")
    assert uses_uv(tmp_path / "a") and not uses_uv(tmp_path / "b")
    assert (
        installer_version(tmp_path / "a"),
        installer_version(tmp_path / "b"),
        installer_version(tmp_path / "c"),
    ) == ("0.9.5", None, "")
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    env = network_env({"PIP_CERT": str(ca), "HOME": "/root", "https_proxy": "http://proxy:3128"})
    assert env["https_proxy"] == "http://proxy:3128" and env["SSL_CERT_FILE"] == env["PIP_CERT"] == CA_BUNDLE
    assert network_env({"PIP_CERT": str(tmp_path / "missing.pem")}) == {}


def test_a_command_in_the_container_starts_with_every_signal_at_its_default(tmp_path):
    """As under `docker exec`, even when the runner itself ignores SIGINT (started with `nohup … &`):
    a task's test that stops its program with SIGINT must reach it."""
    import signal
    import subprocess

    from clover.evals.terminalbench.container import TaskContainer

    box = TaskContainer(tmp_path / "box", host_image(tmp_path / "skeleton"), network=False)
    box.start()
    try:
        argv = box.argv("grep SigIgn /proc/self/status; sh -c 'kill -INT $$; echo survived'")
        ignoring = signal.signal(signal.SIGINT, signal.SIG_IGN)  # what this test's children inherit
        try:
            shown = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            plain = subprocess.run(["grep", "SigIgn", "/proc/self/status"], capture_output=True, text=True)
        finally:
            signal.signal(signal.SIGINT, ignoring)
        assert int(plain.stdout.split()[1], 16) & 1 << (signal.SIGINT - 1)  # the harm, outside the container
        ignored = int(shown.stdout.split()[1], 16)
        assert not ignored & 1 << (signal.SIGINT - 1), shown.stdout
        assert shown.returncode in (-signal.SIGINT, 128 + signal.SIGINT) and "survived" not in shown.stdout
    finally:
        box.remove()


def test_the_container_environment_behaves_like_a_shell_and_a_file_system(tmp_path):
    from clover.evals.terminalbench.container import TaskContainer
    from clover.evals.terminalbench.container_env import ContainerEnvironment

    box = TaskContainer(tmp_path / "box", host_image(tmp_path / "skeleton"), network=False)
    box.start()
    try:
        env = ContainerEnvironment(box, root="/app", env={"PATH": "/usr/bin:/bin"}, timeout=20)
        env.write_file("src/a.txt", b"one\ntwo\n")
        assert (
            env.read_file("/app/src/a.txt") == b"one\ntwo\n" and box.read("/app/src/a.txt") == b"one\ntwo\n"
        )
        env.write_file("/usr/local/share/clover-env-test", b"x")  # an overlaid system folder
        assert env.read_file("/usr/local/share/clover-env-test") == b"x"
        assert not Path("/usr/local/share/clover-env-test").exists()
        assert env.execute("cd src && export K=v").returncode == 0
        out = env.execute("pwd; echo $K; sleep 30 >/dev/null 2>&1 &")
        assert out.output.split() == ["/app/src", "v"]
        assert "sleep 30" in env.execute("ps ax").output  # a background process lives on, as with docker exec
        assert env.list("/app") == ["src/"] and env.list_files("/app") == ["src/a.txt"]
        assert env.stat("src").kind == "dir" and env.stat("src/a.txt").size == 8 and env.stat("nope") is None
        ran = env.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (ran.returncode, ran.stdout, ran.stderr.strip()) == (3, b"out\n", "err")
        assert env.run(["clover-no-such-program"]).returncode == 127
        with pytest.raises(FileNotFoundError):
            env.read_file("missing.txt")
        with pytest.raises(IsADirectoryError):
            env.read_file("src")
        assert env.execute("sleep 5", timeout=1).timed_out
    finally:
        box.remove()


def test_a_python_image_gets_python_and_pip_as_in_docker(tmp_path):
    """FROM python:3.12-... on the host image: the build's `pip install` and the tests' `python`
    work (the system's python3 and pip3 under the image's names, without the PEP 668 marker), all
    inside the overlay. (The real python image: test_terminalbench_images.py.)"""
    if not Path("/usr/bin/pip3").exists():
        pytest.skip("no system pip3 to stand in for the python image")
    [result] = run_tasks(
        find_tasks(TASKS / "_extra" / "python-image"),
        settings=SETTINGS,
        model_factory=None,
        out_dir=tmp_path,
        launch=HOST,
    )
    assert (result.status, result.reward) == ("passed", 1.0), result.reason
    assert not Path("/usr/local/pyvenv.cfg").exists()
    assert not list(Path("/usr/local/lib").glob("python3*/site-packages/clover_tiny"))


def test_build_args_reach_the_build_steps_only(tmp_path):
    """ARG NAME=default is a variable of the RUN steps after it (an ENV of the same name wins), not
    of the finished container; a RUN's cache mount is only a cache, so the step runs without it."""
    _task(
        tmp_path / "args",
        "FROM ubuntu\nWORKDIR /app\nARG V=1.2\nENV W=env-$V\nARG W=arg\n"
        'RUN --mount=type=cache,target=/root/.cache echo "$V $W" > /app/built.txt\n',
        '#!/bin/bash\n[ "$(cat /app/built.txt)" = "1.2 env-1.2" ] && [ -z "$V" ] && [ "$W" = env-1.2 ] '
        "&& echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
    )
    [result] = run_tasks(
        find_tasks(tmp_path), settings=SETTINGS, model_factory=None, out_dir=tmp_path / "out", launch=HOST
    )
    assert (result.status, result.reward) == ("passed", 1.0), result.reason
