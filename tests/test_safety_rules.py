"""The permission decision the agent really uses (PermissionPolicy.decide,
through PermissionGate.authorize in the agent loop) against the red-team's attacks, plus property
tests that wrap a denied command in every shell construct and check that none gets through."""

from __future__ import annotations

import shlex
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clover.tools.safety.permissions import PermissionPolicy
from clover.tools.safety.shellnorm import canonical_argv, glob_prefix_feasible
from clover.tools.safety.shellwords import expand_braces
from tests.safety_attacks import BYPASSES, DENY, SETUP_ONLY, SMUGGLE_ALLOW, SMUGGLED, effects, make_workspace


def decide(mode: str, command: str, **rules) -> str:
    return PermissionPolicy(mode, **rules).decide("bash", {"command": command}, False)[0]


@pytest.fixture(scope="module")
def workspace_template(tmp_path_factory):
    base = tmp_path_factory.mktemp("template")
    make_workspace(base / "ws")
    return base


@pytest.mark.parametrize("command", [c for c in SMUGGLED + BYPASSES if c not in SETUP_ONLY])
def test_every_attack_really_does_harm_when_run(command, workspace_template, tmp_path):
    """The attack list is not vacuous: run for real, each one removes `t`, makes `pwned` or pushes
    (SETUP_ONLY commands only prepare a later one)."""
    shutil.copytree(workspace_template, tmp_path / "w", symlinks=True)
    root = tmp_path / "w" / "ws"
    subprocess.run(["bash", "-c", command + "\nwait"], cwd=root, capture_output=True, timeout=30)
    assert effects(root), command


@pytest.mark.parametrize("command", SMUGGLED)
def test_allow_rules_do_not_let_smuggled_code_run(command):
    """Item 1: `allow = ["bash(git status*)"]` ran `git status ${X:-$(touch pwned)}` without asking."""
    for mode in ("ask", "auto-edit"):
        assert decide(mode, command, allow=SMUGGLE_ALLOW) == "ask", (mode, command)
    assert decide("plan", command, allow=SMUGGLE_ALLOW) == "deny"


@pytest.mark.parametrize("command", BYPASSES)
def test_deny_rules_hold_in_every_mode(command):
    """Item 2: what may match a deny rule is refused in yolo and never runs unasked elsewhere."""
    assert decide("yolo", command, deny=DENY) == "deny", command
    assert decide("plan", command, deny=DENY, allow=["bash(*)"]) == "deny"
    for mode in ("ask", "auto-edit"):
        assert decide(mode, command, deny=DENY, allow=["bash(*)"]) in ("deny", "ask"), (mode, command)


EXEC_WRAPPED = [
    "strace -f rm -rf t",
    "unshare -r rm -rf t",
    "chroot / rm -rf t",
    "parallel rm -rf ::: t",
    "fakeroot rm -rf t",
    "sg users -c 'rm -rf t'",
    "runuser -u root -- rm -rf t",
    "flock f $X -rf t",
    "hyperfine 'rm -rf t'",
    "nsenter -t 1 -m rm -rf t",
    "git submodule foreach 'rm -rf t'",
    "git submodule foreach 'X=rm; $X -rf t'",
    "git bisect run rm -rf t",
    "git difftool -x 'rm -rf t'",
    "git grep -O'rm -rf t' x",
    "flock f sh -c 'X=rm; $X -rf t'",
]


@pytest.mark.parametrize("command", EXEC_WRAPPED)
def test_programs_that_run_their_arguments_are_seen_through(command):
    """Programs that run a command from their argv (not all installed here, so decision only)."""
    assert decide("yolo", command, deny=DENY) == "deny", command


def test_refusals_say_why_and_what_to_do():
    _, reason = PermissionPolicy("yolo", deny=DENY).decide("bash", {"command": "X=rm; $X -rf t"}, False)
    assert "program name from an expansion" in reason and "literally" in reason
    _, reason = PermissionPolicy("yolo", deny=DENY).decide(
        "bash", {"command": "git -c alias.p=push p"}, False
    )
    assert "alias" in reason
    _, reason = PermissionPolicy("yolo", deny=DENY).decide("bash", {"command": "rm t -rf"}, False)
    assert "denied by rule bash(rm -rf *)" in reason


