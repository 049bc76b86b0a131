"""`clover eval terminalbench` checks every prerequisite once, before any task runs, and lists all
that is missing at once with the one command that installs the packages among them (on a fresh
machine it used to take one run per missing package)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from clover.evals.terminalbench import prereqs
from clover.evals.terminalbench.container import container_problem
from clover.evals.terminalbench.tasks import find_tasks

TASKS = Path(__file__).parent / "tbench_tasks"
ROOT = Path(__file__).resolve().parents[1]


def test_a_path_without_the_tools_lists_every_missing_one_at_once(tmp_path):
    # A real `clover eval terminalbench` with a PATH that holds only bash: every program the runner
    # needs is missing, and all of them are named in one go, before any task starts.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "bash").symlink_to("/bin/bash")
    env = {**os.environ, "PATH": str(bin_dir), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "clover",
            "eval",
            "terminalbench",
            "--tasks",
            str(TASKS),
            "--task",
            "install-package",
        ]
        + ["--oracle", "-o", str(tmp_path / "out")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr
    for program in ("bwrap", "unshare", "nsenter", "env", "tar", "slirp4netns", "mmdebstrap", "dpkg-deb"):
        assert f"  - {program}: " in err, (program, err)
    assert (
        "install them with: apt-get update && apt-get install -y bubblewrap util-linux coreutils tar slirp4netns "
        in err
    )
    assert "mmdebstrap dpkg" in err and "--install-prereqs" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()  # no task ran


def test_every_kind_of_prerequisite_is_named_with_its_fix(tmp_path):
    tasks = find_tasks(Path(__file__).parent / "tbench_tasks" / "_extra", [])  # a python:X.Y image
    machine = prereqs.Machine(
        which=lambda name: None if name in ("patchelf", "mmdebstrap") else f"/usr/bin/{name}",
        euid=lambda: 1000,
        exists=lambda path: False,
        overlay=lambda: False,
        free_bytes=lambda path: 2**30,
        pythons=lambda short: None,
        container=lambda: "never asked while something else is missing",
    )
    missing = prereqs.check(tasks, cache=tmp_path, machine=machine)
    text = prereqs.report(missing)
    lines = [item.line() for item in missing]
    assert [item.what for item in missing] == [
        "mmdebstrap",
        "patchelf",
        str(prereqs.DEBIAN_KEYRING),
        "CPython 3.12",
        "root",
        "overlay file system",
        "/dev/net/tun",
        f"disk space under {tmp_path}",
    ]
    assert "CPython 3.12: " in lines[3] and lines[3].endswith("(pyenv install 3.12)")
    assert "1.0 GiB free" in lines[7]
    assert "apt-get update && apt-get install -y mmdebstrap patchelf debian-archive-keyring" in text
    assert "never asked" not in text


def test_the_host_image_needs_no_root_builder_and_a_complete_machine_gets_the_container_probe():
    tasks = find_tasks(TASKS, ["hello-file"])
    machine = prereqs.Machine(
        which=lambda name: None if name == "mmdebstrap" else f"/usr/bin/{name}",
        euid=lambda: 0,
        exists=lambda path: True,
        overlay=lambda: True,
        free_bytes=lambda path: 100 * 2**30,
        pythons=lambda short: ("3.13.0", Path("/x")),
        container=lambda: "cannot start a container here: bwrap: No permissions to create new namespace",
    )
    missing = prereqs.check(tasks, image="host", machine=machine)
    assert [item.what for item in missing] == ["containers"]  # mmdebstrap is not needed for the host image
    assert "No permissions to create new namespace" in missing[0].line()
    assert prereqs.install_command(missing) == ""


def test_installing_needs_root_and_says_so_in_one_line():
    missing = [prereqs.Missing("bwrap", "x", "bubblewrap")]
    machine = prereqs.Machine(euid=lambda: 1000)
    try:
        prereqs.install(missing, machine)
    except prereqs.InstallError as exc:
        assert (
            str(exc)
            == "installing packages needs root: run `sudo sh -c 'apt-get update && apt-get install -y bubblewrap'`"
        )
    else:
        raise AssertionError("no error without root")


def readme_fresh_machine_line() -> str:
    """The README's one command for a fresh machine with only Python (Benchmarks section)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    [line] = [ln for ln in text.splitlines() if "clover eval terminalbench --install-prereqs" in ln]
    return line


def test_the_readmes_fresh_machine_command_sets_up_as_the_first_ones_do():
    line = readme_fresh_machine_line()
    setup, _, run = line.partition(" && clover ")
    assert setup == "python3 -m venv .venv && . .venv/bin/activate && pip install -e ."
    assert run.startswith("eval terminalbench --install-prereqs --tasks tests/tbench_tasks --task ")


@pytest.mark.slow
def test_the_readmes_fresh_machine_command_runs_its_task_here(tmp_path):
    # Its `clover ...` part on this checkout (the venv part is this test's own environment): the
    # prerequisites hold or get installed, the task's root is built (or taken from the cache), the
    # oracle passes.
    problem = container_problem()
    if problem is not None:
        pytest.skip(f"no local container: {problem}")
    args = shlex.split(readme_fresh_machine_line().partition(" && clover ")[2])
    proc = subprocess.run(
        [sys.executable, "-m", "clover", *args, "-o", str(tmp_path / "out")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "passed 1/1 judged" in proc.stdout
