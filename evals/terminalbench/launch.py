"""A task's container from its Dockerfile, as `docker build` + `docker run` would make it: the
root of its FROM image (images.py; or, asked for, this machine's own system: the "host" image),
this machine's network settings (proxy variables, CA bundle), the stand-ins of toolchain.py, the
earlier stages of a multi-stage build each in a container of its own, then the build's steps
(build.py). Shared by the local runner and Harbor's BwrapEnvironment.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from clover.evals.terminalbench.build import (
    BuildError,
    ContainerSource,
    CopySource,
    FolderSource,
    build_image,
)
from clover.evals.terminalbench.container import ContainerError, TaskContainer, host_image
from clover.evals.terminalbench.images import ImageError, ImageStore, RootImage
from clover.evals.terminalbench.pythons import PythonBuildError
from clover.evals.terminalbench.recipes import UnknownImage, resolve, resolve_tool
from clover.evals.terminalbench.tasks import DockerSpec
from clover.evals.terminalbench.toolchain import (
    PYTHON_DIR,
    STAND_IN_HOSTS,
    ca_files,
    install_uv,
    installer_version,
    network_env,
    python_binds,
    uses_uv,
    uv_dist,
)

HOST_IMAGE = "host"


class CannotHost(Exception):
    """This machine cannot build the task's image (no recipe for its FROM); the message says why."""


class LaunchError(RuntimeError):
    """The environment could not be built; `unreachable` names the hosts it looked up in vain."""

    def __init__(self, message: str, unreachable: list[str] | None = None) -> None:
        super().__init__(message)
        self.unreachable = unreachable or []


@dataclass
class Launch:
    """How containers are made for a run: where roots come from and what they may use."""

    store: ImageStore = field(default_factory=ImageStore)
    # Every task on this image instead of its FROM ("host": this machine's own system, faster and
    # less faithful; for machines that cannot build roots). Default: $CLOVER_TBENCH_IMAGE.
    image: str | None = field(default_factory=lambda: os.environ.get("CLOVER_TBENCH_IMAGE") or None)
    resolvers: list[str] | None = None  # "address[:port]" the containers' DNS asks (default: this machine's)

    def root_for(self, base: str, state: Path, log: Path) -> RootImage:
        ref = self.image or base
        if ref == HOST_IMAGE:
            return host_image(state / "skeleton")
        try:
            recipe = resolve(ref)
        except UnknownImage as exc:
            raise CannotHost(str(exc)) from None
        return self.store.root(recipe, log)

    def start(
        self,
        spec: DockerSpec,
        context: Path,
        *,
        state: Path,
        log: Path,
        network: bool,
        timeout: float,
        workdir: str | None = None,
        hide: tuple[Path, ...] = (),
        writable: list[tuple[Path, str]] | None = None,
        uv_folders: tuple[Path, ...] = (),
    ) -> tuple[TaskContainer, dict[str, str]]:
        """A running container with the image built; returns it and the environment its commands get.
        `uv_folders`: the task's other files (tests, solution): where they or the build use uv, the
        stand-in interpreters are mounted. Raises CannotHost, LaunchError."""
        with_pythons = uses_uv(context, *uv_folders)
        box = self.container(
            spec.base, state, log, network=network, with_pythons=with_pythons, hide=hide, writable=writable
        )
        stages = _Stages(self, spec, context, state, log, network, timeout, with_pythons)
        try:
            box.start()
            prepare(box)
            version = installer_version(context)
            if version is not None:
                install_uv(box, version)
            env = build_image(
                box,
                spec,
                context,
                log=log,
                timeout=timeout,
                workdir=workdir,
                extra_path=_extra_path(box),
                base_env=network_env(),
                source_for=stages.source,
            )
        except BaseException as exc:
            unreachable = needed_hosts(box, *stages.boxes)
            stages.close()
            box.remove()
            if isinstance(exc, (BuildError, ContainerError, ImageError, PythonBuildError, OSError)):
                raise LaunchError(str(exc), unreachable) from None
            raise
        stages.close()
        return box, env

    def container(
        self,
        base: str,
        state: Path,
        log: Path,
        *,
        network: bool,
        with_pythons: bool,
        hide: tuple[Path, ...] = (),
        writable: list[tuple[Path, str]] | None = None,
    ) -> TaskContainer:
        """A container (not started) of the image `base` names. Raises CannotHost, LaunchError."""
        try:
            image = self.root_for(base, state, log)
            binds = python_binds(image.glibc) if with_pythons else []
        except (ImageError, PythonBuildError, OSError) as exc:
            raise LaunchError(f"FROM {base}: {exc}") from None
        return TaskContainer(
            state, image, network=network, hide=hide, binds=binds, writable=writable, resolvers=self.resolvers
        )


