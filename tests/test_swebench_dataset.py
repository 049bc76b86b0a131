"""SWE-bench datasets, selection, predictions and workspaces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clover.evals.swebench.dataset import DatasetError, load_instances, load_predictions, parse_slice, select
from clover.evals.swebench.workspace import (
    RepoCache,
    WorkspaceError,
    docker_problem,
    docker_run_command,
    extract_patch,
    files_of_test_patch,
    instance_image,
    make_workspace,
    parse_repo_map,
)
from tests.swebench_fixtures import make_instance, write_dataset

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "swebench-verified.jsonl"


def test_fixture_rows_load_from_jsonl_json_and_parquet(tmp_path):
    path, rows = write_dataset(tmp_path, 2)
    from_jsonl = load_instances(str(path))
    assert [i["instance_id"] for i in from_jsonl] == ["fixture__calc-1", "fixture__calc-2"]
    assert from_jsonl[0]["FAIL_TO_PASS"] == ["tests/test_core.py::test_combine_adds"]  # decoded
    as_json = tmp_path / "d.json"
    as_json.write_text(json.dumps({r["instance_id"]: r for r in rows}))  # keyed by id
    assert load_instances(str(as_json)) == from_jsonl
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    assert load_instances(str(tmp_path / "d.parquet")) == from_jsonl


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"base_commit": ""}, "missing or empty field 'base_commit'"),
        ({"FAIL_TO_PASS": "[not json"}, "FAIL_TO_PASS is not a JSON list"),
        ({"PASS_TO_PASS": json.dumps([1])}, "PASS_TO_PASS must be a list of test ids"),
        ({"base_commit": "main"}, "is not a commit hash"),
        ({"test_patch": "just text"}, "test_patch is not a git diff"),
    ],
)
def test_bad_rows_give_one_line_errors(tmp_path, change, message):
    row = {**make_instance(tmp_path), **change}
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(DatasetError, match=message.replace("[", r"\[").replace("(", r"\(")) as info:
        load_instances(str(path))
    assert "\n" not in str(info.value) and "row 1" in str(info.value)


def test_missing_file_and_duplicate_ids(tmp_path):
    with pytest.raises(DatasetError, match="no such file"):
        load_instances(str(tmp_path / "nope.jsonl"))
    row = make_instance(tmp_path)
    path = tmp_path / "dup.jsonl"
    path.write_text((json.dumps(row) + "\n") * 2)
    with pytest.raises(DatasetError, match="duplicate instance_id"):
        load_instances(str(path))


def test_hub_dataset_offline_is_one_line():
    pytest.importorskip("datasets")
    code = (
        "from clover.evals.swebench.dataset import load_instances, DatasetError\n"
        "try:\n    load_instances('verified')\nexcept DatasetError as e:\n    print('ERR', e)"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERR could not load 'princeton-nlp/SWE-bench_Verified'")
    assert "--dataset PATH" in lines[0]


def test_select_ids_filter_slice():
    insts = [{"instance_id": f"org__repo-{n}"} for n in range(10)]
    assert [i["instance_id"] for i in select(insts, slice_spec="2:4")] == ["org__repo-2", "org__repo-3"]
    assert [i["instance_id"] for i in select(insts, filter_regex=r"-[15]$")] == ["org__repo-1", "org__repo-5"]
    assert [i["instance_id"] for i in select(insts, ids=["org__repo-7", "org__repo-0"])] == [
        "org__repo-0",
        "org__repo-7",
    ]
    assert len(select(insts, filter_regex="repo", slice_spec=":3")) == 3
    assert parse_slice("5") == slice(5, 6)
    for bad in (dict(ids=["x"]), dict(filter_regex="("), dict(slice_spec="a:b")):
        with pytest.raises(DatasetError):
            select(insts, **bad)


def test_predictions_gold_empty_and_files(tmp_path):
    path, _ = write_dataset(tmp_path, 1)
    insts = load_instances(str(path))
    gold = load_predictions("gold", insts)["fixture__calc-1"]
    assert gold["model_patch"].startswith("diff --git a/calc/core.py")
    assert load_predictions("empty", insts)["fixture__calc-1"]["model_patch"] == ""
    (tmp_path / "preds.jsonl").write_text(json.dumps({"instance_id": "a", "model_patch": "x"}) + "\n")
    assert load_predictions(str(tmp_path / "preds.jsonl"), insts)["a"]["model_patch"] == "x"
    (tmp_path / "p.json").write_text(json.dumps([{"model_patch": "x"}]))
    with pytest.raises(DatasetError, match="instance_id"):
        load_predictions(str(tmp_path / "p.json"), insts)


@pytest.mark.skipif(not SHARED.is_file(), reason="shared SWE-bench Verified file absent")
def test_all_500_shared_rows_load_and_validate():
    insts = load_instances(str(SHARED))
    assert len(insts) == 500 and len({i["instance_id"] for i in insts}) == 500
    assert all(i["FAIL_TO_PASS"] and isinstance(i["PASS_TO_PASS"], list) for i in insts)
    assert all(files_of_test_patch(i) and i["patch"].startswith("diff --git") for i in insts)
    try:
        from swebench.harness.constants import MAP_REPO_VERSION_TO_SPECS
    except ImportError:  # the optional extra is absent: loading is still checked
        MAP_REPO_VERSION_TO_SPECS = None
    if MAP_REPO_VERSION_TO_SPECS is not None:
        assert all(i["version"] in MAP_REPO_VERSION_TO_SPECS[i["repo"]] for i in insts)
    assert len(select(insts, filter_regex=r"^psf__requests-")) == 8


# --------------------------------------------------------------------------- workspaces


def test_workspace_is_clean_at_base_commit_and_patch_includes_new_files(tmp_path):
    inst = make_instance(tmp_path / "src")
    ws = make_workspace(inst, tmp_path / "ws", RepoCache(tmp_path / "cache", online=False))
    run = lambda *a: subprocess.run(["git", *a], cwd=ws, capture_output=True, text=True, check=True).stdout  # noqa: E731
    assert run("rev-parse", "HEAD").strip() == inst["base_commit"]
    assert run("status", "--porcelain") == "" and run("remote") == ""
    assert run("for-each-ref") == ""  # no branch or tag to find the future in
    (ws / "calc" / "core.py").write_text((ws / "calc" / "core.py").read_text().replace("a - b", "a + b"))
    (ws / "calc" / "extra.py").write_text("X = 1\n")  # untracked: must be in the patch
    (ws / "tests" / "test_core.py").write_text("# the agent touched a test file\n")
    patch = extract_patch(ws, inst["base_commit"], exclude=files_of_test_patch(inst))
    assert "b/calc/core.py" in patch and "b/calc/extra.py" in patch and "test_core.py" not in patch
    assert run("diff", "--cached") == ""  # the index is left as it was


def test_repo_sources(tmp_path):
    inst = make_instance(tmp_path / "src")
    mapped = {**inst, "repo": "someone/calc"}
    with pytest.raises(WorkspaceError, match="--repo-map someone/calc=PATH"):
        make_workspace(mapped, tmp_path / "ws", RepoCache(tmp_path / "cache", online=False))
    cache = RepoCache(tmp_path / "cache", parse_repo_map([f"someone/calc={inst['repo']}"]), online=False)
    assert (make_workspace(mapped, tmp_path / "ws", cache) / "calc" / "core.py").is_file()
    with pytest.raises(WorkspaceError, match="expected owner/name=PATH"):
        parse_repo_map(["nope"])
    with pytest.raises(WorkspaceError, match="not in"):
        make_workspace({**inst, "base_commit": "0" * 40}, tmp_path / "ws2", cache)


def test_a_mirror_that_lacks_a_file_of_the_base_commit_is_an_error_not_a_smaller_tree(tmp_path):
    # A snapshot without its largest blobs: git checks the commit out with exit 0 and leaves the
    # file out (astropy's IERS table: every test then tried to download it).
    inst = make_instance(tmp_path / "src")
    mirror = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "--mirror", "--quiet", inst["repo"], str(mirror)], check=True)
    blob = subprocess.run(
        ["git", "rev-parse", f"{inst['base_commit']}:calc/core.py"],
        cwd=mirror,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (mirror / "objects" / blob[:2] / blob[2:]).unlink()  # a clone of a fresh repository keeps loose objects
    cache = RepoCache(tmp_path / "cache", {inst["repo"]: str(mirror)}, online=False)
    with pytest.raises(
        WorkspaceError, match=r"lacks 1 file\(s\) of base_commit .* \(calc/core.py\): a partial copy"
    ):
        make_workspace(inst, tmp_path / "ws", cache)


def test_docker_image_and_missing_docker(monkeypatch):
    assert (
        instance_image("django__django-11099") == "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    )
    cmd = docker_run_command("psf__requests-1142", "c1")
    assert (
        cmd[:3] == ["docker", "run", "-d"]
        and "swebench/sweb.eval.x86_64.psf_1776_requests-1142:latest" in cmd
    )
    monkeypatch.setenv("PATH", "/nonexistent")
    problem = docker_problem()
    assert problem is not None and "\n" not in problem and "--env local" in problem
