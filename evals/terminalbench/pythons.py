"""This machine's CPython builds (pyenv's) made usable inside a task's root file system, which is
another distribution than the one they were built on:

- `stage_image_python`: the tree a `python:3.X` image has at /usr/local (the interpreter, its
  standard library without the test suite, headers; no site-packages: pip comes from ensurepip
  in the image), its run path pointing at /usr/local/lib, its scripts' `#!` lines at
  /usr/local/bin; plus the Debian packages of the shared libraries it links (the official image
  keeps exactly those).
- `portable_python`: a copy that carries its own shared libraries (all but the C library's), run
  paths relative to itself, for a read-only mount at /opt/clover-python/X.Y.Z. It stands in for the
  CPython builds `uv -p 3.X` downloads from GitHub (unreachable here); it needs a C library at least
  as new as this machine's.

Both are built once per interpreter in the cache and need `patchelf`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from clover.evals.terminalbench.cache import build_once

PORTABLE_ROOT = "/opt/clover-python"
# The C library's own objects: always the task root's, never copied.
_LIBC = re.compile(
    r"^(?:linux-vdso|ld-linux[\w-]*|libc|libm|libpthread|libdl|librt|libutil|libresolv|libcrypt|"
    r"libgcc_s|libanl|libmvec)\.so"
)
_DROP_DIRS = {"test", "tests", "idle_test", "__pycache__", "site-packages"}
_SCRIPTS = re.compile(r"^(?:python|pydoc|idle|2to3)[\d.]*(?:-config)?$")


class PythonBuildError(RuntimeError):
    pass


def installs() -> dict[str, Path]:
    """{"3.13.0": prefix} for this machine's pyenv interpreters (newest patch release last per X.Y)."""
    home = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = {}
    versions = sorted(
        (p for p in (home / "versions").glob("[0-9]*.[0-9]*.[0-9]*") if (p / "bin").is_dir()),
        key=lambda p: (
            tuple(int(x) for x in p.name.split(".")) if re.fullmatch(r"\d+\.\d+\.\d+", p.name) else (0,)
        ),
    )
    for prefix in versions:
        if re.fullmatch(r"\d+\.\d+\.\d+", prefix.name):
            found[prefix.name] = prefix
    return found


def newest(short: str, available: dict[str, Path] | None = None) -> tuple[str, Path] | None:
    """The newest local X.Y.Z of `short` ("3.13")."""
    matches = [
        (v, p)
        for v, p in (installs() if available is None else available).items()
        if v.startswith(short + ".")
    ]
    return matches[-1] if matches else None


def build_id(prefix: Path) -> str:
    """What identifies a build for the cache: its version and its libpython's size and time."""
    libs = sorted(prefix.glob("lib/libpython3*.so*")) or sorted(prefix.glob("bin/python3.*"))
    stamp = [(p.name, p.stat().st_size, int(p.stat().st_mtime)) for p in libs if p.is_file()]
    return f"{prefix.name}:{stamp}"


def host_glibc() -> tuple[int, int]:
    name = os.confstr("CS_GNU_LIBC_VERSION") or "glibc 0.0"
    major, minor = name.split()[-1].split(".")[:2]
    return int(major), int(minor)


def _elf_files(root: Path) -> list[Path]:
    """Executables and shared objects under `root` (not object files or static archives)."""
    out = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as fh:
                head = fh.read(18)
            if head[:4] == b"\x7fELF" and len(head) == 18 and int.from_bytes(head[16:18], "little") in (2, 3):
                out.append(path)
    return out


