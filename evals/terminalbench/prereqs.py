"""Everything the local Terminal-Bench runner needs on this machine, checked at once before any
task runs: the programs (bubblewrap, util-linux, mmdebstrap, slirp4netns, patchelf, ...), the
kernel features (overlay mounts, namespaces, /dev/net/tun), root, free disk for the cached roots,
and what the chosen tasks' images need (a Debian keyring, a local CPython for `python:X.Y`).

Found one at a time, a fresh machine took one run per missing package; `check` lists all of them,
with the one command that installs the ones a package provides, and `install` runs that command
(apt, as root) where it can.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from clover.evals.terminalbench.images import DEBIAN_KEYRING
from clover.evals.terminalbench.tasks import DockerSpec, Task

# (program, Debian/Ubuntu package, what the runner uses it for, when: always | roots (built from an
# archive, not --image host) | pythons (a python:X.Y root, or the `uv -p 3.X` stand-ins))
PROGRAMS = (
    ("bwrap", "bubblewrap", "runs each task's container", "always"),
    ("unshare", "util-linux", "the container's namespaces", "always"),
    ("nsenter", "util-linux", "commands inside the container", "always"),
    ("env", "coreutils", "commands start with every signal at its default (8.31 or later)", "always"),
    ("tar", "tar", "files in and out of the container", "always"),
    ("slirp4netns", "slirp4netns", "outside access for the tasks that allow the internet", "always"),
    ("mmdebstrap", "mmdebstrap", "a root file system per FROM image", "roots"),
    ("dpkg-deb", "dpkg", "Ubuntu's archive keyring, the libraries a python image links", "roots"),
    ("patchelf", "patchelf", "python:X.Y images and the stand-ins for `uv -p 3.X`", "pythons"),
)
MIN_FREE_BYTES = 5 * 2**30  # a few cached roots (170-300 MB each) and what the tasks write


@dataclass(frozen=True)
class Missing:
    """One prerequisite this machine lacks: what, why, and the package or step that provides it."""

    what: str
    why: str
    package: str = ""  # the apt package that installs it ("" where none does)
    fix: str = ""  # what to do where no package does it

    def line(self) -> str:
        how = f"apt package {self.package}" if self.package else self.fix
        return f"{self.what}: {self.why} ({how})"


@dataclass
class Machine:
    """What the check looks at; the defaults are this machine (tests give another PATH or root)."""

    which: Callable[[str], str | None] = shutil.which
    euid: Callable[[], int] = os.geteuid
    exists: Callable[[Path], bool] = Path.exists
    overlay: Callable[[], bool] = lambda: _overlay_available()
    free_bytes: Callable[[Path], int] = lambda path: shutil.disk_usage(_existing(path)).free
    pythons: Callable[[str], object] = lambda short: _pyenv_python(short)
    container: Callable[[], str | None] = lambda: _container_problem()


def _overlay_available() -> bool:
    """The kernel has overlayfs: registered, or a module the first mount loads."""
    try:
        if "overlay" in Path("/proc/filesystems").read_text():
            return True
    except OSError:
        pass
    return any(Path("/lib/modules", os.uname().release).glob("kernel/fs/overlayfs/overlay.ko*"))


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _pyenv_python(short: str) -> object:
    from clover.evals.terminalbench.pythons import newest

    return newest(short)


def _container_problem() -> str | None:
    from clover.evals.terminalbench.container import container_problem

    return container_problem()


def _bases(spec: DockerSpec) -> Iterable[str]:
    yield spec.base
    for stage in spec.stages:
        yield from _bases(stage)


def image_needs(tasks: list[Task], image: str | None) -> tuple[set[str], set[str]]:
    """(distributions, CPython X.Y versions) the tasks' roots are built from (none for the host image)."""
    from clover.evals.terminalbench.recipes import UnknownImage, resolve

    distros: set[str] = set()
    pythons: set[str] = set()
    if image == "host":
        return distros, pythons
    for task in tasks:
        for base in [image] if image else _bases(task.docker):
            try:
                recipe = resolve(base)
            except UnknownImage:
                continue  # skipped with its reason when the task runs
            distros.add(recipe.distro)
            if recipe.python:
                pythons.add(recipe.python)
    return distros, pythons


