"""The "host" image: this machine's own system folders (/usr, /etc, /var, ...), each shown under its
own overlay, over an empty skeleton with an image's basics, for machines that cannot build roots
(images.py builds the others)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from clover.evals.terminalbench.images import DEFAULT_PATH, RootImage

# The host image: this machine's folders shown (each under its own overlay) over an empty skeleton.
HOST_DIRS = ("usr", "etc", "var", "opt", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
SKELETON_DIRS = {
    "tmp": 0o1777,
    "root": 0o700,
    "home": 0o755,
    "run": 0o755,
    "run/lock": 0o1777,
    "mnt": 0o755,
    "srv": 0o755,
    "media": 0o755,
    "boot": 0o755,
}


def host_image(skeleton: Path) -> RootImage:
    """This machine's system as the image: its folders over a skeleton with an image's basics
    (/root with the distribution's .bashrc and .profile, /run/lock, /tmp, ...) made in `skeleton`."""
    skeleton.mkdir(parents=True, exist_ok=True)
    for name, mode in SKELETON_DIRS.items():
        (skeleton / name).mkdir(parents=True, exist_ok=True)
        os.chmod(skeleton / name, mode)
    for dot in (".bashrc", ".profile"):
        for source in (Path("/usr/share/base-files") / f"dot{dot}", Path("/etc/skel") / dot):
            if source.is_file() and not (skeleton / "root" / dot).exists():
                shutil.copy2(source, skeleton / "root" / dot)
    dirs = []
    for name in HOST_DIRS:
        host = Path("/") / name
        if host.is_symlink():  # merged /usr: bin -> usr/bin
            if not (skeleton / name).is_symlink():
                (skeleton / name).symlink_to(os.readlink(host))
        elif host.is_dir():
            (skeleton / name).mkdir(exist_ok=True)
            dirs.append(name)
    glibc = tuple(
        int(x) for x in (os.confstr("CS_GNU_LIBC_VERSION") or "glibc 0.0").split()[-1].split(".")[:2]
    )
    return RootImage("host", skeleton, {"PATH": DEFAULT_PATH}, glibc=glibc, host_dirs=tuple(dirs))
