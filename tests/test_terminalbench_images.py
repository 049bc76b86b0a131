"""Roots per FROM tag: what a tag means (recipes.py), the build cache (cache.py: built once, shared
by concurrent runs, checked before use), and, marked slow, the real roots built from Ubuntu's and
Debian's archives with mmdebstrap running the runner's fixture tasks as Docker would (a pinned
Ubuntu package, /run/lock, a login shell's dotfiles, two tasks on one port, COPY --from uv, a
multi-stage build, the official python image's /usr/local)."""

from __future__ import annotations

import shutil
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from clover.evals.terminalbench.cache import STAMP, build_once
from clover.evals.terminalbench.recipes import PYTHON_DEFAULT_SUITE, UnknownImage, resolve, resolve_tool

TASKS = Path(__file__).parent / "tbench_tasks"


def test_what_each_from_tag_of_terminal_bench_2_builds():
    noble = resolve("ubuntu:24.04")
    assert (noble.distro, noble.suite, noble.slim, noble.python) == ("ubuntu", "noble", True, "")
    assert resolve("docker.io/library/ubuntu:noble@sha256:" + "0" * 64).key() == noble.key()
    assert [
        (r.suite, r.slim) for r in map(resolve, ("debian:13.0-slim", "debian:bullseye-slim ", "debian:12"))
    ] == [("trixie", True), ("bullseye", True), ("bookworm", False)]
    slim = resolve("python:3.13-slim-bookworm")
    assert (slim.suite, slim.slim, slim.python, dict(slim.env)["LANG"]) == (
        "bookworm",
        True,
        "3.13",
        "C.UTF-8",
    )
    assert "ca-certificates" in slim.packages and "gcc" not in slim.packages
    full = resolve("python:3.11")  # buildpack-deps underneath: compilers, git, curl
    assert (full.suite, full.slim, full.python) == (
        PYTHON_DEFAULT_SUITE,
        False,
        "3.11",
    ) and "gcc" in full.packages
    assert resolve("python:3.10-slim-bookworm").key() != resolve("python:3.11-slim").key()
    tb1 = resolve("ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest")
    assert tb1.suite == "noble" and "tmux" in tb1.packages
    for unknown in ("alpine:3.19", "ubuntu:18.10", "nvidia/cuda:12.4.0-base-ubuntu22.04", "python:latest"):
        with pytest.raises(UnknownImage, match="no recipe for the base image"):
            resolve(unknown)
    uv = resolve_tool("ghcr.io/astral-sh/uv:0.8.14")
    assert (uv.tool, uv.version, uv.files) == ("uv", "0.8.14", {"/uv": "uv", "/uvx": "uvx"})
    assert resolve_tool("ghcr.io/astral-sh/uv:latest").version == "" and resolve_tool("ubuntu:24.04") is None


