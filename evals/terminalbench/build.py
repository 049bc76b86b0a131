"""Apply a task's Dockerfile inside its TaskContainer, in order, as `docker build` would: every
WORKDIR (created, and the cwd of the RUN steps after it), ENV (with $VAR expansion), COPY/ADD from
the build context (a folder copies its contents; a trailing slash or an existing folder takes the
file's name) and RUN (bash in the container, as root). Shared by the local runner and Harbor's
BwrapEnvironment."""

from __future__ import annotations

import glob
import posixpath
import re
import shlex
import uuid
from pathlib import Path

from clover.evals.terminalbench.container import DEFAULT_PATH, SYSTEM_DIRS, TaskContainer
from clover.evals.terminalbench.tasks import DockerSpec
from clover.evals.terminalbench.toolchain import python_image_step


class BuildError(RuntimeError):
    """A build step failed; the message carries the step and the end of its output (stderr too)."""


def expand(value: str, env: dict[str, str]) -> str:
    """Docker's ENV substitution: $NAME and ${NAME} from the variables set so far."""
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), ""), value)


def tail(output: bytes, lines: int = 15) -> str:
    text = output.decode("utf-8", "replace").rstrip().splitlines()
    return "\n".join(text[-lines:])


def build_image(box: TaskContainer, spec: DockerSpec, context: Path, *, log: Path, timeout: float,
                workdir: str | None = None, extra_path: str = "", base_env: dict[str, str] | None = None
                ) -> dict[str, str]:
    """Run the steps; returns the environment variables the container's commands get.
    `extra_path` goes at the end of PATH (local interpreters: after the image's own); `base_env`
    comes before the Dockerfile's ENV (how this machine reaches the registries)."""
    env: dict[str, str] = {**(base_env or {}), "PATH": DEFAULT_PATH + (f":{extra_path}" if extra_path else "")}
    cwd = "/"
    args: dict[str, str] = {}  # ARG values: the RUN steps see them, the finished container does not
    stand_in = python_image_step(spec.base)
    if stand_in:
        rc, out, _ = box.exec(stand_in, env=env, timeout=timeout, log=log)
        if rc != 0:
            raise BuildError(f"FROM {spec.base}: the local Python stand-in failed: {tail(out)}")
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
            copy_in(box, context, src_name, dest if dest.startswith("/") else posixpath.join(cwd, dest), log)
        else:
            rc, out, timed_out = box.exec(arg, cwd=cwd, env={**args, **env}, timeout=timeout, log=log)
            if rc != 0:
                why = f"timed out after {timeout:g} s" if timed_out else f"exited with {rc}"
                raise BuildError(f"RUN {arg[:80]} {why}: {tail(out)}")
    if workdir and workdir != cwd:
        _mkdir(box, workdir, env, log)
    return env


def _mkdir(box: TaskContainer, path: str, env: dict[str, str], log: Path) -> None:
    rc, out, _ = box.exec(f"mkdir -p -- {shlex.quote(path)}", env=env, timeout=60, log=log)
    if rc != 0:
        raise BuildError(f"WORKDIR {path}: {tail(out)}")


def copy_in(box: TaskContainer, context: Path, src_name: str, dest: str, log: Path) -> None:
    """COPY src dest: sources are in the build context (globs allowed), never outside it."""
    root = context.resolve()
    matches = sorted(glob.glob(str(root / src_name))) if any(c in src_name for c in "*?[") else [str(root / src_name)]
    sources = [Path(m).resolve() for m in matches]
    if not sources or any(not s.exists() or (root not in (s, *s.parents)) for s in sources):
        raise BuildError(f"COPY source {src_name} is not in the build context")
    for src in sources:
        target = dest
        if src.is_file() and (dest.endswith("/") or len(sources) > 1 or _is_dir(box, dest)):
            target = posixpath.join(dest, src.name)
        top = posixpath.normpath(target).split("/")[1] if target != "/" else ""
        if top not in SYSTEM_DIRS:
            box.put(src, target.rstrip("/") or "/")
            continue
        # An overlaid system folder is only writable from inside: stage in /tmp, then move.
        staged = f"/tmp/.clover-copy-{uuid.uuid4().hex[:8]}"
        box.put(src, staged)
        q_src, q_dest = shlex.quote(staged), shlex.quote(target.rstrip("/"))
        command = (f"mkdir -p {q_dest} && cp -a {q_src}/. {q_dest}/" if src.is_dir()
                   else f"mkdir -p \"$(dirname {q_dest})\" && cp -a {q_src} {q_dest}")
        rc, out, _ = box.exec(f"{command}; __rc=$?; rm -rf {q_src}; exit $__rc", timeout=300, log=log)
        if rc != 0:
            raise BuildError(f"COPY {src_name} {dest}: {tail(out)}")


def _is_dir(box: TaskContainer, path: str) -> bool:
    return box.exec(f"[ -d {shlex.quote(path)} ]", timeout=30)[0] == 0
