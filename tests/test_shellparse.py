"""tools/safety/shellparse.py: every sub-command is found, wrappers peeled, bad input never raises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from clover.tools.safety.shellcommand import ParsedShell
from clover.tools.safety.shellnorm import canonical_argv
from clover.tools.safety.shellparse import parse_shell


def argvs(cmd: str) -> list[list[str]]:
    return [c.argv for c in parse_shell(cmd).commands]


def test_lists_and_pipes_are_split():
    r = parse_shell("ls -la && rm -rf x; echo hi | grep h || true")
    assert r.ok
    assert [c.argv for c in r.commands] == [
        ["ls", "-la"],
        ["rm", "-rf", "x"],
        ["echo", "hi"],
        ["grep", "h"],
        ["true"],
    ]
    assert [[c.argv[0] for c in p] for p in r.pipelines] == [["echo", "grep"]]


def test_substitutions_subshells_and_bodies_are_found():
    for cmd in [
        "echo $(rm -rf y)",
        "echo `rm -rf y`",
        "(rm -rf y)",
        "cat <(rm -rf y)",
        "x=$(rm -rf y) true",
        "echo hi > $(rm -rf y)",
        "f() { rm -rf y; }; f",
        "for i in a; do rm -rf y; done",
        "if true; then rm -rf y; fi",
        "while false; do rm -rf y; done",
        'echo "$(rm -rf y)"',
    ]:
        assert ["rm", "-rf", "y"] in argvs(cmd), cmd


def test_interpreter_strings_are_parsed():
    for cmd in [
        'bash -c "rm -rf y"',
        "sh -c 'cd /; rm -rf y'",
        'eval "rm -rf y"',
        'bash -lc "rm -rf y"',
        'su -c "rm -rf y" root',
        "bash <<EOF\nrm -rf y\nEOF",
        'bash <<< "rm -rf y"',
        'echo "rm -rf y" | sh',
        "cat <<'EOF' | bash\nrm -rf y\nEOF",
        "bash -c \"bash -c 'rm -rf y'\"",
        'env -S "rm -rf y"',
        "find . -exec rm -rf y \\;",
    ]:
        assert ["rm", "-rf", "y"] in argvs(cmd), cmd
    outer = parse_shell('bash -c "ls"').commands[0]
    assert outer.carrier and outer.argv[0] == "bash"


def test_wrappers_are_peeled_but_words_kept():
    for cmd in [
        "sudo rm -rf y",
        "sudo -u root rm -rf y",
        "env A=1 B=2 rm -rf y",
        "env -i PATH=/bin rm -rf y",
        "nohup rm -rf y &",
        "timeout 5 rm -rf y",
        "timeout -s KILL 5 rm -rf y",
        "command rm -rf y",
        "nice -n 5 rm -rf y",
        "stdbuf -oL rm -rf y",
        "exec rm -rf y",
        "time rm -rf y",
        r"\rm -rf y",
        "doas rm -rf y",
        "xargs -0 -n 1 rm -rf y",
    ]:
        cmds = parse_shell(cmd).commands
        assert any(c.argv == ["rm", "-rf", "y"] for c in cmds), cmd
    sudo = parse_shell("sudo rm -rf y").commands[0]
    assert sudo.words == ["sudo", "rm", "-rf", "y"] and sudo.wrappers == ["sudo"]
    assert ["sudo", "rm", "-rf", "y"] in sudo.allow_words() and ["rm", "-rf", "y"] not in sudo.allow_words()
    plain = parse_shell("timeout 60 pytest -q").commands[0]
    assert ["pytest", "-q"] in plain.allow_words()


def test_deny_forms_cover_paths_and_flag_order():
    forms = parse_shell("/bin/rm -r -f y").commands[0].deny_forms()
    assert "rm -r -f y" in forms and "rm -fr y" in forms
    assert canonical_argv(["rm", "-rf", "y"]) == ["rm", "-fr", "y"]
    assert canonical_argv(["git", "push", "-f"]) == ["git", "push", "-f"]


def test_dynamic_programs_are_flagged():
    assert parse_shell("$X -rf y").commands[0].dynamic
    assert parse_shell('"$(echo rm)" -rf y').commands[-1].dynamic
    curl = parse_shell("curl -s https://x | sh")
    assert curl.ok and curl.commands[-1].dynamic and len(curl.pipelines) == 1
    assert not parse_shell("ls | grep x").commands[-1].dynamic


def test_unparsable_input_sets_error_and_still_splits():
    r = parse_shell("case x in a) rm -rf y;; esac")
    assert not r.ok and r.error
    assert any(c.argv[:2] == ["rm", "-rf"] for c in r.commands)
    r = parse_shell("echo 'unterminated; rm -rf y")
    assert not r.ok
    r = parse_shell("echo $((i+2)) && rm -rf y")  # a name in arithmetic can run code
    assert not r.ok and ["rm", "-rf", "y"] in [c.argv for c in r.commands]


def test_common_forms_parse():
    for cmd in [
        "[[ -f x ]] && echo yes",
        "git commit -m 'fix: a && b'",
        "ls 2>&1 | head",
        "a=1",
        "",
        "# just a comment",
        "python -c 'print(1)'",
        "cd src && pytest -q -k 'not slow'",
    ]:
        assert parse_shell(cmd).ok, cmd
    assert [c.argv for c in parse_shell("git commit -m 'fix: a && b'").commands] == [
        ["git", "commit", "-m", "fix: a && b"]
    ]


def test_deep_nesting_is_bounded():
    cmd = "rm -rf y"
    for _ in range(12):
        cmd = "bash -c " + repr(cmd).replace("\\'", "'\"'\"'")
    r = parse_shell(cmd)
    assert isinstance(r, ParsedShell)
    assert parse_shell("$(" * 300 + "x" + ")" * 300) is not None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_never_raises_on_arbitrary_text(text):
    r = parse_shell(text)
    assert isinstance(r, ParsedShell)
    assert r.error is None or isinstance(r.error, str)
    for c in r.commands:
        c.deny_forms()
        c.allow_words()


_SHELLISH = st.lists(
    st.sampled_from(
        [
            "rm",
            "-rf",
            "x",
            "&&",
            "||",
            ";",
            "|",
            "$(",
            ")",
            "`",
            "(",
            "'",
            '"',
            "\\",
            "bash -c",
            "eval",
            "<<EOF",
            "\n",
            "EOF",
            "&",
            "xargs",
            "sudo",
            "{",
            "}",
            "[[",
            "]]",
            "case",
            "esac",
            "$X",
            "=",
            ">",
            "<",
            "#",
        ]
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(_SHELLISH)
def test_never_raises_on_shellish_token_soup(tokens):
    r = parse_shell(" ".join(tokens))
    assert isinstance(r, ParsedShell)


def test_lines_built_to_make_checking_slow_stay_bounded():
    """Wrapper tails and substitutions are each parsed once: the work (commands found) grows with
    the line, not exponentially (16 nested `strace` made 39,202 commands before)."""
    for command, cap in [
        (" ".join(["strace"] * 40) + " ls", 40),
        ("echo $(" * 7 + "rm -rf t" + ")" * 7, 20),
        ("; ".join(["ls"] * 2500), None),
    ]:
        r = parse_shell(command)
        if cap is None:
            assert not r.ok and "too many" in r.error
        else:
            assert r.ok and len(r.commands) <= cap, len(r.commands)
    assert ["rm", "-rf", "t"] in argvs("echo $(" * 7 + "rm -rf t" + ")" * 7)
