"""The frozen evaluation set: hand-written bugs that nothing is tuned to.

Written before the edit-choice and issue-parser rules were last changed, in another style than
evals/handwritten and SynthFix: issues as people file them (bug-report templates, pasted tracebacks
and logs, a failing CI test, prose without an expected value, REPL sessions without fences), small
packages with pyproject/setup.cfg test paths, and fixes that are not only one-site mutations
(missing lines, wrong variables, two files, a missing import, a different approach).

Rules: never train on it, never read its trajectories while changing rules or data; report only.
The set is pinned by `set_hash()` (sha256 of a canonical listing of its files), which
MODEL_CARD.md states and tests/test_frozen_set.py checks: a change to an instance is a new set.

Each instance is one TOML file next to this module (`fz*.toml`):

    id, kind, layout                  kind: the bug's shape ("missing line", "multi-file", ...)
    issue = '''...'''                 the report, as a user would file it
    FAIL_TO_PASS, PASS_TO_PASS        pytest node ids
    [[gold]] path, old, new           the gold fix: edits applied in order (old occurs once then)
    [files]  "path" = '''...'''       the repository at its base commit
    [hidden] "path" = '''...'''       the hidden tests (the test_patch), never shown to the agent

chat.toml holds the frozen chat prompts (benchmarks/chat_frozen.py runs them) and is hashed too.

    python -m clover.evals.frozen     prints the set's hash and instance count
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from clover.core.compat import tomllib
from clover.evals.handwritten import HandwrittenError, repo_rows

HERE = Path(__file__).parent
KEYS = {"id", "kind", "layout", "issue", "FAIL_TO_PASS", "PASS_TO_PASS", "gold", "files", "hidden"}
SPLIT = "frozen"


CHAT = HERE / "chat.toml"  # the frozen chat prompts and their repository


def instance_files() -> list[Path]:
    return sorted(HERE.glob("fz*.toml"))


def set_hash() -> str:
    """sha256 of the canonical listing: one `<sha256 of the file's bytes>  <file name>` line per
    file (the instances, then chat.toml), in name order (what `sha256sum chat.toml fz*.toml` prints)."""
    files = sorted([*instance_files(), CHAT], key=lambda p: p.name)
    listing = "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}\n" for p in files)
    return hashlib.sha256(listing.encode()).hexdigest()


def fixed_files(spec: dict[str, Any]) -> dict[str, str]:
    """The gold fix as {path: the file's text after it}; each edit's old text occurs exactly once
    in the file as the earlier edits left it."""
    out: dict[str, str] = {}
    for edit in spec["gold"]:
        path = edit["path"]
        text = out.get(path, spec["files"].get(path))
        if text is None or text.count(edit["old"]) != 1:
            raise HandwrittenError(f"{spec['id']}: gold old text must occur exactly once in {path}")
        out[path] = text.replace(edit["old"], edit["new"])
    return out


def specs() -> list[dict[str, Any]]:
    """Every instance file, parsed and checked, in file-name order."""
    out = []
    for path in instance_files():
        try:
            spec = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise HandwrittenError(f"{path.name}: {exc}") from None
        missing = KEYS - spec.keys()
        if missing:
            raise HandwrittenError(f"{path.name}: missing {', '.join(sorted(missing))}")
        fixed_files(spec)
        out.append(spec)
    return out


def chat_set() -> dict[str, Any]:
    """The frozen chat prompts and their repository (chat.toml)."""
    return tomllib.loads(CHAT.read_text(encoding="utf-8"))


def materialize(out_dir: Path, count: int | None = None) -> list[dict[str, Any]]:
    """out_dir/repos/<id> for the first `count` instances, and their SWE-bench-style rows."""
    return repo_rows(specs()[:count], out_dir, fixed_files, prefix=SPLIT, split=SPLIT)
