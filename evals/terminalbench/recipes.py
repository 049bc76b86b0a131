"""What a Dockerfile's `FROM` means here: a recipe for building that image's root file system from
the distribution's own archive (images.py builds and caches it), or the reason it cannot be built.

Known bases, as Docker Hub serves them today:
- `ubuntu:24.04` (noble; also `22.04`/jammy, `20.04`/focal, `latest`): Ubuntu's minimal image, with
  its dpkg excludes (no man pages or docs), apt's `docker-*` settings, the sources of
  `release`, `-updates`, `-backports` and `-security` (main restricted universe multiverse) and the
  `ubuntu` user (uid 1000) that the 23.04+ images have.
- `debian:13`/`trixie`, `12`/`bookworm`, `11`/`bullseye` (point releases and `-slim` too): Debian's
  image; `-slim` adds the dpkg excludes. A point release (`13.0`) gets the suite as it is now.
- `python:3.X[-slim][-bookworm|-trixie]`: Debian (trixie unless named) with CPython 3.X at
  /usr/local as the official image has it (pip, `python`/`pip` links, LANG=C.UTF-8). The CPython
  comes from this machine (pyenv's 3.X, copied in); the non-slim image adds buildpack-deps'
  packages.
- Terminal-Bench 1's base images (`ghcr.io/laude-institute/t-bench/ubuntu-24-04`,
  `.../python-3-13`): those images' bases with tmux and asciinema.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field

# Bump when what a recipe builds changes: every cached root is rebuilt once.
RECIPE_VERSION = 2

UBUNTU_SUITES = {
    "24.04": "noble",
    "noble": "noble",
    "latest": "noble",
    "22.04": "jammy",
    "jammy": "jammy",
    "20.04": "focal",
    "focal": "focal",
}
DEBIAN_SUITES = {
    "13": "trixie",
    "trixie": "trixie",
    "stable": "trixie",
    "latest": "trixie",
    "12": "bookworm",
    "bookworm": "bookworm",
    "11": "bullseye",
    "bullseye": "bullseye",
}
PYTHON_DEFAULT_SUITE = "trixie"  # what python:3.X and python:3.X-slim are built on today

UBUNTU_MIRROR, UBUNTU_SECURITY = "http://archive.ubuntu.com/ubuntu", "http://security.ubuntu.com/ubuntu"
DEBIAN_MIRROR, DEBIAN_SECURITY = "http://deb.debian.org/debian", "http://deb.debian.org/debian-security"

# buildpack-deps (curl, scm and the full layer): what a non-slim python:3.X image has beyond Debian's.
_BUILDPACK = (
    "ca-certificates",
    "curl",
    "gnupg",
    "netbase",
    "wget",
    "git",
    "mercurial",
    "openssh-client",
    "subversion",
    "procps",
    "autoconf",
    "automake",
    "bzip2",
    "dpkg-dev",
    "file",
    "g++",
    "gcc",
    "libbz2-dev",
    "libc6-dev",
    "libcurl4-openssl-dev",
    "libdb-dev",
    "libevent-dev",
    "libffi-dev",
    "libgdbm-dev",
    "libglib2.0-dev",
    "libgmp-dev",
    "libjpeg-dev",
    "libkrb5-dev",
    "liblzma-dev",
    "libncurses-dev",
    "libpng-dev",
    "libpq-dev",
    "libreadline-dev",
    "libsqlite3-dev",
    "libssl-dev",
    "libtool",
    "libwebp-dev",
    "libxml2-dev",
    "libxslt-dev",
    "libyaml-dev",
    "make",
    "patch",
    "unzip",
    "xz-utils",
    "zlib1g-dev",
)
_TBENCH1_TOOLS = ("tmux", "asciinema")


class UnknownImage(ValueError):
    """No recipe builds this image here; the message says why, in one line."""


@dataclass(frozen=True)
class Recipe:
    tag: str  # the reference as written (for messages)
    distro: str  # "ubuntu" | "debian"
    suite: str
    slim: bool  # dpkg excludes for docs, man pages and translations, as the image has
    python: str = ""  # "3.13": CPython at /usr/local
    packages: tuple[str, ...] = ()  # installed on top of the minimal system
    env: tuple[tuple[str, str], ...] = ()  # the image's ENV

    @property
    def mirrors(self) -> tuple[str, str]:
        return (
            (UBUNTU_MIRROR, UBUNTU_SECURITY) if self.distro == "ubuntu" else (DEBIAN_MIRROR, DEBIAN_SECURITY)
        )

    @property
    def components(self) -> tuple[str, ...]:
        return ("main", "restricted", "universe", "multiverse") if self.distro == "ubuntu" else ("main",)

    def key(self, extra: dict | None = None) -> str:
        """The cache key: everything that decides the root's contents (and the recipe code's version)."""
        blob = json.dumps({"v": RECIPE_VERSION, **asdict(self), "tag": "", **(extra or {})}, sort_keys=True)
        python = f"-py{self.python}" if self.python else ""
        return f"{self.distro}-{self.suite}{python}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


@dataclass(frozen=True)
class ToolImage:
    """A distroless image that only carries files (Astral's uv image: /uv and /uvx)."""

    tag: str
    tool: str  # "uv"
    version: str  # "" = the newest release
    files: dict[str, str] = field(default_factory=dict)  # path in the image -> executable name


def split_reference(ref: str) -> tuple[str, str]:
    """('ubuntu', '24.04') from 'docker.io/library/ubuntu:24.04'; a digest is dropped (not verifiable here)."""
    ref = ref.strip().split("@", 1)[0]
    name, tag = ref, "latest"
    if ":" in ref.rsplit("/", 1)[-1]:
        name, _, tag = ref.rpartition(":")
    name = re.sub(r"^(?:docker\.io/|index\.docker\.io/|registry-1\.docker\.io/)", "", name.lower())
    return name.removeprefix("library/"), tag


_PYTHON_TAG = re.compile(r"(\d+\.\d+)(?:\.\d+)?(-slim)?(?:-(bookworm|trixie|bullseye))?")
_UV_TAG = re.compile(r"(?:latest|(\d+\.\d+\.\d+))")


def resolve(ref: str) -> Recipe:
    """The recipe for a FROM reference; UnknownImage with the reason when there is none."""
    name, tag = split_reference(ref)
    if name == "ubuntu":
        suite = UBUNTU_SUITES.get(tag)
        if suite:
            return Recipe(ref, "ubuntu", suite, slim=True)
    elif name == "debian":
        slim = tag.endswith("-slim")
        base = tag.removesuffix("-slim")
        suite = DEBIAN_SUITES.get(base) or DEBIAN_SUITES.get(re.split(r"[.-]", base)[0])
        if suite:
            return Recipe(ref, "debian", suite, slim=slim)
    elif name == "python":
        match = _PYTHON_TAG.fullmatch(tag)
        if match:
            version, slim, suite = (
                match.group(1),
                bool(match.group(2)),
                match.group(3) or PYTHON_DEFAULT_SUITE,
            )
            packages = ("ca-certificates", "netbase", "tzdata") + (() if slim else tuple(_BUILDPACK))
            return Recipe(
                ref, "debian", suite, slim=slim, python=version, packages=packages, env=(("LANG", "C.UTF-8"),)
            )
    elif name == "ghcr.io/laude-institute/t-bench/ubuntu-24-04":
        return Recipe(ref, "ubuntu", "noble", slim=True, packages=_TBENCH1_TOOLS)
    elif name == "ghcr.io/laude-institute/t-bench/python-3-13":
        return Recipe(
            ref,
            "debian",
            "bookworm",
            slim=True,
            python="3.13",
            packages=("ca-certificates", "netbase", "tzdata", *_TBENCH1_TOOLS),
            env=(("LANG", "C.UTF-8"),),
        )
    raise UnknownImage(
        f"no recipe for the base image {ref} (known: ubuntu, debian, python, "
        "Terminal-Bench 1's ubuntu-24-04 and python-3-13)"
    )


def resolve_tool(ref: str) -> ToolImage | None:
    """A `COPY --from=<image>` source that only carries files, or None when `ref` is no such image."""
    name, tag = split_reference(ref)
    if name == "ghcr.io/astral-sh/uv":
        match = _UV_TAG.fullmatch(tag)
        if match:
            return ToolImage(ref, "uv", match.group(1) or "", {"/uv": "uv", "/uvx": "uvx"})
    return None
