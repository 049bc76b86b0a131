"""A step's copy-on-write view of the workspace, and what the step wrote through it.

Each command of a step runs under tools/safety/overlaylaunch.py: the workspace (and each --add-dir) is
the read-only lower layer of an overlay, a fresh directory of Clover's the upper layer. When the
command has ended, the upper layer is exactly what it changed: a file there was written (or
chmod-ed: overlayfs copies a file up whole), a symlink made, a directory made or changed, a
character device 0:0 (a whiteout) a path removed, and a directory marked opaque
(`user.overlay.opaque`) one whose old content is gone, replaced by what the upper layer holds.
`read_layer` turns that into `LayerChange`s, path by path, without trusting anything in the layer
(no link is followed, a FIFO or device is reported, never opened).

The layers live under the store's `steps/` directory when overlayfs takes it as an upper layer
(same file system as the workspace: applying a file is a rename), else under a private
directory in /dev/shm or /tmp; `probe()` says which, or why there is none.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "overlaylaunch.py")
_OPAQUE = ("user.overlay.opaque", "trusted.overlay.opaque")
_UNREADABLE = ("user.overlay.redirect", "user.overlay.metacopy", "trusted.overlay.redirect")

Kind = Literal["file", "link", "dir", "delete", "special"]


class LayerError(Exception):
    """The upper layer holds what cannot be read as plain changes (a redirect, a metacopy)."""


@dataclass(frozen=True)
class LayerChange:
    """One path the step changed. `kind`: what the path is now ("delete": it is gone; "special":
    a FIFO, socket or device the step made, which is not carried over). `opaque`: a directory
    whose old content is gone. `source`: where the new content lies in the upper layer."""

    path: str
    kind: Kind
    source: str
    opaque: bool = False
    mode: int = 0


def _is_whiteout(info: os.stat_result) -> bool:
    return stat.S_ISCHR(info.st_mode) and info.st_rdev == 0


def _xattrs(path: str) -> list[str]:
    try:
        return os.listxattr(path, follow_symlinks=False)
    except OSError:
        return []


def read_layer(upper: str, lower: str) -> list[LayerChange]:
    """The changes an upper layer holds over `lower`, parents before children."""
    out: list[LayerChange] = []
    _walk(upper, lower, "", out)
    return out


def _walk(upper: str, lower: str, rel: str, out: list[LayerChange]) -> None:
    with os.scandir(os.path.join(upper, rel) if rel else upper) as it:
        children = sorted(it, key=lambda e: e.name)
    for child in children:
        crel = f"{rel}/{child.name}" if rel else child.name
        info = child.stat(follow_symlinks=False)
        names = _xattrs(child.path)
        if any(n in names for n in _UNREADABLE):
            raise LayerError(f"{crel}: the overlay recorded a redirect or metadata-only copy")
        mode = stat.S_IMODE(info.st_mode)
        if _is_whiteout(info):
            out.append(LayerChange(crel, "delete", child.path))
        elif stat.S_ISDIR(info.st_mode):
            below = _lstat(os.path.join(lower, crel))
            opaque = any(n in names for n in _OPAQUE)
            merged = below is not None and stat.S_ISDIR(below.st_mode) and not opaque
            if not merged or stat.S_IMODE(below.st_mode) != mode:  # type: ignore[union-attr]
                out.append(LayerChange(crel, "dir", child.path, opaque=not merged, mode=mode))
            _walk(upper, lower, crel, out)
        elif stat.S_ISREG(info.st_mode):
            out.append(LayerChange(crel, "file", child.path, mode=mode))
        elif stat.S_ISLNK(info.st_mode):
            out.append(LayerChange(crel, "link", child.path))
        else:
            out.append(LayerChange(crel, "special", child.path, mode=mode))


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


# ----------------------------------------------------------------------------- where layers live


@functools.lru_cache(maxsize=8)
def probe(base: str) -> str | None:
    """None when an overlay with its upper layer under `base` works here; else why not."""
    if sys.platform != "linux":
        return "the step boundary needs Linux (user namespaces and overlayfs)"
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
        proc = subprocess.run(
            [sys.executable, "-I", "-S", LAUNCHER, "--probe", base],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the step boundary could not start: {exc}"
    if proc.returncode != 0:
        return f"overlayfs in a user namespace does not work here ({proc.stderr.strip()[:200] or proc.returncode})"
    return None


def layer_base(preferred: str, avoid: list[str] = ()) -> tuple[str | None, str]:
    """Where step layers go: (directory, "") or (None, why the boundary is unavailable). A
    directory inside one of `avoid` (the layers' lower directories) cannot hold an upper layer."""
    reasons = []
    for base in (preferred, _private_dir("/dev/shm"), _private_dir(tempfile.gettempdir())):
        if base is None:
            continue
        real = os.path.realpath(base)
        if any(real == a or real.startswith(a.rstrip("/") + "/") for a in map(os.path.realpath, avoid)):
            continue
        why = probe(base)
        if why is None:
            return base, ""
        reasons.append(why)
    return None, reasons[0] if reasons else "no directory can hold a step's layer"


def _private_dir(parent: str) -> str | None:
    if not os.path.isdir(parent):
        return None
    return os.path.join(parent, f"clover-steps-{os.getuid()}")


@dataclass
class Layer:
    """One directory's overlay for one step: the real `lower`, the step's `upper` and `work`."""

    lower: str
    upper: str
    work: str


class StepView:
    """The layers of one step; `launcher_argv` runs a command through them; `close` removes them."""

    def __init__(self, base: str, lowers: list[str], pid_namespace: bool) -> None:
        os.makedirs(base, mode=0o700, exist_ok=True)
        self.dir = tempfile.mkdtemp(prefix=f"step-{os.getpid()}-", dir=base)
        self.layers = []
        for i, lower in enumerate(lowers):
            upper, work = os.path.join(self.dir, f"{i}.upper"), os.path.join(self.dir, f"{i}.work")
            os.mkdir(upper, 0o755)
            os.mkdir(work, 0o700)
            self.layers.append(Layer(os.path.realpath(lower), upper, work))
        self.pid_namespace = pid_namespace

    def launcher_argv(self, argv: list[str]) -> list[str]:
        out = [sys.executable, "-I", "-S", LAUNCHER, *(["--pid"] if self.pid_namespace else [])]
        for layer in self.layers:
            out += ["--layer", layer.lower, layer.upper, layer.work]
        return [*out, "--", *argv]

    def changes(self) -> Iterator[tuple[Layer, list[LayerChange]]]:
        for layer in self.layers:
            yield layer, read_layer(layer.upper, layer.lower)

    def close(self) -> None:
        """Remove the layers, in the background: the step is settled, nothing reads them again
        (removing overlayfs's work directories costs milliseconds a step)."""
        threading.Thread(target=remove_layers, args=(self.dir,), daemon=True).start()


def remove_layers(path: str) -> None:
    # overlayfs leaves its work directory without permissions: give them back, then remove
    with contextlib.suppress(OSError):
        for dirpath, dirnames, _files in os.walk(path):
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o700)
    shutil.rmtree(path, ignore_errors=True)


def remove_stale(base: str) -> None:
    """Layers of steps whose Clover process is gone (killed before it removed them)."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if len(parts) >= 3 and parts[0] == "step" and parts[1].isdigit() and not _alive(int(parts[1])):
            remove_layers(os.path.join(base, name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = ["Layer", "LayerChange", "LayerError", "StepView", "layer_base", "probe", "read_layer"]
