"""Apply a task's Dockerfile inside its TaskContainer, in order, as `docker build` would: every
WORKDIR (created, and the cwd of the RUN steps after it), ENV (with $VAR expansion), ARG (the
build's steps only), COPY/ADD from the build context (a folder copies its contents; a trailing
slash or an existing folder takes the file's name), `COPY --from=<stage or image>` (the caller
hands out the source: launch.py) and RUN (bash in the container, as root). Shared by the local runner and
Harbor's BwrapEnvironment."""

from __future__ import annotations

import glob
import io
import posixpath
import re
import shlex
import tarfile
from collections.abc import Callable
from pathlib import Path

from clover.evals.terminalbench.container import TaskContainer
from clover.evals.terminalbench.images import DEFAULT_PATH
from clover.evals.terminalbench.tasks import DockerSpec


class BuildError(RuntimeError):
    """A build step failed; the message carries the step and the end of its output (stderr too)."""


class CopySource:
    """Where `COPY --from=X` reads: an earlier stage's container or a tool image's folder."""

    def archive(self, path: str) -> tuple[bytes, bool]:
        """A tar of `path` (a folder's contents as ".", a file under its own name), and whether it is a folder."""
        raise NotImplementedError


class ContainerSource(CopySource):
    def __init__(self, box: TaskContainer) -> None:
        self.box = box

    def archive(self, path: str) -> tuple[bytes, bool]:
        q = shlex.quote(path)
        is_dir = self.box.exec(f"[ -d {q} ]", timeout=30)[0] == 0
        folder, name = (path, ".") if is_dir else (posixpath.dirname(path) or "/", posixpath.basename(path))
        rc, out, _ = self.box.exec(
            f"[ -e {q} ] || exit 66; tar -c -C {shlex.quote(folder)} -f - {shlex.quote(name)}", timeout=600
        )
        if rc == 66:
            raise BuildError(f"COPY --from: {path} does not exist in the source stage")
        if rc != 0:
            raise BuildError(f"COPY --from: reading {path}: {tail(out)}")
        return out, is_dir


class FolderSource(CopySource):
    """A tool image's files: {path in the image: host file}."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def archive(self, path: str) -> tuple[bytes, bool]:
        host = self.files.get(posixpath.normpath(path))
        if host is None:
            raise BuildError(
                f"COPY --from: {path} is not in the image (it has {', '.join(sorted(self.files))})"
            )
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(host, arcname=posixpath.basename(path), filter=_as_root)
        return buffer.getvalue(), False


SourceFor = Callable[[str], CopySource]  # a stage name or index, or an image reference -> its files


def expand(value: str, env: dict[str, str]) -> str:
    """Docker's ENV substitution: $NAME and ${NAME} from the variables set so far."""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), ""), value)


def tail(output: bytes, lines: int = 15) -> str:
    text = output.decode("utf-8", "replace").rstrip().splitlines()
    return "\n".join(text[-lines:])


def build_image(
    box: TaskContainer,
    spec: DockerSpec,
    context: Path,
    *,
    log: Path,
    timeout: float,
    workdir: str | None = None,
    extra_path: str = "",
    base_env: dict[str, str] | None = None,
    source_for: SourceFor | None = None,
) -> dict[str, str]:
    """Run the steps; returns the environment variables the container's commands get: the image's,
    then the Dockerfile's ENV. `extra_path` goes at the end of PATH (stand-in interpreters, after the
    image's own); `base_env` comes before the image's (how this machine reaches the registries)."""
    image_env = dict(box.image.env)
    env: dict[str, str] = {**(base_env or {}), **image_env}
    env["PATH"] = image_env.get("PATH", DEFAULT_PATH) + (f":{extra_path}" if extra_path else "")
    cwd = "/"
    args: dict[str, str] = {}  # ARG values: the RUN steps see them, the finished container does not
    if box.image.host_dirs:  # this machine's system stands in for the image
        step = host_python_step(spec.base)
        if step:
            rc, out, _ = box.exec(step, env=env, timeout=timeout, log=log)
            if rc != 0:
                raise BuildError(f"FROM {spec.base}: this machine's Python does not stand in: {tail(out)}")
    for kind, arg in spec.steps:
        if kind == "workdir":
            cwd = arg
            _mkdir(box, cwd, env, log)
        elif kind == "env":
            name, _, value = arg.partition("\0")
            env[name] = expand(value, {**args, **env})
            args.pop(name, None)  # Docker: an ENV overrides an ARG of the same name
        elif kind == "arg":
            name, _, value = arg.partition("\0")
            if name not in env:
                args[name] = expand(value, {**args, **env})
        elif kind == "copy":
            src_name, _, dest = arg.partition("\0")
            copy_in(box, context, src_name, _absolute(dest, cwd), log)
        elif kind == "copy-from":
            source, *paths = arg.split("\0")
            if source_for is None:
                raise BuildError(f"COPY --from={source}: no stages or images to copy from here")
            copy_from(box, source_for(source), paths[:-1], _absolute(paths[-1], cwd))
        else:
            rc, out, timed_out = box.exec(arg, cwd=cwd, env={**args, **env}, timeout=timeout, log=log)
            if rc != 0:
                why = f"timed out after {timeout:g} s" if timed_out else f"exited with {rc}"
                raise BuildError(f"RUN {arg[:80]} {why}: {tail(out)}")
    if workdir and workdir != cwd:
        _mkdir(box, workdir, env, log)
    return env