def test_yolo_without_deny_rules_runs_anything():
    for command in BYPASSES[:10]:
        assert decide("yolo", command) == "allow"


ORDINARY = [
    "python -m pytest -q",
    "git diff",
    "git log --oneline -5",
    "ls -la | head",
    "cd src && pytest -x",
    "grep -rn foo . | wc -l",
    "for f in *.py; do echo $f; done",
    "echo $HOME",
    "LANG=C sort f",
    "cat <<'EOF' > x.py\nprint(1)\nEOF",
    "git -c user.name=a -c user.email=b commit -qm x",
    "rm -f x.pyc",
    "rm -r build",
    "find . -name '*.pyc' -delete",
    "pip install -e .",
    "echo $((1+2))",
    "git status --short",
    "x=$(git rev-parse HEAD); echo $x",
    "git fetch -q",
    "git commit -m 'stop running rm -rf t'",
    "git grep -n 'rm -rf'",
    "strace -o log python -m pytest",
    "git rebase -i HEAD~2",
    "[ -f x ] && echo yes",
    "[[ -f x ]] && echo yes",
    "[[ $? -eq 0 ]] && echo ok",
    "(( 1 + 2 ))",
    "let n=1+2",
    "echo ${a[0]} ${a[@]} ${#a[@]} ${!a[@]}",
    "echo ${s:1:2} ${s: -1} ${x:-d} ${x:=d} ${x:+y}",
    "jq --version",
    "mkdir -p out && cp -r src out/",
    "timeout 60 python -m pytest -q tests/",
]


@pytest.mark.parametrize("command", ORDINARY)
def test_ordinary_work_still_runs_in_yolo_with_deny_rules(command):
    assert decide("yolo", command, deny=DENY) == "allow", command


def test_what_deny_rules_cost_in_yolo():
    """Documented: with a deny rule about `rm`, an `rm` whose arguments are only known at run time
    is refused (it could be `rm -rf`); the same without deny rules runs."""
    assert decide("yolo", 'for f in *.pyc; do rm "$f"; done', deny=DENY) == "deny"
    assert decide("yolo", 'for f in *.pyc; do rm "$f"; done') == "allow"
    assert decide("yolo", 'for f in *.pyc; do rm "$f"; done', deny=["bash(curl*)"]) == "allow"


def test_env_prefixes_are_visible_to_rules():
    assert decide("ask", "LANG=C git status", allow=SMUGGLE_ALLOW) == "allow"  # harmless names pass
    assert decide("ask", "FOO=1 git status", allow=SMUGGLE_ALLOW) == "ask"
    assert decide("ask", "FOO=1 git status", allow=["bash(FOO=1 git status*)"]) == "allow"
    assert decide("yolo", "GIT_DIR=x git push", deny=DENY) == "deny"


# --------------------------------------------------------------------------- normalisation


def test_canonical_argv():
    assert canonical_argv(["rm", "t", "-r", "-f"]) == ["rm", "-fr", "t"]
    assert canonical_argv(["rm", "--recursive", "--force", "t"]) == ["rm", "-fr", "t"]
    assert canonical_argv(["rm", "-R", "t", "--force"]) == ["rm", "-fr", "t"]
    assert canonical_argv(["rm", "--", "-rf"]) == ["rm", "-rf"]  # after `--` an operand
    assert canonical_argv(["git", "-C", "x", "push", "origin", "--force"]) == ["git", "push", "-f", "origin"]
    assert canonical_argv(["git", "push", "origin", "--force-with-lease"]) == [
        "git",
        "push",
        "--force-with-lease",
        "origin",
    ]


def test_brace_expansion():
    assert expand_braces("-r{f,}") == ["-rf", "-r"]
    assert expand_braces("{rm,-rf}") == ["rm", "-rf"]
    assert expand_braces("a{1..3}") == ["a1", "a2", "a3"]
    assert expand_braces("{a,b}{c,d}") == ["ac", "ad", "bc", "bd"]
    assert expand_braces("{x}") == ["{x}"] and expand_braces("a{b") == ["a{b"]
    assert len(expand_braces("{1..1000}")) == 64


