"""The permission-layer attacks, as data: the tests drive the real decision
function and the real agent with them, and a one-off script can replay them against older code.

Every command here, if run, creates `pwned` or removes the directory `t` (or pushes / fetches), so
an end-to-end test can check the marker instead of trusting the decision."""

from __future__ import annotations

import subprocess
from pathlib import Path

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]

# Item 1: allow-rule smuggling in the default ask mode (the README's example rules).
SMUGGLE_ALLOW = ["bash(git status*)", "bash(echo *)", "bash(cat *)"]
SMUGGLED = [
    "git status ${X:-$(touch pwned)}",
    "echo ${X:=$(touch pwned)}",
    "echo ${X:-`touch pwned`}",
    "cat <<EOF\n$(touch pwned)\nEOF",
    "cat <<EOF\n${X:-$(touch pwned)}\nEOF",
    "cat f 1<>pwned",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch pwned' git status",
    "GIT_CONFIG_PARAMETERS=\"'core.fsmonitor=touch pwned'\" git status",
    "env GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor GIT_CONFIG_VALUE_0='touch pwned' git status",
    "PATH=evil:$PATH git status",
    "LD_PRELOAD=evil.so git status",
    "BASH_ENV=evil.sh bash -c 'cat f'",
    "HOME=evil git status",
    "git status; export GIT_CONFIG_PARAMETERS=\"'alias.st=!touch pwned'\"",
]

# Smuggled commands with no effect on their own (they set up a later step, or need a built library).
SETUP_ONLY = {
    "LD_PRELOAD=evil.so git status",
    "git status; export GIT_CONFIG_PARAMETERS=\"'alias.st=!touch pwned'\"",
}

# Item 2: deny rules bypassed in yolo.
DENY = ["bash(rm -rf *)", "bash(git push*)", "bash(curl*)"]
BYPASSES = [
    "X=rm; $X -rf t",
    "$'rm' -rf t",
    "rm t -rf",
    "rm -r{f,} t",
    "bash -c -- 'rm -rf t'",
    "coproc rm -rf t",
    "shopt -s expand_aliases\nalias r='rm -rf'\nr t",
    "hash -p /bin/rm del\ndel -rf t",
    "trap 'rm -rf t' EXIT",
    "git -c alias.p=push p origin main",
    "C=curl; $C file:///etc/hostname -o pwned",
    "rm --recursive --force t",
    "rm -R t --force",
    "rm -v t -r -f",
    "F=-rf; rm $F t",
    "echo t | xargs rm -rf",
    "echo -rf t | xargs rm",
    "/bin/r[m] -rf t",
    "{rm,-rf,t}",
    'f() { rm "$@"; }; f -rf t',
    "git -c alias.p='!rm -rf t' p",
    "git $(echo push) origin main",
    "PATH=evil:$PATH ls",
    'eval "$(echo cm0gLXJmIHQ= | base64 -d)"',
    "echo ${X:-$(rm -rf t)}",
    "cat <<EOF\n$(rm -rf t)\nEOF",
    "command -p rm -rf t",
    "builtin eval 'rm -rf t'",
    "exec rm -rf t",
    "nohup rm -rf t",
    "time rm -rf t",
    "timeout 5 rm -rf t",
    "env -S 'rm -rf t'",
    "sh -c \"sh -c 'rm -rf t'\"",
    "true && (cd . && rm -rf t)",
    "echo x > >(rm -rf t)",
    "rm -rf t &",
    "[[ -d t ]] && rm -rf t",
    "flock lockfile rm -rf t",
    "script -qc 'rm -rf t' /dev/null",
    "r\\\nm -rf t",
    "rm$IFS-rf t",
    "env -S'rm -rf t'",
    "env --split-string='rm -rf t'",
    "git fetch -q --upload-pack='rm -rf t; git-upload-pack' .",
    "git rebase -q --root -x 'rm -rf t'",
    "bash <(echo 'rm -rf t')",
    "source /dev/stdin <<< 'rm -rf t'",
    "echo 'rm -rf t' | source /dev/stdin",
    "bash < <(echo rm -rf t)",
    "git config core.fsmonitor 'rm -rf t'; git status",
    "git config alias.x '!rm -rf t'; git x",
]


def make_workspace(root: Path) -> Path:
    """A git repository on `main` with a bare remote `origin`, a directory `t` to delete, a file `f`
    to read, and the planted helpers the attacks point at (`evil/ls`, `evil.sh`, `evil/.gitconfig`)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "t").mkdir()
    (root / "t" / "keep").write_text("keep\n")
    (root / "f").write_text("hello\n")
    (root / ".gitignore").write_text("evil/\nevil.sh\npwned\n")
    subprocess.run([*GIT, "init", "-q", "--bare", str(root.parent / "origin.git")], check=True)
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["commit", "-qm", "init"],
        ["remote", "add", "origin", "../origin.git"],
    ):  # relative: the tree can be copied
        subprocess.run([*GIT, *args], cwd=root, check=True, capture_output=True)
    evil = root / "evil"
    evil.mkdir()
    (evil / "ls").write_text("#!/bin/sh\nrm -rf t\n")
    (evil / "ls").chmod(0o755)
    (evil / "git").write_text("#!/bin/sh\ntouch pwned\n")
    (evil / "git").chmod(0o755)
    (evil / ".gitconfig").write_text("[core]\n\tfsmonitor = touch pwned\n")
    (root / "evil.sh").write_text("touch pwned\n")
    return root


def effects(root: Path) -> set[str]:
    """What the attacks left behind: `t` gone, `pwned` made, `main` pushed to origin."""
    found = set()
    if not (root / "t" / "keep").exists():
        found.add("t removed")
    if (root / "pwned").exists():
        found.add("pwned")
    pushed = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", "refs/heads/main"],
        cwd=root.parent / "origin.git",
        capture_output=True,
    )
    if pushed.returncode == 0:
        found.add("pushed")
    return found