def _absolute(dest: str, cwd: str) -> str:
    absolute = dest if dest.startswith("/") else posixpath.join(cwd, dest)
    return absolute + ("/" if dest.endswith("/") and not absolute.endswith("/") else "")


def _mkdir(box: TaskContainer, path: str, env: dict[str, str], log: Path) -> None:
    rc, out, _ = box.exec(f"mkdir -p -- {shlex.quote(path)}", env=env, timeout=60, log=log)
    if rc != 0:
        raise BuildError(f"WORKDIR {path}: {tail(out)}")


def copy_in(box: TaskContainer, context: Path, src_name: str, dest: str, log: Path | None = None) -> None:
    """COPY src dest: sources are in the build context (globs allowed), never outside it."""
    root = context.resolve()
    matches = (
        sorted(glob.glob(str(root / src_name)))
        if any(c in src_name for c in "*?[")
        else [str(root / src_name)]
    )
    sources = [Path(m).resolve() for m in matches]
    if not sources or any(not s.exists() or (root not in (s, *s.parents)) for s in sources):
        raise BuildError(f"COPY source {src_name} is not in the build context")
    for src in sources:
        target = dest
        if src.is_file() and (dest.endswith("/") or len(sources) > 1 or _is_dir(box, dest)):
            target = posixpath.join(dest, src.name)
        try:
            box.put(src, target.rstrip("/") or "/")
        except Exception as exc:
            raise BuildError(f"COPY {src_name} {dest}: {exc}") from None


def copy_from(box: TaskContainer, source: CopySource, paths: list[str], dest: str) -> None:
    """COPY --from=X src... dest: a folder's contents into dest; a file into dest when dest is a
    folder (a trailing slash, several sources, or an existing folder), else as dest."""
    into_folder = dest.endswith("/") or len(paths) > 1 or _is_dir(box, dest)
    for path in paths:
        archive, is_dir = source.archive(path)
        if is_dir or into_folder:
            folder = dest.rstrip("/") or "/"
        else:  # the file becomes `dest`: rename it in the archive
            archive, folder = _renamed(archive, posixpath.basename(dest)), posixpath.dirname(dest) or "/"
        q = shlex.quote(folder)
        rc, out, _ = box.exec(f"mkdir -p {q} && tar -x -C {q} -f -", stdin=archive, timeout=600)
        if rc != 0:
            raise BuildError(f"COPY --from {path} {dest}: {tail(out)}")


def _renamed(archive: bytes, name: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(archive)) as src, tarfile.open(fileobj=out, mode="w") as dst:
        for member in src.getmembers():
            data = src.extractfile(member) if member.isfile() else None
            member.name = name
            dst.addfile(member, data)
    return out.getvalue()


def _as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _is_dir(box: TaskContainer, path: str) -> bool:
    return box.exec(f"[ -d {shlex.quote(path)} ]", timeout=30)[0] == 0


_PYTHON_IMAGE = re.compile(r"(?:(?:docker\.io|index\.docker\.io)/)?(?:library/)?python:(\d+\.\d+)(?![\d])")


def host_python_step(base: str) -> str:
    """With the host image only: the shell step that makes this machine's system look like Docker's
    `python:X.Y` image ("" for other images): the system's python3 and pip3 under the image's names,
    installs allowed (the image has no PEP 668 marker; the overlay's copy goes)."""
    if _PYTHON_IMAGE.match(base) is None:
        return ""
    return (
        "for pair in python:python3 pip:pip3; do name=${pair%%:*}; target=$(command -v ${pair#*:}) && "
        '{ [ -e /usr/local/bin/$name ] || ln -s "$target" /usr/local/bin/$name; }; done; '
        "rm -f /usr/lib/python3*/EXTERNALLY-MANAGED"
    )
