"""Cost of making a step undoable, old vs new, side by side in one process.

Old (benchmarks/legacy_checkpoints.py): one whole-tree snapshot before each step, with the git
program (`git add -A` into a shadow index, ls-files, write-tree, mktree). New
(tools/checkpoints.py): a scan before and after each tool call that may write (stat only for
files already read; new contents into the object store through libgit2), and the change record.
Measured on a copy of this repository's tracked files and on a synthetic 5,000-file tree; each
step edits one file. `first` is the cold start (every file read once), `step` the median of the
following steps.

    python benchmarks/undo_record.py [--steps 15] [--files 5000]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.legacy_checkpoints import Checkpoints as OldCheckpoints
from clover.tools.checkpoints import Checkpoints

REPO = Path(__file__).resolve().parents[1]


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def copy_of_this_repo(dest: Path) -> int:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(b"\0")
    count = 0
    for name in filter(None, files):
        src = REPO / name.decode()
        if src.is_file() and not src.is_symlink():
            (dest / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name.decode())
            count += 1
    return count


def synthetic_tree(dest: Path, files: int) -> int:
    per_dir = 100
    for i in range(files):
        d = dest / f"pkg{i // per_dir:03d}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i % per_dir:03d}.py").write_text("".join(f"def f{j}(x):\n    return x + {i + j}\n" for j in range(20)))
    return files


def make_tree(kind: str, root: Path, files: int) -> int:
    root.mkdir()
    count = copy_of_this_repo(root) if kind == "this repository" else synthetic_tree(root, files)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "init")
    return count


def edit(root: Path, i: int) -> None:
    target = sorted(p for p in root.rglob("*.py") if ".git" not in p.parts)[i % 7]
    with open(target, "a") as fh:
        fh.write(f"# step {i}\n")


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def old_steps(root: Path, store: Path, steps: int) -> list[float]:
    cp = OldCheckpoints(str(root), store=str(store))
    out = []
    for i in range(steps):
        out.append(timed(lambda i=i: cp.snapshot(f"before step {i}")))
        edit(root, i)
    return out


def new_steps(root: Path, store: Path, steps: int) -> list[float]:
    cp = Checkpoints(str(root), store=str(store))
    out = []
    for i in range(steps):
        before = timed(cp.begin)
        edit(root, i)  # the tool call itself is not timed
        out.append(before + timed(lambda i=i: cp.end("bench", 1, "bench", i)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--files", type=int, default=5000)
    args = parser.parse_args()
    print(f"{'tree':<18} {'files':>6} {'old first':>10} {'new first':>10} {'old step':>9} {'new step':>9} {'new/old':>8}")
    for kind in ("this repository", "synthetic"):
        with tempfile.TemporaryDirectory() as tmp:
            rows = {}
            for name, run in (("old", old_steps), ("new", new_steps)):
                root = Path(tmp) / f"{name}-tree"
                count = make_tree(kind, root, args.files)
                rows[name] = run(root, Path(tmp) / f"{name}-store", args.steps)
            old, new = rows["old"], rows["new"]
            old_step, new_step = statistics.median(old[1:]), statistics.median(new[1:])
            print(f"{kind:<18} {count:>6} {old[0] * 1000:>8.0f}ms {new[0] * 1000:>8.0f}ms "
                  f"{old_step * 1000:>7.1f}ms {new_step * 1000:>7.1f}ms {new_step / old_step:>7.2f}x")


if __name__ == "__main__":
    main()
