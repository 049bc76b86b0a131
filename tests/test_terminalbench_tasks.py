"""Terminal-Bench task loading and Dockerfile reading (every step, in order)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clover.evals.terminalbench.tasks import (
    TaskError,
    find_tasks,
    load_task,
    parse_dockerfile,
    resolve_env,
)

TASKS = Path(__file__).parent / "tbench_tasks"


def test_the_shipped_tasks_load_in_harbor_format():
    tasks = find_tasks(TASKS)
    assert [t.id for t in tasks] == [
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
    for task in tasks:
        assert task.format == "harbor" and task.network
        assert task.docker.workdir == ("/app/sub" if task.id == "two-workdirs" else "/app")
        assert task.docker.unsupported == []
        assert task.instruction.strip()
        assert task.test_script.name == "test.sh" and task.solution_script is not None
        assert task.agent_timeout == 120.0 and task.test_timeout == 60.0
    fix = next(t for t in tasks if t.id == "fix-script")
    assert fix.docker.steps == [
        ("workdir", "/app"),
        ("copy", "sum.sh\0/app/sum.sh"),
        ("run", "chmod +x /app/sum.sh"),
    ]
    two = next(t for t in tasks if t.id == "two-workdirs")
    assert [k for k, _ in two.docker.steps] == ["workdir", "copy", "workdir", "run"]


def test_find_tasks_picks_ids_and_reports_unknown_ones():
    assert [t.id for t in find_tasks(TASKS, ["hello-file"])] == ["hello-file"]
    assert [t.id for t in find_tasks(TASKS / "sort-scores")] == ["sort-scores"]
    with pytest.raises(TaskError, match="unknown task id"):
        find_tasks(TASKS, ["nope"])
    with pytest.raises(TaskError, match="not a directory"):
        find_tasks(TASKS / "missing")


def test_broken_task_directories_are_one_line_errors(tmp_path):
    (tmp_path / "task.toml").write_text("this is = = not toml")
    with pytest.raises(TaskError) as err:
        load_task(tmp_path)
    assert "\n" not in str(err.value)
    (tmp_path / "task.toml").write_text("[agent]\ntimeout_sec = 5\n")
    with pytest.raises(TaskError, match="environment/Dockerfile is missing"):
        load_task(tmp_path)
    with pytest.raises(TaskError, match="not a task directory"):
        load_task(tmp_path / "environment")


def test_a_prebuilt_image_without_a_dockerfile_is_skipped_with_the_reason(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test.sh").write_text("true\n")
    (tmp_path / "instruction.md").write_text("x\n")
    (tmp_path / "task.toml").write_text(
        '[environment]\ndocker_image = "someone/some-task:2025"\nworkdir = "/app"\n'
    )
    task = load_task(tmp_path)
    assert task.docker.workdir == "/app" and task.docker.steps == []
    assert task.docker.unsupported == [
        "only a prebuilt image (someone/some-task:2025), which is not pulled here, "
        "and no environment/Dockerfile to build"
    ]


def test_dockerfile_reading():
    spec = parse_dockerfile(
        '# comment\nFROM python:3.12-slim AS base\nWORKDIR /srv\nWORKDIR app\nENV A=1 B="two words"\n'
        'ENV C three\nRUN mkdir -p x && \\\n    echo hi > x/y\nRUN ["touch", "z"]\nCOPY a b ./\nCMD ["bash"]\n'
    )
    assert spec.base == "python:3.12-slim" and spec.workdir == "/srv/app"
    assert spec.env == {"A": "1", "B": "two words", "C": "three"}
    assert spec.steps == [
        ("workdir", "/srv"),
        ("workdir", "/srv/app"),
        ("env", "A\x001"),
        ("env", "B\x00two words"),
        ("env", "C\x00three"),
        ("run", "mkdir -p x &&  echo hi > x/y"),
        ("run", "touch z"),
        ("copy", "a\0./"),
        ("copy", "b\0./"),
    ]
    assert spec.unsupported == []
    # Installing software is an ordinary step now: it runs in the task's container.
    assert parse_dockerfile("FROM ubuntu\nRUN apt-get update && apt-get install -y git\n").unsupported == []


@pytest.mark.parametrize(
    ("dockerfile", "reason"),
    [
        ("FROM a AS b\nFROM b\nRUN true\n", "FROM an earlier stage (b)"),
        ("FROM ubuntu\nADD https://example.com/x.tgz /x\n", "ADD from a URL"),
        ("FROM ubuntu\nONBUILD RUN true\n", "instruction ONBUILD"),
        ("FROM ubuntu\nRUN --mount=type=secret,id=k true\n", "RUN with options"),
    ],
)
def test_dockerfiles_that_need_a_container_are_flagged(dockerfile, reason):
    assert any(reason in u for u in parse_dockerfile(dockerfile).unsupported)


def test_env_values_expand_earlier_variables():
    from clover.evals.terminalbench.build import expand

    env = {"PATH": "/usr/bin:/bin", "HOME": "/root"}
    assert expand("/opt/venv/bin:$PATH", env) == "/opt/venv/bin:/usr/bin:/bin"
    assert expand("${HOME}/.local/bin:$UNSET", env) == "/root/.local/bin:"


def test_task_toml_env_tables(monkeypatch, tmp_path):
    """[environment].env, [solution].env and [verifier].env are read as written; ${NAME} and
    ${NAME:-default} resolve from this machine when the task runs, a missing one is a one-line error."""
    task = load_task(TASKS / "task-env")
    assert task.env["GREETING"] == "hello from task.toml" and task.env["PATH"].startswith("/app/bin:")
    assert task.solution_env == {"SOLVER_MODE": "oracle"}
    assert task.verifier_env == {"EXPECTED_MODE": "${CLOVER_TBENCH_SURELY_UNSET:-fallback}", "STRICT": "true"}
    monkeypatch.setenv("CLOVER_TBENCH_KEY", "sk-1")
    monkeypatch.delenv("CLOVER_TBENCH_SURELY_UNSET", raising=False)
    assert resolve_env(
        {"A": "${CLOVER_TBENCH_KEY}", "B": "x-${CLOVER_TBENCH_SURELY_UNSET:-d}", "C": "$HOME"}
    ) == {"A": "sk-1", "B": "x-d", "C": "$HOME"}
    with pytest.raises(TaskError, match=r"\$\{CLOVER_TBENCH_SURELY_UNSET\} is not set"):
        resolve_env({"A": "${CLOVER_TBENCH_SURELY_UNSET}"})
    bad = tmp_path / "bad"
    for sub in ("environment", "tests"):
        (bad / sub).mkdir(parents=True)
    (bad / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\n")
    (bad / "tests" / "test.sh").write_text("true\n")
    (bad / "instruction.md").write_text("x\n")
    (bad / "task.toml").write_text('[verifier]\nenv = "A=1"\n')
    with pytest.raises(TaskError, match=r"\[verifier\]\.env must be a table"):
        load_task(bad)


def test_multi_stage_dockerfiles_keep_their_stages():
    spec = parse_dockerfile(
        "ARG UBUNTU=24.04\nFROM ubuntu:${UBUNTU} as build\nCOPY --from=ghcr.io/astral-sh/uv:0.8.14 /uv /uvx /bin/\n"
        "RUN uv run x.py\nFROM --platform=linux/amd64 ubuntu:24.04 AS target\n"
        "COPY --from=build /app/documents /app/documents\nWORKDIR /app\n"
    )
    assert (spec.base, spec.name, spec.workdir, spec.unsupported) == ("ubuntu:24.04", "target", "/app", [])
    assert spec.steps == [("copy-from", "build\0/app/documents\0/app/documents"), ("workdir", "/app")]
    [build] = spec.stages
    assert (build.base, build.name) == ("ubuntu:24.04", "build")  # the ARG before FROM names the base
    assert build.steps == [
        ("copy-from", "ghcr.io/astral-sh/uv:0.8.14\0/uv\0/uvx\0/bin/"),
        ("run", "uv run x.py"),
    ]
    assert parse_dockerfile("FROM --platform=linux/amd64 python:3.12 AS base\n").base == "python:3.12"
    # A stage's problem is the build's.
    assert parse_dockerfile("FROM a AS one\nADD https://x/y.tgz /y\nFROM b\n").unsupported == [
        "ADD from a URL"
    ]


def test_build_args_and_ignorable_run_options():
    spec = parse_dockerfile(
        'ARG BASE=ubuntu:24.04\nFROM ubuntu\nARG V=1.2\nARG Q="a b"\nARG NODEFAULT\n'
        "RUN --mount=type=cache,target=/root/.cache/pip --network=host pip install x==$V\n"
    )
    assert spec.steps == [("arg", "V\x001.2"), ("arg", "Q\x00a b"), ("run", "pip install x==$V")]
    assert spec.env == {} and spec.unsupported == []
