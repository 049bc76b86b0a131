"""The red team's attack rows (all but the host-git ones) and new spellings of each class, as data.

Every command, run by plain bash in a workspace from `tests.safety_attacks.make_workspace`, removes
the directory `t` or creates `pwned` (test_safety_exec.py proves that per row); after the fix the
same command, through Clover, is refused or contained. Commands name the programs they need
(`needs`): a row whose program is not installed here is skipped, with that reason.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

DENY = ["bash(rm -rf *)", "bash(git push*)", "bash(curl*)"]


@dataclass(frozen=True)
class Row:
    command: str
    needs: tuple[str, ...] = ()
    setup: str = ""  # run first, by plain bash, to build what the row uses (an archive)
    note: str = ""
    tags: frozenset[str] = field(default_factory=frozenset)

    def missing(self) -> str | None:
        gone = [n for n in self.needs if shutil.which(n) is None]
        return f"{', '.join(gone)} not installed" if gone else None

    @property
    def id(self) -> str:
        return self.command.replace("\n", "⏎")[:70]


# --------------------------------------------------------------------------- deny rules in yolo

DENY_ROWS = [
    Row("rm --rec --fo t"),
    Row("cp /bin/rm ./del; ./del -rf t"),
    Row("setarch x86_64 rm -rf t", ("setarch",)),
    Row("bwrap --dev-bind / / rm -rf t", ("bwrap",)),
    Row("linux64 rm -rf t", ("linux64",)),
    Row("choom -n 0 -- rm -rf t", ("choom",)),
    Row("ssh-agent rm -rf t", ("ssh-agent",)),
    Row("tmux -L clover-row47 new-session -d 'rm -rf t'; sleep 1", ("tmux",)),
    Row("python3 -Wonce -c \"import os; os.system('rm -rf t')\"", ("python3",)),
    Row("python3 -Ximporttime -c \"import os; os.system('rm -rf t')\"", ("python3",)),
    Row("python3 -m timeit -n1 \"import os; os.system('rm -rf t')\"", ("python3",)),
    Row("python3 -c \"import pydoc; pydoc.pipepager('', 'rm -rf t')\"", ("python3",)),
    Row("test -v 'a[$(rm -rf t)]'"),
    Row("printf -v 'a[$(rm -rf t)]' x"),
    Row("declare -n r='a[$(rm -rf t)]'; echo $r"),
    Row("sed '-e1e rm -rf t' f", ("sed",)),
    Row("sed --expr='1e rm -rf t' f", ("sed",)),
    Row("echo '1e rm -rf t' | sed -f /dev/stdin f", ("sed",)),
    Row("echo 'BEGIN{system(\"rm -rf t\")}' | awk -f /dev/stdin", ("awk",)),
    Row("ed -s f <<< '!rm -rf t'", ("ed",)),
    Row("ex -s f <<< '!rm -rf t'", ("ex",)),
    Row("vim -es f <<< '!rm -rf t'", ("vim",)),
    Row("git fetch -q --upload-pa='rm -rf t; git-upload-pack' .", ("git",)),
    Row("git rebase -q --root -qx 'rm -rf t'", ("git",)),
    Row("echo x >> f; git difftool -yx 'rm -rf t'", ("git",)),
    Row("tar --to-com='rm -rf t' -xf a.tar", ("tar",), setup="tar -cf a.tar f"),
    Row("TAR_OPTIONS='--checkpoint=1 --checkpoint-action=exec=rm\\ -rf\\ t' tar -cf x.tar f", ("tar",)),
    Row("zip -qT -TT'rm -rf t' z f", ("zip",)),
    Row("git config protocol.allow always; git fetch 'ext::sh -c rm% -rf% t'", ("git",)),
    Row("git clone -qc core.sshCommand='rm -rf t' ssh://x/y z", ("git",)),
    Row("for PATH in evil:/usr/bin; do ls; done"),
]

# New spellings of the same classes (other interpreters, wrappers, abbreviations, links, loaders,
# multi-call binaries, programs that run their arguments, recipes, hooks, aliases).
DENY_NEW = [
    Row("perl -e 'system(\"rm -rf t\")'", ("perl",)),
    Row('node -e \'require("child_process").execSync("rm -rf t")\'', ("node",)),
    Row(
        "python3 -c \"import os; os.execv('/bin/rm', ['ls', '-rf', 't'])\"", ("python3",), note="argv[0] lies"
    ),
    Row("python3 -c \"import subprocess; subprocess.run(['rm', '-r', '--force', 't'])\"", ("python3",)),
    Row("rm --recu --forc t"),
    Row("rm -r --fo -- t"),
    Row("X=1 rm -rf t"),
    Row("nice -n 5 stdbuf -oL timeout 10 rm -rf t", ("stdbuf",)),
    Row("flock lockfile rm -rf t", ("flock",)),
    Row("setsid rm -rf t; sleep 1", ("setsid",)),
    Row("script -qc 'rm -rf t' /dev/null", ("script",)),
    Row("bash <<EOF\nrm -rf t\nEOF"),
    Row("env -S 'rm -rf t'"),
    Row("exec -a ls rm -rf t"),
    Row("ln /bin/rm del 2>/dev/null || cp /bin/rm del; ./del -rf t"),
    Row("ln -s /bin/rm r; ./r -rf t"),
    Row("cat /bin/rm > x; chmod +x x; ./x -rf t"),
    Row("printf '#!/bin/rm -rf\\n' > x; chmod +x x; ./x t"),
    Row("/lib64/ld-linux-x86-64.so.2 /bin/rm -rf t", note="the loader runs rm in-process"),
    Row(
        "python3 -c \"import os; fd = os.memfd_create('x'); os.write(fd, open('/bin/rm', 'rb').read()); "
        "os.execv(f'/proc/self/fd/{fd}', ['x', '-rf', 't'])\"",
        ("python3",),
        note="a file that is only memory",
    ),
    Row(
        "python3 -c \"import os; fd = os.open('/bin/rm', os.O_RDONLY); os.execve(fd, ['x', '-rf', 't'], {})\"",
        ("python3",),
        note="fexecve: execveat(fd, '', AT_EMPTY_PATH)",
    ),
    Row("busybox rm -rf t", ("busybox",)),
    Row('mkdir b; ln -s "$(command -v busybox)" b/rm; b/rm -rf t', ("busybox",)),
    Row("find . -maxdepth 1 -name t -exec rm -rf {} +", ("find",)),
    Row("echo t | xargs rm -rf", ("xargs",)),
    Row("printf 'all:\\n\\trm -rf t\\n' > Makefile; make -s", ("make",)),
    Row("git -c alias.x='!rm -rf t' x", ("git",)),
    Row(
        "printf '#!/bin/sh\\nrm -rf t\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; "
        "git -c user.name=a -c user.email=a@a commit -q --allow-empty -m x",
        ("git",),
    ),
    Row("git -c user.name=a -c user.email=a@a -c core.editor='rm -rf t' commit -q --allow-empty", ("git",)),
    Row("awk 'BEGIN { print | \"rm -rf t\" }'", ("awk",)),
    Row("F=rm; $F -rf t"),
    Row("eval \"$(printf 'cm0gLXJmIHQ=' | base64 -d)\"", ("base64",)),
]

# --------------------------------------------------------------------------- ask mode, allow rules


@dataclass(frozen=True)
class AllowRow:
    command: str
    allow: tuple[str, ...]
    needs: tuple[str, ...] = ()
    setup: str = ""

    def missing(self) -> str | None:
        gone = [n for n in self.needs if shutil.which(n) is None]
        return f"{', '.join(gone)} not installed" if gone else None


ALLOW_ROWS = [
    AllowRow("for HOME in evil; do git status --short; done", ("bash(git status*)",), ("git",)),
    AllowRow("test -v 'a[$(touch pwned)]'", ("bash(test *)",)),
    AllowRow("git fetch -q --upload-pa='touch pwned; git-upload-pack' .", ("bash(git fetch*)",), ("git",)),
    AllowRow("tar --to-com='touch pwned' -xf a.tar", ("bash(tar *)",), ("tar",), setup="tar -cf a.tar f"),
    AllowRow("sed -n '1e touch pwned' f", ("bash(sed -n *)",), ("sed",)),
    AllowRow("git log -1 --output=pwned --format='tformat:import os'", ("bash(git log*)",), ("git",)),
]
ALLOW_NEW = [
    AllowRow("sort --outp=pwned f", ("bash(sort *)",), ("sort",)),
    AllowRow(
        "git diff --ext-diff HEAD",
        ("bash(git diff*)",),
        ("git",),
        setup="git config diff.external 'touch pwned #'; echo x >> f",
    ),
    AllowRow("git status", ("bash(git status*)",), ("git",), setup="git config core.fsmonitor 'touch pwned'"),
    AllowRow("printf -v 'a[$(touch pwned)]' x", ("bash(printf *)",)),
    AllowRow("sort -o pwned f", ("bash(sort *)",), ("sort",)),
    AllowRow("find . -name f -fprint pwned", ("bash(find *)",), ("find",)),
    AllowRow(
        "rg --pre ./p.sh x .",
        ("bash(rg *)",),
        ("rg",),
        setup="printf '#!/bin/sh\\ntouch pwned\\n' > p.sh; chmod +x p.sh",
    ),
    AllowRow("make --eva='x: ; touch pwned' x", ("bash(make *)",), ("make",)),
    AllowRow("python3 -c \"import os; os.system('touch pwned')\"", ("bash(python3 *)",), ("python3",)),
    AllowRow("timeout 5 bash -c 'touch pwned'", ("bash(timeout *)",)),
    AllowRow("git status; touch pwned", ("bash(git status*)",), ("git",)),
    AllowRow("echo ok > pwned", ("bash(echo *)",)),
    AllowRow("printf 'all:\\n\\ttouch pwned\\n' | make -f - ", ("bash(printf *)", "bash(make *)"), ("make",)),
    AllowRow(
        "python3 -m mod",
        ("bash(python3 -m mod:*)",),
        ("python3",),
        setup="printf 'import os\\nos.system(\"touch pwned\")\\n' > mod.py",
    ),
]

# git runs an alias inside itself (no program start for it): a deny rule naming a git command
# refuses a git command that may be an alias, at the exec check too (a script hides it from the parser).
GIT_ALIAS_ROWS = [
    Row("git config alias.p push; printf 'git p -q origin main\\n' > s.sh; sh s.sh", ("git",)),
    Row("printf 'git -c alias.p=push p -q origin main\\n' > s.sh; sh s.sh", ("git",)),
]
