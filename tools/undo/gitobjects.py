"""Whether writing a git directory's ref file back would name objects the repository no longer has.

Undo records a repository's refs, HEAD, index and stash list, not its history (objects/: only ever
added to, and too big to copy). So an agent step that destroys history (`rm -rf .git && git init`,
`git reflog expire --expire=now --all && git gc --prune=now`) cannot be undone there, and writing
the old refs back would make things worse: a HEAD naming a commit that is gone breaks every git
command ("fatal: bad object HEAD"). The undo plan asks `missing_objects` first and leaves such a
file alone, as a conflict that says why. Objects are looked up through libgit2's object database
(loose objects, packs, alternates): no program runs, the repository's config is not read.
"""

from __future__ import annotations

import os
import re
from typing import Any

from clover.tools.undo.treescan import is_gitdir

# Files of a git directory that name objects: HEAD and its kin, refs, packed refs, the stash list.
_REF_FILES = re.compile(
    r"(HEAD|ORIG_HEAD|FETCH_HEAD|MERGE_HEAD|CHERRY_PICK_HEAD|REVERT_HEAD|packed-refs"
    r"|refs/.+|logs/refs/stash)"
)
_OID = re.compile(rb"(?<![0-9a-f])[0-9a-f]{40}(?![0-9a-f])")
_NULL = b"0" * 40
_GITLINK = b"160000 "  # an index entry of a submodule names a commit of that other repository


def gitdir_of(root: str, rel: str) -> str | None:
    """The git directory (relative to root) that `rel` lies in, as the tree is now; None outside one."""
    parts = rel.split("/")
    for cut in range(len(parts) - 1, 0, -1):
        top = "/".join(parts[:cut])
        full = os.path.join(root, top)
        try:
            if is_gitdir(set(os.listdir(full)), full):
                return top
        except OSError:
            continue
    return None


def names_objects(inner: str, index: bool) -> bool:
    """Whether a file at `inner` (its path inside the git directory) names objects."""
    return index or bool(_REF_FILES.fullmatch(inner))


def missing_objects(gitdir: str, data: bytes, cache: dict[str, Any]) -> list[str]:
    """The object ids `data` names that the repository at `gitdir` does not have (first few)."""
    import pygit2

    odb = cache.get(gitdir)
    if odb is None:
        try:
            odb = cache[gitdir] = pygit2.Odb(os.path.join(gitdir, "objects"))
        except (pygit2.GitError, OSError, ValueError):
            return []  # cannot look: the plan goes on as before
    lines = (ln for ln in data.splitlines() if not ln.startswith(_GITLINK))
    named = dict.fromkeys(oid for ln in lines for oid in _OID.findall(ln) if oid != _NULL)
    return [oid.decode() for oid in named if not odb.exists(oid.decode())][:3]
