"""A hand-written evaluation set: tiny repositories, each with a one-line bug and an issue written the
way people write them. Never used for training.

Each instance is one TOML file next to this module (`hw*.toml`), written by hand:

    id = "hw01-fahrenheit"            family = "wrong sign"          layout = "flat" | "src"
    issue = '''...'''                 the problem statement, as a user would file it
    FAIL_TO_PASS = [...]              PASS_TO_PASS = [...]           pytest node ids
    [fix]    path, old, new           the gold one-line fix (old occurs exactly once in path)
    [files]  "path" = '''...'''       the repository at its base commit (visible tests included)
    [hidden] "path" = '''...'''       the hidden tests (the test_patch), never shown to the agent

`materialize(dir)` turns them into SWE-bench-style rows (repo = a real git repository with one
commit, patch and test_patch as git diffs), the format `clover bench` and evals/synthfix use.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clover.core.compat import tomllib
from clover.evals.git import GitError, Identity, git

HERE = Path(__file__).parent
# Every materialized repository is the same byte for byte: its one commit has a fixed author and date.
AUTHOR = Identity("clover", "clover@example.invalid", "2024-01-01T00:00:00Z")
KEYS = {"id", "family", "layout", "issue", "FAIL_TO_PASS", "PASS_TO_PASS", "fix", "files", "hidden"}


class HandwrittenError(ValueError):
    """A malformed instance file; the message names the file."""


def specs() -> list[dict[str, Any]]:
    """Every instance file, parsed and checked, in file-name order."""
    out = []
    for path in sorted(HERE.glob("hw*.toml")):
        try:
            spec = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise HandwrittenError(f"{path.name}: {exc}") from None
        missing = KEYS - spec.keys()
        if missing:
            raise HandwrittenError(f"{path.name}: missing {', '.join(sorted(missing))}")
        fix = spec["fix"]
        source = spec["files"].get(fix["path"])
        if source is None or source.count(fix["old"]) != 1:
            raise HandwrittenError(f"{path.name}: fix.old must occur exactly once in {fix['path']}")
        out.append(spec)
    return out


def _git(repo: Path, *args: str, stdin: str | None = None) -> str:
    try:
        return git(repo, *args, stdin=stdin, identity=AUTHOR).stdout
    except GitError as exc:
        raise HandwrittenError(str(exc)) from None


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _diff_of(repo: Path, files: dict[str, str]) -> str:
    """The git diff that writing `files` over the base commit makes (the tree is reset after)."""
    _write(repo, files)
    _git(repo, "add", "-A")
    diff = _git(repo, "diff", "--cached", "HEAD")
    _git(repo, "reset", "-q", "--hard", "HEAD")
    return diff


def materialize(out_dir: Path, count: int | None = None) -> list[dict[str, Any]]:
    """Create out_dir/repos/<id> (a git repository at the base commit) for the first `count` instances
    and return their SWE-bench-style rows."""

    def fixed(spec: dict[str, Any]) -> dict[str, str]:
        fix = spec["fix"]
        return {fix["path"]: spec["files"][fix["path"]].replace(fix["old"], fix["new"])}

    return repo_rows(specs()[:count], out_dir, fixed, prefix="handwritten", split="handwritten")


def repo_rows(
    spec_list: list[dict[str, Any]], out_dir: Path, fixed: Any, *, prefix: str, split: str
) -> list[dict[str, Any]]:
    """SWE-bench-style rows for hand-written instances (`files`, `hidden`, `issue`, the test lists):
    each is a git repository at out_dir/repos/<id> with one commit; `fixed(spec)` gives the gold
    fix as {path: new text}. Reused when the repository exists (idempotent)."""
    rows = []
    for spec in spec_list:
        repo = Path(out_dir).absolute() / "repos" / spec["id"]
        repo.mkdir(parents=True, exist_ok=True)
        if not (repo / ".git").exists():
            _git(repo, "init", "-q", "-b", "main")
            _write(repo, spec["files"])
            _git(repo, "add", "-A")
            _git(repo, "commit", "-q", "-m", "base")
        base = _git(repo, "rev-parse", "HEAD").strip()
        rows.append(
            {
                "instance_id": f"{prefix}__{spec['id']}",
                "repo": str(repo),
                "base_commit": base,
                "problem_statement": spec["issue"].strip() + "\n",
                "patch": _diff_of(repo, fixed(spec)),
                "test_patch": _diff_of(repo, spec["hidden"]),
                "FAIL_TO_PASS": json.dumps(spec["FAIL_TO_PASS"]),
                "PASS_TO_PASS": json.dumps(spec["PASS_TO_PASS"]),
                "version": "1.0",
                "environment_setup_commit": base,
                "hints_text": "",
                "family": spec.get("family", spec.get("kind", "")),
                "layout": spec["layout"],
                "split": split,
            }
        )
    return rows