def _needed(binary: Path) -> dict[str, str]:
    """{soname: host path} of what `binary` loads, as this machine resolves it (ldd)."""
    proc = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    found = {}
    for line in proc.stdout.splitlines():
        match = re.match(r"\s*(\S+) => (/\S+)", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def _copy_prefix(prefix: Path, dest: Path) -> None:
    def ignore(folder: str, names: list[str]) -> set[str]:
        drop = {n for n in names if n in _DROP_DIRS or n.endswith((".pyc", ".a")) or n.startswith("_tkinter")}
        if Path(folder) == prefix / "bin":
            drop |= {
                n for n in names if not _SCRIPTS.match(n)
            }  # pip's and other tools' scripts: not CPython's
        return drop

    shutil.copytree(prefix, dest, symlinks=True, ignore=ignore)
    for lib in dest.glob("lib/python3*"):
        (lib / "site-packages").mkdir(exist_ok=True)


def _fix_scripts(bin_dir: Path, old_prefix: Path, new_bin: str) -> None:
    for script in bin_dir.iterdir():
        if script.is_file() and not script.is_symlink():
            data = script.read_bytes()
            if data.startswith(b"#!") and str(old_prefix).encode() in data.split(b"\n", 1)[0]:
                first, _, rest = data.partition(b"\n")
                exe = first.rsplit(b"/", 1)[-1].decode()
                script.write_bytes(f"#!{new_bin}/{exe}\n".encode() + rest)


def _patchelf(*args: str) -> None:
    proc = subprocess.run(["patchelf", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise PythonBuildError(f"patchelf {' '.join(args)}: {proc.stderr.strip()[:200]}")


def _host_package(path: str) -> str | None:
    """The Debian package that holds `path` on this machine (merged /usr: either spelling)."""
    for candidate in {
        path,
        path.removeprefix("/usr"),
        "/usr" + path if not path.startswith("/usr") else path,
    }:
        proc = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if proc.returncode == 0:
            return proc.stdout.split(":", 1)[0].strip()
    return None


def runtime_packages(prefix: Path) -> list[str]:
    """The Debian packages of the shared libraries the interpreter and its modules link (tkinter's
    aside, as in the official image); names as this machine (Debian) spells them."""
    packages = set()
    for elf in _elf_files(prefix / "bin") + _elf_files(prefix / "lib"):
        if "_tkinter" in elf.name or "tkinter" in str(elf.parent):
            continue
        for soname, path in _needed(elf).items():
            if not _LIBC.match(soname) and not path.startswith(str(prefix)):
                package = _host_package(path)
                if package:
                    packages.add(package)
    return sorted(packages)


def stage_image_python(prefix: Path, dest: Path) -> None:
    """The /usr/local tree of a python:X.Y image in `dest` (see the module's docstring)."""
    if shutil.which("patchelf") is None:
        raise PythonBuildError("patchelf is not installed (apt-get install patchelf)")
    _copy_prefix(prefix, dest)
    for elf in _elf_files(dest):
        proc = subprocess.run(["patchelf", "--print-rpath", str(elf)], capture_output=True, text=True)
        if proc.stdout.strip():
            _patchelf("--set-rpath", "/usr/local/lib", str(elf))
    _fix_scripts(dest / "bin", prefix, "/usr/local/bin")
    short = ".".join(prefix.name.split(".")[:2])
    for name, target in (
        ("python", "python3"),
        ("pydoc", "pydoc3"),
        ("idle", "idle3"),
        ("python-config", "python3-config"),
    ):
        if (dest / "bin" / target).exists() and not (dest / "bin" / name).exists():
            (dest / "bin" / name).symlink_to(target)
    if not (dest / "bin" / f"python{short}").is_file():
        raise PythonBuildError(f"{prefix}: no bin/python{short}")


def portable_python(prefix: Path, cache: Path) -> Path:
    """A self-contained copy of the interpreter at `prefix` (built once; see the module's docstring)."""

    def build(target: Path) -> None:
        if shutil.which("patchelf") is None:
            raise PythonBuildError("patchelf is not installed (apt-get install patchelf)")
        _copy_prefix(prefix, target)
        deps = target / "lib" / "clover-deps"
        deps.mkdir()
        pending, done = _elf_files(target), set()
        while pending:
            elf = pending.pop()
            for soname, path in _needed(elf).items():
                if _LIBC.match(soname) or soname in done or (target / "lib" / soname).exists():
                    continue
                done.add(soname)
                if not path.startswith(str(prefix)):
                    shutil.copy2(path, deps / soname)
                    pending.append(deps / soname)
        for elf in _elf_files(target):
            relative = os.path.relpath(deps, elf.parent)
            libdir = os.path.relpath(target / "lib", elf.parent)
            _patchelf("--set-rpath", f"$ORIGIN/{relative}:$ORIGIN/{libdir}", str(elf))
        _fix_scripts(target / "bin", prefix, f"{PORTABLE_ROOT}/{prefix.name}/bin")
        (target / "clover-glibc").write_text("{}.{}\n".format(*host_glibc()))

    return build_once(cache / "pythons" / f"{prefix.name}-{_digest(build_id(prefix))}", build)


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:12]
