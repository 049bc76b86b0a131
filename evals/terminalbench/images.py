"""Root file systems for a task's `FROM`, built from the distribution's archive with mmdebstrap
(the packages verified by apt against the archive's signing keys), cached per recipe key
(cache.py: built once, shared by concurrent runs), checked before each use.

A root is what the image has: the minimal system (`--variant=minbase`, the recipe's packages),
the image's apt and dpkg settings (Docker's `docker-clean`, no translations, the `-slim` /
minimized dpkg excludes), its package sources as the image writes them (deb822 where the image
does), empty package lists, `/root` with `.bashrc` and `.profile`, `/run/lock` (so `/var/lock`
resolves), Ubuntu's `ubuntu` user, and for `python:*` the interpreter at /usr/local
(pythons.py). The per-container files (/etc/hosts, /etc/hostname, /etc/resolv.conf) come from
container.py, as Docker mounts them.

Needs root, mmdebstrap and (for python images) patchelf; Ubuntu's keyring is fetched from the
Ubuntu archive and checked against its pinned SHA-256 (this machine's Debian has no ubuntu-keyring).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from clover.evals.terminalbench.cache import build_once, cache_dir
from clover.evals.terminalbench.pythons import (
    build_id,
    newest,
    runtime_packages,
    stage_image_python,
)
from clover.evals.terminalbench.recipes import Recipe

UBUNTU_KEYRING_DEB = (
    "http://archive.ubuntu.com/ubuntu/pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb",
    "36de43b15853ccae0028e9a767613770c704833f82586f28eb262f0311adb8a8",
)
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Docker's official images: apt keeps no .debs or caches, fetches no translations.
_APT_CONF = {
    "docker-clean": (
        'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb '
        '/var/cache/apt/*.bin || true"; };\nAPT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb '
        '/var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };\n'
        'Dir::Cache::pkgcache "";\nDir::Cache::srcpkgcache "";\n'
    ),
    "docker-autoremove-suggests": 'Apt::AutoRemove::SuggestsImportant "false";\n',
    "docker-no-languages": 'Acquire::Languages "none";\n',
    "docker-gzip-indexes": 'Acquire::GzipIndexes "true";\nAcquire::CompressionTypes::Order:: "gz";\n',
}
# What the slim / minimized images leave out (their /etc/dpkg/dpkg.cfg.d file).
_DPKG_EXCLUDES = [
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/groff/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/lintian/*",
    "path-exclude=/usr/share/linda/*",
    "path-exclude=/usr/share/locale/*/LC_MESSAGES/*.mo",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
]


class ImageError(RuntimeError):
    """The root could not be built; the message says which step and why."""


@dataclass(frozen=True)
class RootImage:
    """A root file system to start containers from, and the image's environment variables."""

    name: str
    rootfs: Path
    env: dict[str, str]
    glibc: tuple[int, int] = (0, 0)  # the C library's version in the root ((0, 0): unknown)
    host_dirs: tuple[str, ...] = ()  # the "host" image: this machine's folders, each overlaid at its path


def _python_for(recipe: Recipe) -> tuple[str, Path]:
    found = newest(recipe.python)
    if found is None:
        raise ImageError(
            f"{recipe.tag}: no local Python {recipe.python} to install at /usr/local "
            "(this machine's pyenv has none)"
        )
    return found


