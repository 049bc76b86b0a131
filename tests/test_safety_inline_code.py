"""Code written into the command line in another language (`python -c`, `perl -e`, a here-document
fed to an interpreter, an awk `system()`, sed's `e`) and options that hand a command to a shell (ssh's
remote command and ProxyCommand, rsync `-e`, tar `--to-command`). Before tools/safety/shellcode.py, yolo with
`deny = ["bash(rm -rf *)"]` ran every one of these; each is first shown to remove `t` for real."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from clover.tools.safety.permissions import PermissionPolicy
from tests.safety_attacks import DENY, effects, make_workspace

# (command, the program it needs on this machine)
INLINE = [
    ("python3 -c \"import os; os.system('rm -rf t')\"", "python3"),
    ("python3 -c \"__import__('os').system('rm -rf t')\"", "python3"),
    ('python3 -c \'import shutil, subprocess; subprocess.run(["rm", "-rf", "t"])\'', "python3"),
    ("python3 -c 'import os; os.ｓｙｓｔｅｍ(\"rm -rf t\")'", "python3"),  # NFKC: os.system
    ("python3 - <<'EOF'\nimport subprocess\nsubprocess.run('rm -rf t', shell=True)\nEOF", "python3"),
    ("echo \"import os; os.system('rm -rf t')\" | python3", "python3"),
    ("perl -e 'system(\"rm -rf t\")'", "perl"),
    ('node -e \'require("child_process").execSync("rm -rf t")\'', "node"),
    ("awk 'BEGIN { system(\"rm -rf t\") }'", "awk"),
    ('echo | awk \'{ print "rm -rf t" | "sh" }\'', "awk"),
    ("echo x | sed 's/.*/rm -rf t/e'", "sed"),
    ("make -f /dev/stdin <<< $'all:\\n\\trm -rf t'", "make"),
    ("ssh -o ProxyCommand='rm -rf t' -o ConnectTimeout=1 nowhere.invalid true", "ssh"),
    ("tar -cf a.tar f && tar --to-command='rm -rf t' -xf a.tar", "tar"),
    # clustered short options, separate long-option arguments, negated sed addresses, runners
    ("python3 -Ic \"import os; os.system('rm -rf t')\"", "python3"),
    ("perl -we 'system(\"rm -rf t\")'", "perl"),
    ("printf 'a\\nb\\n' | sed '$!e rm -rf t'", "sed"),
    ("tar -cf a.tar f && tar -x --to-command 'rm -rf t' -f a.tar", "tar"),
    ("gdb -batch -ex 'shell rm -rf t'", "gdb"),
]
# Spellings that run a command through another program's options or subcommands (not run here:
# they need a network peer, a project or a scheduler).
RUNNERS = [
    "scp -o ProxyCommand='rm -rf t' a h:b",
    "uv run rm -rf t",
    "poetry run rm -rf t",
    "npm exec -- rm -rf t",
    "bundle exec rm -rf t",
    "perf stat rm -rf t",
    "at now <<< 'rm -rf t'",
    "echo 'rm -rf t' | at now",
]
# Ordinary work that must still run in yolo with deny rules.
HARMLESS = [
    "python3 -c 'print(1 + 1)'",
    "python3 -c 'import json, sys; print(json.dumps({\"a\": 1}))'",
    "python3 -c 'import os; print(os.getcwd())'",
    "python3 - <<'EOF'\nimport sys\nprint(sys.version)\nEOF",
    "python3 -m pytest -q",
    "python3 script.py --flag",
    "awk '{ print $1 }' f",
    "sed -n '1,5p' f",
    "sed 's/a/b/g' f",
    "make test",
    "uv run pytest -q",
    "npm exec -- eslint .",
]


def decide(mode: str, command: str, **rules) -> str:
    return PermissionPolicy(mode, **rules).decide("bash", {"command": command}, False)[0]


@pytest.mark.parametrize("command,program", INLINE)
def test_each_inline_program_really_removes_t(command, program, tmp_path):
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed")
    root = make_workspace(tmp_path / "ws")
    subprocess.run(["bash", "-c", command], cwd=root, capture_output=True, timeout=30)
    assert "t removed" in effects(root), command


@pytest.mark.parametrize("command,program", INLINE)
def test_deny_rules_see_into_inline_programs(command, program):
    assert decide("yolo", command, deny=DENY) == "deny", command
    for mode in ("ask", "auto-edit"):
        assert decide(mode, command, deny=DENY, allow=["bash(*)"]) in ("deny", "ask"), (mode, command)


@pytest.mark.parametrize("command", RUNNERS)
def test_deny_rules_see_through_runners_and_option_commands(command):
    assert decide("yolo", command, deny=DENY) == "deny", command


@pytest.mark.parametrize("command", HARMLESS)
def test_ordinary_inline_code_still_runs_in_yolo_with_deny_rules(command):
    assert decide("yolo", command, deny=DENY) == "allow", command


def test_without_rules_inline_code_is_not_second_guessed():
    """The check only serves rules: in yolo without deny rules the user's choice stands. An allow
    rule for the interpreter does not cover inline code that can start programs (allow
    rules cover only what the parser proves is exactly the command); harmless inline code passes."""
    command = INLINE[0][0]
    assert decide("yolo", command) == "allow"
    assert decide("ask", command, allow=["bash(python3 *)"]) == "ask"
    assert decide("ask", "python3 -c 'print(1 + 1)'", allow=["bash(python3 *)"]) == "allow"
