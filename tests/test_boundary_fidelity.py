"""The boundary costs real work nothing: the commands coding agents run on a repository (reading,
searching, a reproduce script, `sed -i`, pytest, git's own commands, links, modes, background
jobs, files made by a script) give the same output, the same exit codes and the same repository
behind the whole safety layer (sandbox, exec check, step boundary, as `build_environment` makes it)
as through the same environment with all of it off.

Slow (two runs of 30 commands behind namespaces): CI runs it by name (.ci/run)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from clover.runner import build_environment
from clover.settings import Settings
from clover.tools.environment import LocalEnvironment
from clover.tools.safety.boundary import available
from clover.tools.safety.sandbox import bwrap_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not installed"),
    pytest.mark.skipif(
        not available("/tmp/clover-test-steps")[0], reason="user namespaces or overlayfs are missing here"
    ),
]

# -B: no bytecode. CPython trusts a .pyc whose source has the same size and the same mtime to the
# second, so `sed -i` within a second of an import leaves the old code running: which side of a second
# each run's steps fall on would decide the outcome, not the boundary.
PY = f"{sys.executable} -B"
COMMANDS = [
    "ls",
    "cat pkg/calc.py",
    'grep -rn "def add" --include=*.py .',
    "find . -name '*.py' -not -path './.git/*' | sort",
    f"{PY} -c 'import pkg.calc as c; print(c.add(2, 3))'",
    "cat > reproduce.py << 'EOF'\nfrom pkg.calc import add\nprint('add(2, 3) =', add(2, 3))\nEOF",
    f"{PY} reproduce.py",
    f"{PY} -m pytest -q -p no:cacheprovider tests 2>&1 | tail -1",
    "sed -i 's/return a - b/return a + b/' pkg/calc.py && git diff --stat",
    f"{PY} -m pytest -q -p no:cacheprovider tests 2>&1 | tail -1",
    "git status --short",
    "mkdir -p build/out && echo hi > build/out/x.txt && mv build/out/x.txt build/y.txt && rm -r build/out",
    "chmod +x reproduce.py && ls -l reproduce.py | cut -c1-10",
    "ln -s pkg/calc.py link.py && readlink link.py && cat link.py | head -1",
    "cd pkg && pwd && ls",
    "cd .. && export FIXED=yes",
    "echo $FIXED && pwd",
    "(sleep 0.3; echo late > bg.txt) & wait; cat bg.txt",
    f"{PY} - << 'EOF'\nimport pathlib\npathlib.Path('gen').mkdir()\n"
    "for i in range(40):\n    pathlib.Path(f'gen/{i}.txt').write_text(str(i))\n"
    "print(len(list(pathlib.Path('gen').iterdir())))\nEOF",
    "git stash -q && git status --short | wc -l && git stash pop -q && git status --short | wc -l",
    "git checkout -q -b fix && git add -A && git commit -qm 'Fix add' && git log --oneline | wc -l",
    "git branch --list | sort",
    "rm reproduce.py && git rm -q --cached reproduce.py && git commit -qm 'drop reproduce' && git status --short",
    "echo '*.log' >> .gitignore && touch run.log && git status --short",
    "git diff HEAD~1 --stat | tail -1",
    "printf 'a\\nb\\n' > two.txt && wc -l < two.txt",
    "python3 -c 'import sys; sys.exit(3)'; echo exit=$?",
    "test -e nope.txt || echo absent",
    "false",
    "git log --format=%s",
]


def _repo(path: Path) -> Path:
    (path / "pkg").mkdir(parents=True)
    (path / "tests").mkdir()
    (path / "pkg" / "__init__.py").write_text("")
    (path / ".gitignore").write_text("__pycache__/\n")  # a .pyc holds its source's mtime
    (path / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (path / "tests" / "test_calc.py").write_text(
        "from pkg.calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    git = ["git", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=path, check=True)
    subprocess.run(["git", "config", "user.name", "user"], cwd=path, check=True)
    subprocess.run(["git", "config", "user.email", "u@u"], cwd=path, check=True)
    subprocess.run(["git", "add", "."], cwd=path, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=path, check=True)
    return path


def _normal(text: str, root: Path) -> str:
    text = text.replace(str(root), "ROOT")
    text = re.sub(r"\bin \d+\.\d+s\b", "in Ns", text)  # pytest's duration
    return re.sub(r"\[\w+ [0-9a-f]{7}\]", "[branch sha]", text)


def _tree(root: Path) -> dict[str, tuple[str, str]]:
    """Every path but .git's internals: kind + mode bits, and content or link target."""
    out: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", "__pycache__")]
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                out[rel] = ("dir", oct(info.st_mode & 0o777))
            else:
                out[rel] = (oct(info.st_mode & 0o777), path.read_text())
    return out


def _git_state(root: Path) -> list[str]:
    def run(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout

    return [run("log", "--all", "--format=%s %T"), run("branch", "--list"), run("status", "--porcelain")]


def _run_all(env: LocalEnvironment, root: Path) -> list[tuple[int, str]]:
    out = []
    for command in COMMANDS:
        result = env.execute(command, timeout=60)
        out.append((result.returncode, _normal(result.output, root)))
    return out


def test_agent_commands_run_the_same_behind_the_whole_safety_layer(tmp_path):
    plain_root = _repo(tmp_path / "plain" / "repo")
    guarded_root = _repo(tmp_path / "guarded" / "repo")
    plain = LocalEnvironment(str(plain_root))
    settings = Settings(sandbox=True, exec_check=None, boundary=True, checkpoints=False)
    guarded = build_environment(settings, guarded_root)
    assert getattr(guarded, "boundary", None) is not None and guarded.wrap_command is not None
    expected = _run_all(plain, plain_root)
    got = _run_all(guarded, guarded_root)
    differing = [
        (command, want, have)
        for command, want, have in zip(COMMANDS, expected, got, strict=True)
        if want != have
    ]
    assert not differing, differing
    assert _tree(guarded_root) == _tree(plain_root)
    assert _git_state(guarded_root) == _git_state(plain_root)