def check(
    tasks: list[Task], image: str | None = None, cache: Path | None = None, machine: Machine | None = None
) -> list[Missing]:
    """Every prerequisite of running `tasks` here that this machine lacks (empty: none)."""
    from clover.evals.terminalbench.cache import cache_dir
    from clover.evals.terminalbench.toolchain import uses_uv

    m = machine or Machine()
    distros, pythons = image_needs(tasks, image)
    needed = {"always"} | ({"roots"} if distros else set())
    if pythons or any(uses_uv(t.context_dir, t.tests_dir, t.path / "solution") for t in tasks):
        needed.add("pythons")
    missing: list[Missing] = []
    for program, package, why, when in PROGRAMS:
        if when in needed and m.which(program) is None:
            missing.append(Missing(program, why, package))
    if "debian" in distros and not m.exists(DEBIAN_KEYRING):
        missing.append(
            Missing(
                str(DEBIAN_KEYRING),
                "checks Debian's archive for debian and python roots",
                "debian-archive-keyring",
            )
        )
    for short in sorted(pythons):
        if m.pythons(short) is None:
            missing.append(
                Missing(
                    f"CPython {short}",
                    f"the /usr/local of python:{short} images (a pyenv build of {short} is copied in)",
                    fix=f"pyenv install {short}",
                )
            )
    if m.euid() != 0:
        missing.append(Missing("root", "the runner mounts overlays, as Docker does", fix="run it as root"))
    if not m.overlay():
        missing.append(Missing("overlay file system", "each task's writable layer", fix="modprobe overlay"))
    if not m.exists(Path("/dev/net/tun")):
        missing.append(Missing("/dev/net/tun", "slirp4netns's outside access", fix="modprobe tun"))
    where = cache or cache_dir()
    free = m.free_bytes(where)
    if free < MIN_FREE_BYTES:
        missing.append(
            Missing(
                f"disk space under {where}",
                f"{free / 2**30:.1f} GiB free, {MIN_FREE_BYTES / 2**30:.0f} GiB wanted for the roots and the tasks",
                fix="free some, or point CLOVER_TBENCH_CACHE at a larger disk",
            )
        )
    # The one check only a real container makes (namespaces and mounts work here), once the rest holds.
    if not missing and (problem := m.container()):
        missing.append(
            Missing("containers", problem, fix="mount, PID and network namespaces and overlay mounts here")
        )
    return missing


def install_command(missing: list[Missing]) -> str:
    """The one command that installs every missing package ('' when no package is missing)."""
    packages = list(dict.fromkeys(item.package for item in missing if item.package))
    if not packages:
        return ""
    return "apt-get update && apt-get install -y " + " ".join(packages)


def report(missing: list[Missing]) -> str:
    """Everything missing, a line each, then the command that installs the packages among them."""
    lines = [f"the local Terminal-Bench runner lacks {len(missing)} prerequisite(s) here:"]
    lines += [f"  - {item.line()}" for item in missing]
    if command := install_command(missing):
        lines.append(f"install them with: {command}   (or run again with --install-prereqs, as root)")
    return "\n".join(lines)


class InstallError(RuntimeError):
    """The packages could not be installed; the message says why in one line."""


def install(missing: list[Missing], machine: Machine | None = None, log: Path | None = None) -> list[str]:
    """Install the missing packages with apt (as root); returns the packages installed."""
    m = machine or Machine()
    command = install_command(missing)
    if not command:
        return []
    if m.euid() != 0:
        raise InstallError(f"installing packages needs root: run `sudo sh -c '{command}'`")
    if m.which("apt-get") is None:
        raise InstallError("no apt-get here: install " + ", ".join(i.package for i in missing if i.package))
    proc = subprocess.run(
        ["sh", "-c", command],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        capture_output=True,
        text=True,
    )
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[-1]
        raise InstallError(f"`{command}` failed: {last}")
    return list(dict.fromkeys(item.package for item in missing if item.package))
