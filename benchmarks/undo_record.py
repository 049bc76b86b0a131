"""Cost of making a step undoable, old vs new, side by side in one process.

Old: the design the recorder replaced, one whole-tree snapshot before each step with the git
program: `git add -A` into a shadow index and `git write-tree` into a separate object store (the
old store also copied `.git`'s state and listed ignored files, so this baseline is a lower bound
of the old cost; the replaced code is in git history). New
(tools/undo/checkpoints.py): a scan before and after each tool call that may write (stat only for
files already read; new contents into the object store through libgit2), and the change record.
Measured on a copy of this repository's tracked files and on a synthetic 5,000-file tree; one
step in three edits a file (the others read, as view/grep do). `first` is the cold start (every
file read once).

    python -m benchmarks.undo_record [--steps 16] [--files 5000]
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

from clover.tools.undo.checkpoints import Checkpoints

REPO = Path(__file__).resolve().parents[1]


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def copy_of_this_repo(dest: Path) -> int:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout.split(
        b"\0"
    )
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
        (d / f"mod{i % per_dir:03d}.py").write_text(
            "".join(f"def f{j}(x):\n    return x + {i + j}\n" for j in range(20))
        )
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


def whole_tree_snapshot(root: Path, store: Path) -> None:
    """The old design's core: every file of the tree into a shadow index and a tree object."""
    if not (store / "HEAD").exists():
        subprocess.run(["git", "init", "-q", "--bare", str(store)], check=True, capture_output=True)
    env = {
        "GIT_DIR": str(store),
        "GIT_WORK_TREE": str(root),
        "GIT_INDEX_FILE": str(store / "shadow-index"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(["git", "add", "-A", "--", "."], cwd=root, env=env, check=True, capture_output=True)
    subprocess.run(["git", "write-tree"], cwd=root, env=env, check=True, capture_output=True)


def old_steps(root: Path, store: Path, steps: int, every: int) -> list[float]:
    """A snapshot before every step (read-only ones too); 1 step in `every` edits."""
    out = []
    for i in range(steps):
        out.append(timed(lambda: whole_tree_snapshot(root, store)))
        if i % every == 0:
            edit(root, i)
    return out


def new_steps(root: Path, store: Path, steps: int, every: int) -> list[float]:
    """A scan before and after each step that may write (1 in `every`); read-only steps: nothing."""
    cp = Checkpoints(str(root), store=str(store))
    out = []
    for i in range(steps):
        if i % every:
            out.append(0.0)
            continue
        before = timed(cp.begin)
        edit(root, i)  # the tool call itself is not timed
        out.append(before + timed(lambda i=i: cp.end("bench", 1, "bench", i)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--files", type=int, default=5000)
    args = parser.parse_args()
    every = 3
    print(
        f"{'tree':<16} {'files':>6} {'old first':>10} {'new first':>10} {'old write':>10} {'new write':>10} "
        f"{'ratio':>6} {'old mean':>9} {'new mean':>9} {'ratio':>6}"
    )
    for kind in ("this repository", "synthetic"):
        with tempfile.TemporaryDirectory() as tmp:
            rows = {}
            for name, run in (("old", old_steps), ("new", new_steps)):
                root = Path(tmp) / f"{name}-tree"
                count = make_tree(kind, root, args.files)
                rows[name] = run(root, Path(tmp) / f"{name}-store", args.steps, every)
            old, new = rows["old"], rows["new"]
            writes = [i for i in range(every, args.steps) if i % every == 0]
            old_w = statistics.median(old[i] for i in writes)
            new_w = statistics.median(new[i] for i in writes)
            old_m, new_m = statistics.mean(old[1:]), statistics.mean(new[1:])
            print(
                f"{kind:<16} {count:>6} {old[0] * 1000:>8.0f}ms {new[0] * 1000:>8.0f}ms {old_w * 1000:>8.0f}ms "
                f"{new_w * 1000:>8.0f}ms {new_w / old_w:>5.2f}x {old_m * 1000:>7.0f}ms {new_m * 1000:>7.0f}ms "
                f"{new_m / old_m:>5.2f}x"
            )
    print(
        f"write: median cost of a step that edits a file; mean: over all steps, 1 in {every} editing "
        "(the old store snapshots before every step, the new one records only calls that may write)"
    )


if __name__ == "__main__":
    main()
