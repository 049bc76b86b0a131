"""Stand-ins for what task scripts fetch from GitHub, which a machine without Docker Hub or GitHub
cannot reach: Astral's uv installer (`curl -LsSf https://astral.sh/uv/.../install.sh | sh`
downloads uv from GitHub releases) and the CPython builds `uvx -p 3.13 ...` downloads.

- uv: when a task's files mention it, the uv binary (this machine's, else the `uv` wheel from
  PyPI, cached) is put where the installer puts it (/root/.local/bin, with its `env` script),
  so `source $HOME/.local/bin/env` and `uvx` work even when the installer cannot download.
- Python: the interpreters of this machine (pyenv's) are mounted read-only at their own paths
  (their libpython is found through an absolute RPATH, and venvs made from them link back there)
  and their `pythonX.Y` names put in /opt/clover-python/bin at the END of PATH, so `uv -p 3.13`
  finds a local interpreter instead of downloading one, and an image's own Python comes first.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PYTHON_DIR = "/opt/clover-python"
_USES_UV = re.compile(r"astral\.sh/uv|(?<![\w.-])uvx?(?![\w.-])")
_ENV_SCRIPT = '#!/bin/sh\ncase ":${PATH}:" in\n  *:"$HOME/.local/bin":*) ;;\n  *) export PATH="$HOME/.local/bin:$PATH" ;;\nesac\n'


def uses_uv(*folders: Path) -> bool:
    """Whether any text file in these folders (tests, solution, build context) mentions uv."""
    for folder in folders:
        for path in (p for p in Path(folder).rglob("*") if p.is_file() and p.stat().st_size < 1_000_000):
            try:
                if _USES_UV.search(path.read_text(encoding="utf-8")):
                    return True
            except (UnicodeDecodeError, OSError):
                continue
    return False


def uv_binary(cache: Path | None = None) -> Path | None:
    """A uv executable: on PATH, else extracted from the PyPI wheel into the cache (once)."""
    found = shutil.which("uv")
    if found:
        return Path(found)
    cache = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clover" / "uv"
    exe = cache / "uv"
    if exe.is_file():
        return exe
    with tempfile.TemporaryDirectory(prefix="clover-uv-") as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                               "uv", "-d", tmp], capture_output=True, text=True, timeout=600)
        wheels = glob.glob(f"{tmp}/uv-*.whl")
        if proc.returncode != 0 or not wheels:
            return None
        cache.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheels[0]) as wheel:
            for name in wheel.namelist():
                if re.search(r"\.data/scripts/uvx?$", name):
                    target = cache / Path(name).name
                    target.write_bytes(wheel.read(name))
                    target.chmod(0o755)
    return exe if exe.is_file() else None


def python_installs() -> dict[str, Path]:
    """{"3.13.0": prefix} for this machine's pyenv interpreters."""
    home = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = {}
    for prefix in sorted((home / "versions").glob("[0-9]*.[0-9]*")):
        if re.fullmatch(r"\d+\.\d+\.\d+", prefix.name) and (prefix / "bin").is_dir():
            found[prefix.name] = prefix
    return found


def python_binds(state: Path) -> list[tuple[Path, str]]:
    """(host, container) read-only mounts for the interpreters, and their PATH folder."""
    installs = python_installs()
    if not installs:
        return []
    bin_dir = state / "python-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    binds = [(prefix, str(prefix)) for prefix in installs.values()]
    for name in installs:  # the newest patch release of each X.Y wins (sorted order)
        short = ".".join(name.split(".")[:2])
        link = bin_dir / f"python{short}"
        link.unlink(missing_ok=True)
        link.symlink_to(f"{installs[name]}/bin/python{short}")
    return [*binds, (bin_dir, f"{PYTHON_DIR}/bin")]


_PYTHON_IMAGE = re.compile(r"(?:(?:docker\.io|index\.docker\.io)/)?(?:library/)?python:(\d+\.\d+)(?![\d])")


def python_image_step(base: str, installs: dict[str, Path] | None = None) -> str:
    """The shell step that makes the host's system look like Docker's `python:X.Y...` image, which
    a Dockerfile's `RUN pip install ...` and the tests' `python` expect ("" for other images).
    With this machine's X.Y: a venv at /usr/local (python, python3, pip first on PATH, packages in
    /usr/local/lib, inside the overlay), as the image has. Without it: the system's python3 and pip3
    under those names, and installs allowed (the image has no PEP 668 marker; the overlay's copy goes)."""
    match = _PYTHON_IMAGE.match(base)
    if match is None:
        return ""
    version = match.group(1)
    prefixes = [prefix for name, prefix in (installs if installs is not None else python_installs()).items()
                if name.startswith(version + ".")]
    if prefixes:  # sorted by name: the last one is the newest patch release
        return f"{prefixes[-1]}/bin/python{version} -m venv /usr/local"
    return ('for pair in python:python3 pip:pip3; do name=${pair%%:*}; target=$(command -v ${pair#*:}) && '
            '{ [ -e /usr/local/bin/$name ] || ln -s "$target" /usr/local/bin/$name; }; done; '
            "rm -f /usr/lib/python3*/EXTERNALLY-MANAGED")


# How this machine reaches the package registries (a proxy, a private CA): a task's pip, apt and
# uv inside the container need the same, as they would on a Docker host configured for them.
_NETWORK_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
                 "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "PIP_CERT", "PIP_INDEX_URL")


def network_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if environ is None else environ)
    out = {k: env[k] for k in _NETWORK_VARS if env.get(k)}
    if "SSL_CERT_FILE" not in out and out.get("PIP_CERT"):  # uv reads SSL_CERT_FILE, not pip's setting
        out["SSL_CERT_FILE"] = out["PIP_CERT"]
    return out


def install_uv(root: Path) -> bool:
    """Put uv, uvx and the installer's env script in the container's /root/.local/bin."""
    exe = uv_binary()
    if exe is None:
        return False
    target = root / "root" / ".local" / "bin"
    target.mkdir(parents=True, exist_ok=True)
    for name in ("uv", "uvx"):
        source = exe.with_name(name)
        if source.is_file():
            shutil.copy2(source, target / name)
    (target / "env").write_text(_ENV_SCRIPT)
    return (target / "uv").is_file()