def test_a_cache_entry_is_built_once_by_concurrent_runs(tmp_path):
    builds = []

    def build(target: Path) -> None:
        builds.append(target)
        time.sleep(0.3)  # long enough for every other thread to be waiting on the lock
        target.mkdir()
        (target / "root.txt").write_text("built\n")

    results = []
    threads = [
        threading.Thread(target=lambda: results.append(build_once(tmp_path / "entry", build)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and results == [tmp_path / "entry"] * 4
    assert (tmp_path / "entry" / "root.txt").read_text() == "built\n" and (
        tmp_path / "entry" / STAMP
    ).is_file()
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == [
        "entry"
    ]  # no temporary left


def test_a_failed_or_distrusted_build_leaves_nothing_half_made(tmp_path):
    def broken(target: Path) -> None:
        target.mkdir()
        (target / "half.txt").write_text("half\n")
        raise OSError("the archive went away")

    with pytest.raises(OSError, match="went away"):
        build_once(tmp_path / "entry", broken)
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []

    def good(target: Path) -> None:
        target.mkdir()
        (target / "v").write_text(str(len(list(tmp_path.glob("entry*")))))

    build_once(tmp_path / "entry", good)
    # A check that distrusts the cached copy (its recipe changed, its files were touched) rebuilds it.
    (tmp_path / "entry" / "v").write_text("tampered")
    build_once(
        tmp_path / "entry", good, check=lambda p: "tampered" if (p / "v").read_text() == "tampered" else None
    )
    assert (tmp_path / "entry" / "v").read_text() != "tampered"


def test_a_cached_root_is_checked_before_use(tmp_path):
    """A root is used only when it is the recipe's: its manifest's key, /etc/os-release, the files
    every image has, and the installed packages it was built with."""
    import json

    from clover.evals.terminalbench.images import _verify

    recipe = resolve("ubuntu:24.04")
    rootfs = tmp_path / "rootfs"
    for path in ("bin/bash", "bin/tar", "usr/bin/env", "usr/bin/apt-get", "root/.bashrc", "root/.profile"):
        (rootfs / path).parent.mkdir(parents=True, exist_ok=True)
        (rootfs / path).write_text("")
    (rootfs / "run/lock").mkdir(parents=True)
    (rootfs / "etc").mkdir()
    (rootfs / "etc/os-release").write_text("NAME=Ubuntu\nVERSION_CODENAME=noble\n")
    (rootfs / "var/lib/dpkg").mkdir(parents=True)
    (rootfs / "var/lib/dpkg/status").write_text(
        "Package: bash\nStatus: install ok installed\n\nPackage: apt\nStatus: install ok installed\n"
    )
    (tmp_path / "manifest.json").write_text(json.dumps({"recipe": recipe.key(), "packages": 2}))
    assert _verify(tmp_path, recipe) is None
    assert _verify(tmp_path, resolve("ubuntu:22.04")) == "built from another recipe"
    (rootfs / "var/lib/dpkg/status").write_text("Package: bash\nStatus: install ok installed\n")
    assert _verify(tmp_path, recipe) == "its installed packages changed since it was built"
    (rootfs / "usr/bin/apt-get").unlink()
    assert _verify(tmp_path, recipe) == "/usr/bin/apt-get is missing"
    (rootfs / "etc/os-release").write_text("VERSION_CODENAME=bookworm\n")
    assert _verify(tmp_path, recipe) == "/etc/os-release is not ubuntu noble"


# --------------------------------------------------------------------------- real roots (slow)


def _archives_reachable() -> str | None:
    from clover.evals.terminalbench.container import container_problem

    problem = container_problem()
    if problem:
        return problem
    for tool in ("mmdebstrap", "slirp4netns", "patchelf"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    for url in (
        "http://archive.ubuntu.com/ubuntu/dists/noble/Release",
        "http://deb.debian.org/debian/dists/bookworm/Release",
    ):
        try:
            urllib.request.urlopen(url, timeout=10).close()  # noqa: S310 (fixed archive URLs)
        except OSError as exc:
            return f"{url}: {exc}"
    return None


@pytest.mark.slow
def test_the_runner_fixtures_pass_on_their_real_images(tmp_path):
    """Every runner failure of the issue, on a root built from Ubuntu's archive (a cold cache builds
    it: about a minute; Docker-era behaviour each fixture checks is in its tests/test.sh)."""
    problem = _archives_reachable()
    if problem:
        pytest.skip(problem)
    from clover.evals.terminalbench.launch import Launch
    from clover.evals.terminalbench.local_runner import run_tasks
    from clover.evals.terminalbench.tasks import find_tasks
    from clover.settings import Settings
    from tests.test_terminalbench_runner import FakeResolver

    settings = Settings(mode="yolo", checkpoints=False, live=False, command_timeout=30)
    tasks = find_tasks(TASKS / "_runner")
    results = run_tasks(
        [t for t in tasks if t.id != "needs-a-host"],
        settings=settings,
        model_factory=None,
        out_dir=tmp_path,
        workers=2,
        launch=Launch(),
    )
    verdicts = {r.id: (r.status, r.reason) for r in results}
    assert verdicts == {
        name: ("passed", "")
        for name in (
            "copy-from-uv",
            "login-dotfiles",
            "multi-stage",
            "pinned-ubuntu-package",
            "run-lock",
            "same-port-a",
            "same-port-b",
        )
    }, verdicts
    assert (
        "VERSION_CODENAME=noble"
        in (tmp_path / "pinned-ubuntu-package/logs/verifier/test-stdout.txt").read_text()
    )
    resolver = FakeResolver({})  # no name resolves: the host it needs is named
    try:
        [needs] = run_tasks(
            [t for t in tasks if t.id == "needs-a-host"],
            settings=settings,
            model_factory=None,
            out_dir=tmp_path / "offline",
            launch=Launch(resolvers=[resolver.address]),
        )
    finally:
        resolver.close()
    assert needs.status == "needs-internet" and needs.reason.startswith(
        "needs the internet: downloads.clover-unreachable.org"
    ), needs.reason


@pytest.mark.slow
def test_a_python_image_has_its_interpreter_at_usr_local(tmp_path):
    """FROM python:3.12-slim-bookworm: Debian 12 with this machine's CPython 3.12 at /usr/local, pip
    from ensurepip, the build's `pip install` of a local wheel and the tests' `python` as in Docker."""
    problem = _archives_reachable()
    if problem:
        pytest.skip(problem)
    from clover.evals.terminalbench.launch import Launch
    from clover.evals.terminalbench.local_runner import run_tasks
    from clover.evals.terminalbench.pythons import newest
    from clover.evals.terminalbench.tasks import find_tasks
    from clover.settings import Settings

    if newest("3.12") is None:
        pytest.skip("no local CPython 3.12 (pyenv) to install in the image")
    settings = Settings(mode="yolo", checkpoints=False, live=False, command_timeout=30)
    [result] = run_tasks(
        find_tasks(TASKS / "_extra" / "python-image"),
        settings=settings,
        model_factory=None,
        out_dir=tmp_path,
        launch=Launch(),
    )
    assert (result.status, result.reward) == ("passed", 1.0), result.reason