def _extra_path(box: TaskContainer) -> str:
    """The stand-in interpreters' PATH folder, where they are mounted."""
    return f"{PYTHON_DIR}/bin" if any(inside == f"{PYTHON_DIR}/bin" for _, inside in box.binds) else ""


def prepare(box: TaskContainer) -> None:
    """This machine's CA material in the container (toolchain.ca_files) and, where the image has
    ca-certificates and its store lacks them, in its system store too (update-ca-certificates)."""
    files = ca_files() if box.network else []
    if not files:
        return
    for host, inside in files:
        box.put(host, inside)
    bodies = [_pem_body(host) for host, inside in files if inside.endswith(".crt")]
    try:
        store = box.read("/etc/ssl/certs/ca-certificates.crt").decode("ascii", "replace").replace("\n", "")
    except (FileNotFoundError, ContainerError):
        return  # no ca-certificates yet: its postinst adds them when the task installs it
    if not all(body in store for body in bodies):
        box.exec(
            "command -v update-ca-certificates >/dev/null && update-ca-certificates >/dev/null 2>&1; true",
            timeout=120,
        )


def _pem_body(path: Path) -> str:
    text = path.read_text(errors="replace")
    return "".join(line for line in text.splitlines() if line and not line.startswith("-----"))[:200]


def before_phase(box: TaskContainer, *folders: Path) -> None:
    """Stand-ins a phase's scripts expect (Astral's installer puts uv in /root/.local/bin)."""
    version = installer_version(*folders)
    if version is not None:
        install_uv(box, version)


def needed_hosts(*boxes: TaskContainer) -> list[str]:
    """Public hosts the containers looked up and this machine could not resolve (stand-ins aside)."""
    names: list[str] = []
    for box in boxes:
        names += [n for n in box.unreachable_hosts() if n not in STAND_IN_HOSTS and n not in names]
    return names


class _Stages:
    """The sources of `COPY --from`: earlier stages (built on first use, each in its own container)
    and images (a tool image's files, or a container of the image)."""

    def __init__(
        self,
        launch: Launch,
        spec: DockerSpec,
        context: Path,
        state: Path,
        log: Path,
        network: bool,
        timeout: float,
        with_pythons: bool,
    ) -> None:
        self.launch, self.spec, self.context = launch, spec, context
        self.state, self.log, self.network, self.timeout = state, log, network, timeout
        self.with_pythons = with_pythons
        self.boxes: list[TaskContainer] = []
        self._built: dict[int, CopySource] = {}

    def source(self, name: str) -> CopySource:
        for index, stage in enumerate(self.spec.stages):
            if name.lower() in (stage.name, str(index)):
                if index not in self._built:
                    self._built[index] = ContainerSource(self._build_stage(index, stage))
                return self._built[index]
        tool = resolve_tool(name)
        if tool is not None:
            try:
                dist = uv_dist(tool.version)
            except OSError as exc:
                raise BuildError(f"COPY --from={name}: {exc}") from None
            return FolderSource({path: dist / exe for path, exe in tool.files.items()})
        return ContainerSource(self._container(name, f"image-{len(self.boxes)}"))

    def _build_stage(self, index: int, stage: DockerSpec) -> TaskContainer:
        stage_spec = DockerSpec(
            base=stage.base, workdir=stage.workdir, steps=stage.steps, stages=self.spec.stages
        )
        box = self._container(stage.base, f"stage-{index}")
        with open(self.log, "a") as fh:
            fh.write(f"# stage {stage.name or index} (FROM {stage.base})\n")
        build_image(
            box,
            stage_spec,
            self.context,
            log=self.log,
            timeout=self.timeout,
            extra_path=_extra_path(box),
            base_env=network_env(),
            source_for=self.source,
        )
        return box

    def _container(self, base: str, name: str) -> TaskContainer:
        try:
            box = self.launch.container(
                base, self.state / name, self.log, network=self.network, with_pythons=self.with_pythons
            )
        except (CannotHost, LaunchError) as exc:
            raise BuildError(f"COPY --from={base}: {exc}") from None
        self.boxes.append(box)
        box.start()
        prepare(box)
        return box

    def close(self) -> None:
        for box in self.boxes:
            with contextlib.suppress(Exception):
                box.remove()