def test_glob_prefix_feasible():
    assert glob_prefix_feasible("rm ", "rm -rf *")
    assert glob_prefix_feasible("", "anything")
    assert glob_prefix_feasible("git push ", "git push*")
    assert not glob_prefix_feasible("git status ", "git push*")
    assert glob_prefix_feasible("curl ", "curl*")
    assert not glob_prefix_feasible("rmdir ", "rm -rf *")
    assert glob_prefix_feasible("rb ", "r[a-c] *") and not glob_prefix_feasible("rd ", "r[!d] *")


# --------------------------------------------------------------------------- properties

CORES = [
    "rm -rf t",
    "rm -fr t",
    "rm -r -f t",
    "rm t -rf",
    "rm -R --force t",
    "/bin/rm -rf t",
    "\\rm -rf t",
    '"rm" -rf t',
    "r'm' -rf t",
    "rm -rf 't'",
    "rm -r{f,} t",
    "X=rm; $X -rf t",
    "rm -v -rf -- t",
    "git push origin main",
    "git -C . push",
    "curl -s file:///etc/hostname",
]


def _wrap(inner: str, how: str) -> str:
    q = shlex.quote(inner)
    return {
        "pipe_in": f"ls | {inner}",
        "pipe_out": f"{inner} | cat",
        "and": f"true && {inner}",
        "or": f"false || {inner}",
        "seq": f"{inner}; ls",
        "subshell": f"( {inner} )",
        "group": f"{{ {inner}; }}",
        "subst": f"echo $({inner})",
        "backtick": f"echo `{inner}`",
        "dquote_subst": f'echo "$({inner})"',
        "bash_c": f"bash -c {q}",
        "sh_c_dashdash": f"sh -c -- {q}",
        "eval": f"eval {q}",
        "heredoc_sh": f"sh <<EOF\n{inner}\nEOF",
        "heredoc_subst": f"cat <<EOF\n$({inner})\nEOF",
        "param": f"echo ${{X:-$({inner})}}",
        "env_prefix": f"FOO=1 {inner}",
        "env": f"env FOO=1 {inner}",
        "timeout": f"timeout 5 {inner}",
        "nohup": f"nohup {inner}",
        "sudo": f"sudo {inner}",
        "command": f"command {inner}",
        "exec": f"exec {inner}",
        "time": f"time {inner}",
        "redirect": f"{inner} > out 2>&1",
        "if": f"if true; then {inner}; fi",
        "for": f"for i in 1; do {inner}; done",
        "while": f"while true; do {inner}; break; done",
        "function": f"f() {{ {inner}; }}; f",
        "background": f"{inner} &",
        "not": f"! {inner}",
        "procsub": f"cat <({inner})",
        "xargs_sh": f"echo | xargs sh -c {q}",
        "newline": f"ls\n{inner}",
        "trap": f"trap {q} EXIT",
    }[how]


WAYS = [
    "pipe_in",
    "pipe_out",
    "and",
    "or",
    "seq",
    "subshell",
    "group",
    "subst",
    "backtick",
    "dquote_subst",
    "bash_c",
    "sh_c_dashdash",
    "eval",
    "heredoc_sh",
    "heredoc_subst",
    "param",
    "env_prefix",
    "env",
    "timeout",
    "nohup",
    "sudo",
    "command",
    "exec",
    "time",
    "redirect",
    "if",
    "for",
    "while",
    "function",
    "background",
    "not",
    "procsub",
    "xargs_sh",
    "newline",
    "trap",
]


PREFIXES = {"env_prefix", "env", "timeout", "nohup", "sudo", "command", "exec", "time"}


