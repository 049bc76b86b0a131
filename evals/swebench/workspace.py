"""Per-instance work trees: a cache of repository mirrors, a clean checkout at base_commit, the
patch the agent made, and (with Docker) the official per-instance images."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from clover.evals.git import GitError, Identity
from clover.evals.git import git as eval_git
from clover.evals.swebench.dataset import Instance, modified_files

GRADER = Identity("clover", "clover@localhost")  # who the grader's own commits are by (never the user)


class WorkspaceError(RuntimeError):
    """A workspace could not be made; the message is one line for the user."""


def git(
    *args: str,
    cwd: str | Path | None = None,
    check: bool = True,
    timeout: float = 600,
    stdin: str | None = None,
) -> str:
    """The evals' hardened git (evals/git.py), its stdout; a failure is a WorkspaceError. The agent's
    commands ran in the work tree, and whatever they planted in .git/config or .git/hooks must not
    run here (extract_patch runs after them)."""
    try:
        return eval_git(
            cwd or os.getcwd(), *args, stdin=stdin, check=check, remote=True, timeout=timeout, identity=GRADER
        ).stdout
    except GitError as exc:
        raise WorkspaceError(str(exc)) from None


def parse_repo_map(items: list[str] | None) -> dict[str, str]:
    """`owner/name=PATH` pairs -> {repo: path}."""
    out: dict[str, str] = {}
    for item in items or []:
        repo, sep, path = item.partition("=")
        if not sep or not repo.strip() or not path.strip():
            raise WorkspaceError(f"--repo-map {item!r}: expected owner/name=PATH")
        if not Path(path).expanduser().exists():
            raise WorkspaceError(f"--repo-map {item!r}: {path} does not exist")
        out[repo.strip()] = str(Path(path).expanduser().resolve())
    return out


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "clover" / "swebench" / "repos"


class RepoCache:
    """Where each repository's history comes from: --repo-map, a local path in `repo`, the cache,
    or a fresh mirror clone from GitHub into the cache."""

    def __init__(
        self, cache_dir: str | Path | None = None, repo_map: dict[str, str] | None = None, online: bool = True
    ) -> None:
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        self.repo_map = dict(repo_map or {})
        self.online = online

    def mirror(self, repo: str) -> str:
        if repo in self.repo_map:
            return self.repo_map[repo]
        if Path(repo).expanduser().is_dir():  # synthfix-style instances name a local repository
            return str(Path(repo).expanduser().resolve())
        cached = self.cache_dir / (repo.replace("/", "__") + ".git")
        if cached.is_dir():
            return str(cached)
        if not self.online:
            raise WorkspaceError(f"no mirror of {repo} in {self.cache_dir}; pass --repo-map {repo}=PATH")
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(cached.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            git("clone", "--mirror", "--quiet", f"https://github.com/{repo}.git", str(tmp), timeout=3600)
        except WorkspaceError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise WorkspaceError(
                f"could not clone {repo} from GitHub ({exc}); pass --repo-map {repo}=PATH"
            ) from None
        try:
            tmp.rename(cached)  # another worker may have won the race: keep theirs
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
        return str(cached)


def make_workspace(instance: Instance, dest: str | Path, cache: RepoCache) -> Path:
    """A clean work tree at base_commit, sharing objects with the mirror, with no remote, no
    branches and no tags that could reveal the fix. Tags reachable from base_commit stay, as in the
    official harness's images: setuptools_scm and versioneer read the package's version from them
    (without them pytest calls itself 0.1.devN and its own `minversion` check stops every run)."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    mirror = cache.mirror(instance["repo"])
    commit = instance["base_commit"]
    git("clone", "--shared", "--no-checkout", "--quiet", mirror, str(dest))
    try:
        git("-c", "advice.detachedHead=false", "checkout", "--quiet", commit, cwd=dest)
    except WorkspaceError:
        raise WorkspaceError(
            f"{instance['instance_id']}: base_commit {commit[:12]} not in {mirror}"
        ) from None
    # git checks out a commit whose blobs the mirror lacks (a partial copy: a snapshot without its
    # largest files) with exit 0, leaving those files out: the tests would meet a tree that never was.
    absent = git("ls-files", "--deleted", cwd=dest).split()
    if absent:
        raise WorkspaceError(
            f"{instance['instance_id']}: {mirror} lacks {len(absent)} file(s) of base_commit {commit[:12]} "
            f"({', '.join(absent[:3])}): a partial copy of {instance['repo']}; give a full mirror with --repo-map"
        )
    git("remote", "remove", "origin", cwd=dest)
    past = {f"refs/tags/{t}" for t in git("tag", "--merged", commit, cwd=dest).split()}
    doomed = [
        ref
        for ref in git("for-each-ref", "--format=%(refname)", "refs/heads", "refs/tags", cwd=dest).split()
        if ref not in past
    ]
    if doomed:
        git("update-ref", "--stdin", cwd=dest, stdin="".join(f"delete {ref}\n" for ref in doomed))
    git("config", "user.email", "clover@localhost", cwd=dest)
    git("config", "user.name", "clover", cwd=dest)
    return dest


def extract_patch(workspace: str | Path, base_commit: str, exclude: list[str] | None = None) -> str:
    """Everything changed since base_commit, new files included, minus the paths in `exclude`
    (the files the test patch touches: the grader brings its own)."""
    git("add", "-A", cwd=workspace)
    specs = [f":(exclude,literal){p}" for p in (exclude or [])]
    diff = git("-c", "core.fileMode=false", "diff", "--cached", base_commit, "--", ".", *specs, cwd=workspace)
    git("reset", "--quiet", cwd=workspace)  # leave the index as the agent had it
    return diff


def files_of_test_patch(instance: Instance) -> list[str]:
    return modified_files(instance["test_patch"])


# --------------------------------------------------------------------------- docker


def docker_problem() -> str | None:
    """None when a Docker daemon answers, else one line saying why not."""
    if shutil.which("docker") is None:
        return "--env docker needs Docker, and the docker command is not installed here; use --env local"
    try:
        proc = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return "--env docker: the Docker daemon does not answer; use --env local"
    if proc.returncode != 0 or not proc.stdout.strip():
        return "--env docker: the Docker daemon is not reachable (docker info failed); use --env local"
    return None


def instance_image(
    instance_id: str, namespace: str = "swebench", arch: str = "x86_64", tag: str = "latest"
) -> str:
    """The official per-instance image name (Docker Hub spells `__` as `_1776_`)."""
    return f"{namespace}/sweb.eval.{arch}.{instance_id.replace('__', '_1776_').lower()}:{tag}"


def docker_run_command(instance_id: str, container: str, image: str | None = None) -> list[str]:
    return [
        "docker",
        "run",
        "-d",
        "--rm",
        "--name",
        container,
        "-w",
        "/testbed",
        image or instance_image(instance_id),
        "sleep",
        "infinity",
    ]
