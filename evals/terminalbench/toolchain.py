"""Stand-ins for what task scripts fetch from hosts this machine may not reach, each put where the
original puts it, so the script's next line works as it would online:

- Astral's uv installer (`curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh` downloads uv from
  GitHub): before the step whose script runs it (build, solution or tests), that uv version (from
  PyPI's `uv` wheel, cached) goes to /root/.local/bin with the installer's `env` script. The
  installer still runs, and still fails where astral.sh is unreachable; `astral.sh` is then not
  counted as a host the task needed (STAND_IN_HOSTS).
- `COPY --from=ghcr.io/astral-sh/uv:X` (a distroless image holding /uv and /uvx): the same
  binaries, from PyPI.
- The CPython builds `uv -p 3.X` downloads from GitHub: this machine's (pyenv's), made portable
  (pythons.py), mounted read-only at /opt/clover-python/X.Y.Z with `python3.X` launchers in
  /opt/clover-python/bin at the END of PATH, so an image's own Python comes first. Only where the
  root's C library is at least this machine's.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from clover.evals.terminalbench import pythons
from clover.evals.terminalbench.cache import build_once, cache_dir

PYTHON_DIR = pythons.PORTABLE_ROOT
STAND_IN_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
STAND_IN_HOSTS = {"astral.sh"}  # served here by a stand-in: a failed lookup of it costs the task nothing
_INSTALLER = re.compile(r"astral\.sh/uv/(?:(\d+\.\d+\.\d+)/)?install\.sh")
_USES_UV = re.compile(r"astral\.sh/uv|(?<![\w.-])uvx?(?![\w.-])")
_ENV_SCRIPT = (
    '#!/bin/sh\ncase ":${PATH}:" in\n  *:"$HOME/.local/bin":*) ;;\n  *) export '
    'PATH="$HOME/.local/bin:$PATH" ;;\nesac\n'
)


def _texts(*folders: Path):
    for folder in folders:
        if not Path(folder).exists():
            continue
        paths = [Path(folder)] if Path(folder).is_file() else Path(folder).rglob("*")
        for path in (p for p in paths if p.is_file() and p.stat().st_size < 1_000_000):
            try:
                yield path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue


def uses_uv(*folders: Path) -> bool:
    """Whether any text file in these folders (tests, solution, build context) mentions uv."""
    return any(_USES_UV.search(text) for text in _texts(*folders))


def installer_version(*folders: Path) -> str | None:
    """The uv version Astral's installer would install for these files' scripts ("" = the newest),
    or None when none of them runs the installer."""
    for text in _texts(*folders):
        match = _INSTALLER.search(text)
        if match:
            return match.group(1) or ""
    return None


def uv_dist(version: str = "", cache: Path | None = None) -> Path:
    """A folder with uv and uvx of `version` ("" = the newest), from PyPI's wheel (built once)."""

    def fetch(target: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="clover-uv-") as tmp:
            spec = f"uv=={version}" if version else "uv"
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    "--only-binary=:all:",
                    spec,
                    "-d",
                    tmp,
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
            wheels = glob.glob(f"{tmp}/uv-*.whl")
            if proc.returncode != 0 or not wheels:
                raise OSError(f"cannot download {spec} from PyPI: {proc.stderr.strip()[-300:]}")
            target.mkdir(parents=True)
            with zipfile.ZipFile(wheels[0]) as wheel:
                for name in wheel.namelist():
                    if re.search(r"\.data/scripts/uvx?$", name):
                        exe = target / Path(name).name
                        exe.write_bytes(wheel.read(name))
                        exe.chmod(0o755)
        if not (target / "uv").is_file():
            raise OSError(f"the uv wheel for {version or 'the newest release'} has no uv binary")

    return build_once((cache or cache_dir()) / "tools" / f"uv-{version or 'latest'}", fetch)


def install_uv(box, version: str = "") -> None:
    """Put uv, uvx and the installer's env script in the container's /root/.local/bin (box: a
    TaskContainer), unless uv is there already."""
    if box.exec("[ -x /root/.local/bin/uv ]", timeout=30)[0] == 0:
        return
    dist = uv_dist(version)
    for name in ("uv", "uvx"):
        if (dist / name).is_file():
            box.put(dist / name, f"/root/.local/bin/{name}")
    box.put_bytes(_ENV_SCRIPT.encode(), "/root/.local/bin/env", 0o644)


def python_binds(
    glibc: tuple[int, int], cache: Path | None = None, versions: tuple[str, ...] = STAND_IN_PYTHONS
) -> list[tuple[Path, str]]:
    """(host, container) read-only mounts of the portable interpreters and their PATH folder, for a
    root whose C library is `glibc` (none when it is older than this machine's)."""
    if glibc < pythons.host_glibc():
        return []
    cache = cache or cache_dir()
    binds, names = [], {}
    for short in versions:
        found = pythons.newest(short)
        if found is None:
            continue
        version, prefix = found
        portable = pythons.portable_python(prefix, cache)
        binds.append((portable, f"{PYTHON_DIR}/{version}"))
        names[f"python{short}"] = f"{PYTHON_DIR}/{version}/bin/python{short}"
    if not binds:
        return []

    def links(target: Path) -> None:
        # Scripts, not symlinks: a venv made from a symlink's path (uv's) would look for the standard
        # library beside the link; exec'd by its real path, the interpreter reports that path.
        target.mkdir(parents=True)
        for name, path in names.items():
            (target / name).write_text(f'#!/bin/sh\nexec {path} "$@"\n')
            (target / name).chmod(0o755)

    bin_dir = build_once(cache / "pythons" / f"launchers-{_digest(str(sorted(names.items())))}", links)
    return [*binds, (bin_dir, f"{PYTHON_DIR}/bin")]


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:12]


# How this machine reaches the package registries (a proxy, a private CA): a task's pip, apt, curl
# and uv inside the container need the same, as they would on a Docker host configured for them.
_PROXY_VARS = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "PIP_INDEX_URL",
)
_CA_VARS = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "NODE_EXTRA_CA_CERTS",
)
CA_BUNDLE = "/usr/local/share/ca-certificates/clover-host/bundle.pem"  # where the machine's bundle goes in


def network_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The proxy settings as they are, and every CA-bundle variable pointing at CA_BUNDLE (the
    container gets this machine's bundle there: `ca_files`)."""
    env = dict(os.environ if environ is None else environ)
    out = {k: env[k] for k in _PROXY_VARS if env.get(k)}
    if ca_bundle(env):
        out.update({name: CA_BUNDLE for name in _CA_VARS})
    return out


def ca_bundle(environ: dict[str, str] | None = None) -> Path | None:
    """This machine's CA bundle when it configures one for its tools (SSL_CERT_FILE, PIP_CERT, ...)."""
    env = dict(os.environ if environ is None else environ)
    for name in _CA_VARS:
        value = env.get(name)
        if value and Path(value).is_file():
            return Path(value)
    return None


def ca_files(environ: dict[str, str] | None = None) -> list[tuple[Path, str]]:
    """(host file, container path) of the CA material a container gets: the bundle, and this
    machine's own CA certificates (/usr/local/share/ca-certificates/*.crt) beside it, where
    update-ca-certificates adds them to the system store when the task installs ca-certificates."""
    bundle = ca_bundle(environ)
    if bundle is None:
        return []
    files = [(bundle, CA_BUNDLE)]
    for cert in sorted(Path("/usr/local/share/ca-certificates").glob("**/*.crt")):
        files.append((cert, f"/usr/local/share/ca-certificates/clover-host/{cert.name}"))
    return files
