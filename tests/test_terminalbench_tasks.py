"""Terminal-Bench task loading, Dockerfile reading and the local path mapping."""

from __future__ import annotations

from pathlib import Path

import pytest

from clover.evals.terminalbench.tasks import (
    TaskError,
    find_tasks,
    load_task,
    map_paths,
    mapping_problem,
    parse_dockerfile,
)

TASKS = Path(__file__).parent / "tbench_tasks"


def test_the_shipped_tasks_load_in_harbor_format():
    tasks = find_tasks(TASKS)
    assert [t.id for t in tasks] == ["count-lines", "fix-script", "hello-file", "sort-scores"]
    for task in tasks:
        assert task.format == "harbor"
        assert task.docker.workdir == "/app"
        assert task.docker.unsupported == []
        assert task.instruction.strip()
        assert task.test_script.name == "test.sh" and task.solution_script is not None
        assert task.agent_timeout == 120.0 and task.test_timeout == 60.0
    fix = next(t for t in tasks if t.id == "fix-script")
    assert fix.docker.steps == [("copy", "sum.sh\0/app/sum.sh"), ("run", "chmod +x /app/sum.sh")]


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


def test_dockerfile_reading():
    spec = parse_dockerfile(
        "# comment\nFROM python:3.12-slim AS base\nWORKDIR /srv\nWORKDIR app\nENV A=1 B=\"two words\"\n"
        "ENV C three\nRUN mkdir -p x && \\\n    echo hi > x/y\nRUN [\"touch\", \"z\"]\nCOPY a b ./\nCMD [\"bash\"]\n"
    )
    assert spec.base == "python:3.12-slim" and spec.workdir == "/srv/app"
    assert spec.env == {"A": "1", "B": "two words", "C": "three"}
    assert spec.steps == [("run", "mkdir -p x &&  echo hi > x/y"), ("run", "touch z"),
                          ("copy", "a\0./"), ("copy", "b\0./")]
    assert spec.unsupported == []


@pytest.mark.parametrize(
    ("dockerfile", "reason"),
    [
        ("FROM ubuntu\nRUN apt-get update && apt-get install -y git\n", "installs or downloads software (apt-get)"),
        ("FROM ubuntu\nRUN pip install numpy\n", "(pip)"),
        ("FROM a AS b\nFROM c\nCOPY --from=b /x /y\n", "multi-stage"),
        ("FROM ubuntu\nADD https://example.com/x.tgz /x\n", "ADD from a URL"),
        ("FROM ubuntu\nONBUILD RUN true\n", "instruction ONBUILD"),
        ("FROM ubuntu\nRUN --mount=type=cache,target=/c true\n", "RUN with options"),
    ],
)
def test_dockerfiles_that_need_a_container_are_flagged(dockerfile, reason):
    assert any(reason in u for u in parse_dockerfile(dockerfile).unsupported)


def test_path_mapping_replaces_whole_components_only():
    mapping = {"/app": "/tmp/w", "/logs/verifier": "/tmp/l/v", "/logs": "/tmp/l"}
    text = "cat /app/x /app; ls /application /apps; curl http://h/app; echo 1 > /logs/verifier/reward.txt; ls /logs"
    assert map_paths(text, mapping) == (
        "cat /tmp/w/x /tmp/w; ls /application /apps; curl http://h/app; echo 1 > /tmp/l/v/reward.txt; ls /tmp/l"
    )
    assert map_paths("x=$HOME/app", mapping) == "x=$HOME/app"
    assert map_paths("Edit /app. Then /app.txt and /app.d/x.", mapping) == "Edit /tmp/w. Then /app.txt and /app.d/x."


def test_mapping_problems():
    mapping = {"/app": "/tmp/w"}
    assert mapping_problem("#!/bin/bash\ncat /tmp/w/a | /usr/bin/sort > /dev/null\n", mapping, "t") is None
    assert mapping_problem("cat /data/input.csv", mapping, "tests/test.sh") == "tests/test.sh uses the root path /data/input.csv"
    assert "installs or downloads software (curl)" in mapping_problem("curl -LsSf https://astral.sh/uv/install.sh | sh", mapping, "t")
    assert "(uv)" in mapping_problem("set -e\nuv run pytest\n", mapping, "t")
    assert mapping_problem("echo \"let's go\"  # pip is not run here\n", mapping, "t") is None