class ImageStore:
    """Builds and hands out roots (one per recipe key) under `<cache>/images`."""

    def __init__(self, cache: Path | None = None) -> None:
        self.cache = cache or cache_dir()

    def problem(self) -> str | None:
        if shutil.which("mmdebstrap") is None:
            return "mmdebstrap is not installed (apt-get install mmdebstrap)"
        return None

    def root(self, recipe: Recipe, log: Path | None = None) -> RootImage:
        problem = self.problem()
        if problem:
            raise ImageError(problem)
        extra = {}
        if recipe.python:
            version, prefix = _python_for(recipe)
            extra["python"] = build_id(prefix)
        path = self.cache / "images" / recipe.key(extra)
        build_once(path, lambda tmp: self._build(recipe, tmp, log), check=lambda p: _verify(p, recipe))
        manifest = json.loads((path / "manifest.json").read_text())
        env = {"PATH": DEFAULT_PATH, **dict(recipe.env)}
        if recipe.python:
            env["PYTHON_VERSION"] = manifest["python"]
        return RootImage(recipe.tag, path / "rootfs", env, tuple(manifest.get("glibc", (0, 0))))

    # ------------------------------------------------------------------ building

    def _keyring(self, recipe: Recipe) -> Path:
        if recipe.distro == "debian":
            return DEBIAN_KEYRING
        url, sha256 = UBUNTU_KEYRING_DEB

        def fetch(target: Path) -> None:
            target.mkdir(parents=True)
            deb = target / "keyring.deb"
            with urllib.request.urlopen(url, timeout=120) as response:  # noqa: S310 (a fixed http URL, pinned hash)
                deb.write_bytes(response.read())
            digest = hashlib.sha256(deb.read_bytes()).hexdigest()
            if digest != sha256:
                raise ImageError(f"{url}: SHA-256 {digest} is not the pinned {sha256}")
            subprocess.run(["dpkg-deb", "-x", str(deb), str(target / "x")], check=True, capture_output=True)
            shutil.copy2(
                target / "x/usr/share/keyrings/ubuntu-archive-keyring.gpg",
                target / "ubuntu-archive-keyring.gpg",
            )
            shutil.rmtree(target / "x")

        return (
            build_once(self.cache / "keyrings" / f"ubuntu-{sha256[:12]}", fetch)
            / "ubuntu-archive-keyring.gpg"
        )

    def _build(self, recipe: Recipe, target: Path, log: Path | None) -> None:
        target.mkdir(parents=True)
        rootfs = target / "rootfs"
        keyring = self._keyring(recipe)
        mirror, security = recipe.mirrors
        comps = " ".join(recipe.components)
        suites = [
            f"deb {mirror} {recipe.suite} {comps}",
            f"deb {mirror} {recipe.suite}-updates {comps}",
            f"deb {security} {recipe.suite}-security {comps}",
        ]
        keyring_pkg = "ubuntu-keyring" if recipe.distro == "ubuntu" else "debian-archive-keyring"
        packages = ["apt", keyring_pkg, *recipe.packages]  # Ubuntu's apt is not "required": minbase lacks it
        manifest: dict = {
            "tag": recipe.tag,
            "recipe": recipe.key(),
            "distro": recipe.distro,
            "suite": recipe.suite,
        }
        with tempfile.TemporaryDirectory(prefix="clover-image-") as tmp:
            hooks: list[str] = []
            if recipe.python:
                version, prefix = _python_for(recipe)
                stage = Path(tmp) / "local"
                stage_image_python(prefix, stage)
                libs = runtime_packages(prefix)
                manifest["python"] = version
                hooks += _python_hooks(stage, recipe.python, libs)
            hooks += _image_hooks(recipe)
            argv = [
                "mmdebstrap",
                "--mode=root",
                "--format=directory",
                "--variant=minbase",
                "--arch=amd64",
                f"--keyring={keyring}",
                f"--include={','.join(packages)}",
                *(f"--dpkgopt={rule}" for rule in (_DPKG_EXCLUDES if recipe.slim else [])),
                *(f"--customize-hook={hook}" for hook in hooks),
                recipe.suite,
                str(rootfs),
                *suites,
            ]
            # Its own mount namespace: whatever mmdebstrap mounts in the root dies with it.
            command = ["nice", "-n", "10", "unshare", "--mount", "--propagation", "private", "--", *argv]
            proc = subprocess.run(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        output = proc.stdout.decode("utf-8", "replace")
        (target / "build.log").write_text(shlex.join(command) + "\n" + output)
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a") as fh:
                fh.write(f"# building {recipe.tag} ({target.name})\n{output}\n")
        if proc.returncode != 0:
            tail = "\n".join(line for line in output.splitlines() if line.startswith(("E:", "W:")))[-600:]
            raise ImageError(
                f"mmdebstrap for {recipe.tag} exited with {proc.returncode}: {tail or output[-600:]}"
            )
        manifest["glibc"] = list(_glibc_of(rootfs))
        manifest["packages"] = _installed(rootfs)
        (target / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        problem = _verify(target, recipe, fresh=True)
        if problem:
            raise ImageError(f"{recipe.tag}: the new root fails its check: {problem}")


def _chroot(command: str) -> str:
    return f'chroot "$1" sh -ec {shlex.quote(command)}'


def _python_hooks(stage: Path, short: str, libs: list[str]) -> list[str]:
    """Install the staged /usr/local, the libraries it links (a t64-renamed package where the suite
    renamed it), ldconfig, pip from ensurepip — what the official python image's build leaves."""
    install = " ".join(shlex.quote(p) for p in libs)
    return [
        f'cp -a {shlex.quote(str(stage))}/. "$1/usr/local/"',
        _chroot(
            f"for p in {install}; do apt-get install -y --no-install-recommends $p >/dev/null 2>&1 "
            f"|| apt-get install -y --no-install-recommends ${{p}}t64 >/dev/null; done"
        ),
        _chroot(
            f"ldconfig && /usr/local/bin/python{short} -m ensurepip --default-pip >/dev/null && "
            f"cd /usr/local/bin && for n in pip pip3; do [ -e $n ] || ln -s pip{short} $n; done && "
            "find /usr/local -depth -name __pycache__ -type d -exec rm -rf {} + && "
            f"/usr/local/bin/python{short} -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, readline, uuid'"
        ),
    ]


def _sources(recipe: Recipe) -> tuple[str, str]:
    """(path, text) of the image's apt sources, as the official image writes them."""
    mirror, security = recipe.mirrors
    comps = " ".join(recipe.components)
    if recipe.distro == "ubuntu":
        key = "/usr/share/keyrings/ubuntu-archive-keyring.gpg"
        return (
            "/etc/apt/sources.list.d/ubuntu.sources",
            f"Types: deb\nURIs: {mirror}/\nSuites: {recipe.suite} {recipe.suite}-updates {recipe.suite}-backports\n"
            f"Components: {comps}\nSigned-By: {key}\n\nTypes: deb\nURIs: {security}/\n"
            f"Suites: {recipe.suite}-security\nComponents: {comps}\nSigned-By: {key}\n",
        )
    if recipe.suite == "bullseye":  # before bookworm the image had a one-line sources.list
        return (
            "/etc/apt/sources.list",
            f"deb {mirror} bullseye main\ndeb {security} bullseye-security main\n"
            f"deb {mirror} bullseye-updates main\n",
        )
    key = "/usr/share/keyrings/debian-archive-keyring." + ("pgp" if recipe.suite == "trixie" else "gpg")
    return (
        "/etc/apt/sources.list.d/debian.sources",
        f"Types: deb\nURIs: {mirror}\nSuites: {recipe.suite} {recipe.suite}-updates\nComponents: main\n"
        f"Signed-By: {key}\n\nTypes: deb\nURIs: {security}\nSuites: {recipe.suite}-security\n"
        f"Components: main\nSigned-By: {key}\n",
    )


def _image_hooks(recipe: Recipe) -> list[str]:
    path, text = _sources(recipe)
    hooks = [
        f'rm -f "$1/etc/apt/sources.list" && mkdir -p "$1/etc/apt/sources.list.d" && '
        f'printf %s {shlex.quote(text)} > "$1{path}"'
    ]
    for name, body in _APT_CONF.items():
        hooks.append(f'printf %s {shlex.quote(body)} > "$1/etc/apt/apt.conf.d/{name}"')
    if recipe.distro == "ubuntu" and recipe.suite == "noble":
        hooks.append(
            _chroot("useradd --uid 1000 --user-group --create-home --shell /bin/bash --comment Ubuntu ubuntu")
        )
    hooks.append(
        _chroot(
            "for f in .bashrc .profile; do [ -e /root/$f ] || cp /etc/skel/$f /root/$f; done; "
            "mkdir -p /run/lock && chmod 1777 /run/lock; : > /etc/hostname; "
            "printf '127.0.0.1\\tlocalhost\\n' > /etc/hosts; : > /etc/resolv.conf"
        )
    )
    return hooks


def _glibc_of(rootfs: Path) -> tuple[int, int]:
    for status in _dpkg_status(rootfs):
        if status.get("Package") == "libc6":
            major, minor = status.get("Version", "0.0").split("-")[0].split(".")[:2]
            return int(major), int(minor)
    return (0, 0)


def _dpkg_status(rootfs: Path) -> list[dict[str, str]]:
    text = (
        (rootfs / "var/lib/dpkg/status").read_text(errors="replace")
        if (rootfs / "var/lib/dpkg/status").is_file()
        else ""
    )
    records = []
    for block in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(" ")
        )
        if fields:
            records.append(fields)
    return records


def _installed(rootfs: Path) -> int:
    return sum("install ok installed" in r.get("Status", "") for r in _dpkg_status(rootfs))


def _verify(path: Path, recipe: Recipe, fresh: bool = False) -> str | None:
    """Why the cached root at `path` is not the recipe's (None when it is)."""
    rootfs = path / "rootfs"
    try:
        manifest = json.loads((path / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return "no manifest"
    if manifest.get("recipe") != recipe.key():
        return "built from another recipe"
    os_release = (rootfs / "etc/os-release").read_text() if (rootfs / "etc/os-release").is_file() else ""
    if f"VERSION_CODENAME={recipe.suite}" not in os_release:
        return f"/etc/os-release is not {recipe.distro} {recipe.suite}"
    for needed in (
        "bin/bash",
        "bin/tar",
        "usr/bin/env",
        "usr/bin/apt-get",
        "root/.bashrc",
        "root/.profile",
        "run/lock",
    ):
        if not (rootfs / needed).exists():
            return f"/{needed} is missing"
    if not fresh and _installed(rootfs) != manifest.get("packages"):
        return "its installed packages changed since it was built"
    if recipe.python and not (rootfs / f"usr/local/bin/python{recipe.python}").is_file():
        return f"/usr/local/bin/python{recipe.python} is missing"
    return None