def _compound(core: str, ways: list[str]) -> str:
    """Wrap `core` in each way in turn, keeping the result a line that bash really runs it in: a
    prefix (`env`, `timeout`, ...) goes in front of a simple command only, a here-document never
    inside another's body, backticks never nested; otherwise the step is `bash -c '...'`."""
    out = core
    for way in ways:
        compound = (
            any(ch in out for ch in ";&|\n(){}!")
            or out.split(" ", 1)[0] in ("if", "for", "while")
            or (way != "env_prefix" and "=" in out.split(" ", 1)[0])
        )  # `timeout 5 A=1 rm` runs no rm
        if (
            (way in PREFIXES and compound)
            or (way.startswith("heredoc") and "\n" in out)
            or (way == "backtick" and "`" in out)
        ):
            way = "bash_c"
        out = _wrap(out, way)
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(core=st.sampled_from(CORES), ways=st.lists(st.sampled_from(WAYS), min_size=1, max_size=3))
def test_no_compound_around_a_denied_command_runs(core, ways):
    command = _compound(core, ways)
    assert decide("yolo", command, deny=DENY) == "deny", command
    assert decide("ask", command, deny=DENY, allow=["bash(*)"]) in ("deny", "ask"), command
    assert (
        decide("auto-edit", command, deny=DENY, allow=SMUGGLE_ALLOW + ["bash(ls*)", "bash(true)"]) != "allow"
    )


@settings(max_examples=150, deadline=None)
@given(ways=st.lists(st.sampled_from(WAYS), min_size=1, max_size=3))
def test_no_compound_smuggles_code_past_allow_rules(ways):
    command = _compound("touch pwned", ways)
    allow = SMUGGLE_ALLOW + [
        "bash(ls*)",
        "bash(true)",
        "bash(false)",
        "bash(echo *)",
        "bash(sh*)",
        "bash(bash*)",
    ]
    assert decide("ask", command, allow=allow) == "ask", command


@pytest.mark.parametrize("way", WAYS)
def test_each_wrapping_really_runs_the_inner_command(way, tmp_path):
    """The property tests' wrappers are real: each one, run by bash, runs what it wraps."""
    if way == "sudo" and not shutil.which("sudo"):
        pytest.skip("sudo is not installed")
    command = _wrap("touch pwned", way).replace("sudo ", "sudo -n " if way == "sudo" else "sudo ")
    subprocess.run(
        ["bash", "-c", command + "\nwait"],
        cwd=tmp_path,
        capture_output=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    if way == "sudo" and not (tmp_path / "pwned").exists():
        pytest.skip("sudo needs a password here")
    assert (tmp_path / "pwned").exists(), command


# --------------------------------------------------------------------------- plan mode, paths


def test_plan_mode_an_ask_rule_does_not_turn_a_refusal_into_a_prompt():
    """Item 9: in plan mode an `ask` rule used to make a write a prompt instead of a refusal."""
    p = PermissionPolicy("plan", ask=["bash(git *)", "edit(*.py)", "create"])
    assert p.decide("bash", {"command": "git commit -m x"}, False)[0] == "deny"
    assert p.decide("create", {"path": "a.py"}, False)[0] == "deny"
    assert p.decide("str_replace", {"path": "a.py"}, False)[0] == "deny"
    assert p.decide("view", {"path": "a.py"}, True)[0] == "allow"


def test_edit_rules_follow_links_to_the_protected_file(tmp_path):
    """Item 7: `edit(protected.txt)` was bypassed through a symlink alias inside the repo."""
    (tmp_path / "protected.txt").write_text("x")
    (tmp_path / "alias.txt").symlink_to("protected.txt")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "deep").symlink_to("../protected.txt")
    p = PermissionPolicy("yolo", deny=["edit(protected.txt)"], root=str(tmp_path))
    for path in ("alias.txt", "d/deep", str(tmp_path / "alias.txt"), "protected.txt"):
        assert p.decide("str_replace", {"path": path}, False)[0] == "deny", path
    assert p.decide("create", {"path": "other.txt"}, False)[0] == "allow"
    # allow rules need the resolved path to match too
    a = PermissionPolicy("ask", allow=["edit(src/*)"], root=str(tmp_path))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "link").symlink_to("../protected.txt")
    assert a.decide("str_replace", {"path": "src/link"}, False)[0] == "ask"
    assert a.decide("str_replace", {"path": "src/real.py"}, False)[0] == "allow"


def test_read_rules_apply_to_the_read_tools(tmp_path):
    """Item 7: `read(...)` rules were documented and applied to no tool."""
    (tmp_path / ".env").write_text("KEY=1")
    (tmp_path / "env-link").symlink_to(".env")
    p = PermissionPolicy("ask", deny=["read(.env)"], root=str(tmp_path))
    assert p.decide("view", {"path": ".env"}, True)[0] == "deny"
    assert p.decide("view", {"path": "env-link"}, True)[0] == "deny"
    assert p.decide("grep", {"pattern": "KEY", "path": ".env"}, True, main_key="pattern")[0] == "deny"
    assert p.decide("outline", {"path": "sub/.env"}, True)[0] == "deny"
    assert p.decide("glob", {"pattern": "*", "path": "env-link"}, True, main_key="pattern")[0] == "deny"
    assert p.decide("view", {"path": "README.md"}, True)[0] == "allow"
    assert p.decide("grep", {"pattern": "KEY"}, True, main_key="pattern")[0] == "allow"


@pytest.mark.parametrize(
    ("command", "runs"),
    [
        ("cat <<'EOF'\n$(rm -rf t)\nEOF", False),
        ("cat <<\\EOF\n$(rm -rf t)\nEOF", False),
        ("cat <<-'EOF'\n\t`rm -rf t`\n\tEOF", False),
        ("cat <<EOF\n$(rm -rf t)\nEOF", True),
        ("cat <<'A' <<B\n$(rm -rf t)\nA\n$(rm -rf t)\nB", True),
        ("cat <<'EOF' | bash\nrm -rf t\nEOF", True),
        ("cat <<'EOF' > notes.md\nit's `half a code span\nEOF", False),
    ],
)
def test_here_document_bodies_count_only_when_bash_expands_them(command, runs, tmp_path):
    (tmp_path / "t").mkdir()
    subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, timeout=30)
    assert (not (tmp_path / "t").exists()) == runs  # what bash really does
    assert decide("yolo", command, deny=DENY) == ("deny" if runs else "allow"), command


RM_CORES = [c for c in CORES if not c.startswith(("git", "curl"))] + [
    "ls",
    "echo hi",
    "rm -f nothing",
    "true",
]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(core=st.sampled_from(RM_CORES), ways=st.lists(st.sampled_from(WAYS), min_size=0, max_size=2))
def test_whatever_yolo_allows_with_deny_rules_really_leaves_t(core, ways, tmp_path_factory):
    """Differential: run every line the policy allows through real bash; `t` must survive."""
    command = _compound(core, ways)
    if decide("yolo", command, deny=DENY) != "allow":
        return
    work = tmp_path_factory.mktemp("run")
    (work / "t").mkdir()
    subprocess.run(
        ["bash", "-c", command + "\nwait"],
        cwd=work,
        capture_output=True,
        timeout=20,
        stdin=subprocess.DEVNULL,
    )
    assert (work / "t").exists(), command


def _requote(word: str, how: int) -> str:
    """One of bash's ways to spell the same word."""
    if how == 0 or not word:
        return word
    if how == 1:
        return f"'{word}'"
    if how == 2:
        return f'"{word}"'
    if how == 3:
        return f"{word[0]}'{word[1:]}'" if len(word) > 1 else f"'{word}'"
    if how == 4:
        return "".join(f"\\{c}" if c.isalpha() else c for c in word)
    if how == 5:
        return "$'" + "".join(f"\\x{ord(c):02x}" for c in word) + "'"
    return f"{word}''"


@settings(max_examples=150, deadline=None)
@given(
    core=st.sampled_from(["rm -rf t", "rm t -r -f", "git push origin main", "curl -s x"]),
    hows=st.lists(st.integers(0, 6), min_size=4, max_size=4),
    ways=st.lists(st.sampled_from(WAYS), min_size=0, max_size=2),
)
def test_quoting_variants_of_a_denied_command_are_denied(core, hows, ways):
    """Every quoting of every word (`'rm'`, `r'm'`, `\\r\\m`, `$'\\x72\\x6d'`, ...) is still the command."""
    words = core.split(" ")
    spelled = " ".join(_requote(w, h) for w, h in zip(words, hows, strict=False))
    command = _compound(spelled, ways)
    assert decide("yolo", command, deny=DENY) == "deny", command


@pytest.mark.parametrize("how", range(7))
def test_each_quoting_is_what_bash_reads(how, tmp_path):
    (tmp_path / "t").mkdir()
    command = " ".join(_requote(w, how) for w in ["rm", "-rf", "t"])
    subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, timeout=30)
    assert not (tmp_path / "t").exists(), command
