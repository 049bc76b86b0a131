"""Split a shell command line into every simple command it would run, for permission checks.

bashlex parses the line; we walk the tree and collect each simple command, including those hidden
in `$(...)`, backticks, `<(...)`, subshells, loops, functions, `bash -c` / `sh -c` / `eval` /
`su -c` strings, heredocs and here-strings fed to a shell, `xargs` and `find -exec`. Wrappers that
just run their argument (`env`, `sudo`, `nohup`, `timeout`, `command`, `nice`, ...) are peeled off so
a rule about `rm` also sees `sudo rm`. When bashlex cannot parse the line, `error` is set and
`commands` holds a crude best-effort split, good enough for deny rules but never for allowing.

What cannot be decided from the text is recorded, never guessed: a program name that comes from an
expansion (`$X`, `$'rm'`, a glob or brace in the name), alias/function/trap/hash/enable definitions,
`shopt -s expand_aliases`, a risky environment name set as a prefix or exported (PATH, BASH_ENV,
LD_PRELOAD, GIT_*, ... see tools/safety/shellnorm.py), `git -c` (aliases, pagers) and git subcommands that
are not git's own (aliases). Such a command has `opaque` set (tools/safety/shelljudge.py; or the line has
`ParsedShell.opaque`);
a command whose arguments are only partly known (`rm $F`, `xargs rm`) has `open_tail` set. Code in
files (scripts, `source`, `make`, `python -c`) is not looked into: deny rules cannot see inside it.
Bodies of here-documents with an unquoted delimiter are scanned for `$(...)` and backticks.
Words are read with bash's quote removal on the text as written (tools/safety/shellwords.py): bashlex keeps
quotes in `'it'\\''s' and stops a substitution at its first newline. What the analysis yields
(SimpleCommand, ParsedShell) is defined in tools/safety/shellcommand.py.
"""

from __future__ import annotations

import os
import re
import shlex

import bashlex

from clover.tools.safety.shellcode import inline_code_reason, option_commands
from clover.tools.safety.shellcommand import ParsedShell, SimpleCommand, literal_output
from clover.tools.safety.shelljudge import judge, param_opaque
from clover.tools.safety.shellnorm import env_name, program_key, risky_env
from clover.tools.safety.shellprep import QUOTED_MARK, prepare
from clover.tools.safety.shellwords import expands_unquoted, heredoc_body, substitutions, unquote
from clover.tools.safety.shellwrap import (
    EXEC_WRAPPERS,
    SHELLS,
    dash_c_value,
    git_runs,
    peel,
    script_operand,
    shell_c_string,
    shell_reads_stdin,
    skip_opts,
)

_COMPOUND_KINDS = {"for", "while", "until", "if", "function"}
_WRITE_REDIRECTS = {">", ">>", ">|", "&>", "&>>", ">&", "<>"}
_FIND_EXEC = {"-exec", "-execdir", "-ok", "-okdir"}
_MAX_DEPTH = 8
_MAX_COMMANDS = 2000
_SUBST = re.compile(r"\$\(|`|[<>]\(")
_MAX_LEN = 100_000


def parse_shell(command: str) -> ParsedShell:
    """Never raises: unparsable input gives `error` set and a crude split in `commands`."""
    result = ParsedShell()
    if not isinstance(command, str):
        result.error = "command is not a string"
        return result
    _parse_into(command, result, 0)
    return result


# --------------------------------------------------------------------------- parsing


def _parse_into(text: str, out: ParsedShell, depth: int) -> None:
    if depth > _MAX_DEPTH:
        out.error = out.error or "commands nested too deeply to check"
        return
    if not text.strip() or text.lstrip().startswith("#") and "\n" not in text.strip():
        return
    if len(text) > _MAX_LEN:
        out.error = out.error or "command too long to check"
        _crude_into(text, out, depth)
        return
    prepared = prepare(text)
    try:
        trees = bashlex.parse(prepared)
    except RecursionError:
        trees, err = None, "command nested too deeply to parse"
    except Exception as exc:  # bashlex raises many types (ParsingError, NotImplementedError, ...)
        trees, err = None, f"cannot parse shell command ({type(exc).__name__}: {str(exc)[:120]})"
    if trees is None:
        out.error = out.error or err
        _crude_into(text, out, depth)
        return
    out._src.append(prepared)
    try:
        for tree in trees:
            _walk(tree, out, depth)
    except RecursionError:
        out.error = out.error or "command nested too deeply to parse"
        _crude_into(text, out, depth)
    finally:
        out._src.pop()


def _walk(node, out: ParsedShell, depth: int) -> None:
    kind = getattr(node, "kind", None)
    if kind == "command":
        _command_node(node, out, depth)
        return
    if kind == "parameter":  # `${X:-$(cmd)}`: bashlex leaves the inner substitution as text
        _param_into(node, out, depth)
        return
    if kind == "function":
        out.opaque.append("it defines a shell function (it can stand in for any command)")
    if kind in _COMPOUND_KINDS:
        out.compound.append(kind)
    if kind == "pipeline":
        members: list[SimpleCommand] = []
        prev_literal: str | None = None
        for part in node.parts:
            if getattr(part, "kind", None) == "command":
                cmd = _command_node(part, out, depth, stdin_text=prev_literal, piped=bool(members))
                if cmd is not None:
                    members.append(cmd)
                prev_literal = literal_output(cmd)
            else:
                _walk(part, out, depth)
        if len(members) >= 2:
            out.pipelines.append(members)
        return
    for attr in ("parts", "list"):
        for child in getattr(node, attr, None) or []:
            _walk(child, out, depth)
    for attr in ("command", "output", "heredoc"):
        child = getattr(node, attr, None)
        if child is not None and hasattr(child, "kind"):
            _walk(child, out, depth)


def _command_node(
    node, out: ParsedShell, depth: int, stdin_text: str | None = None, piped: bool = False
) -> SimpleCommand | None:
    words: list[str] = []
    dynamic: list[bool] = []
    word_dynamic: list[bool] = []
    assigns: list[str] = []
    stdin_script: str | None = None
    has_stdin_redirect = False
    writes: list[str] = []
    for part in node.parts:
        pk = getattr(part, "kind", None)
        # Substitutions in a word, assignment or redirect target are parsed from the raw text (a
        # superset of what bashlex finds), so bashlex's own nodes for them are not walked again.
        scanned = False
        if pk in ("word", "assignment") and _SUBST.search(raw := _word(part, out)[1]):
            _scan_into(raw, out, depth, quotes=True)
            scanned = True
            for param in _params(part):  # their substitutions were scanned with the word
                _param_into(param, out, depth, scan=False)
        if pk == "word":
            word, raw = _word(part, out)
            words.append(word)
            # `$'rm'` is quoting, not an expansion
            expands = _is_dynamic(part) and bool(re.search(r"\$(?!')|`|[<>]\(", raw))
            dynamic.append(expands)
            word_dynamic.append(expands or expands_unquoted(raw))
        elif pk == "assignment" and not words:
            assigns.append(_word(part, out)[0])
        elif pk == "redirect":
            rtype = getattr(part, "type", "")
            target = getattr(part, "output", None)
            if getattr(target, "kind", None) == "word" and _SUBST.search(raw := _word(target, out)[1]):
                _scan_into(raw, out, depth, quotes=True)
                scanned = True
            if rtype in ("<<", "<<-") and getattr(part, "heredoc", None) is not None:
                delimiter = getattr(part.output, "word", "")
                stdin_script = heredoc_body(part.heredoc.value, delimiter)
                if not delimiter.startswith(QUOTED_MARK):  # `$(...)` in an unquoted body runs
                    _scan_into(stdin_script, out, depth)
            elif rtype == "<<<":
                stdin_script = getattr(part.output, "word", "")
            elif rtype == "<":
                has_stdin_redirect = True
                if _SUBST.search(_word(target, out)[1] if getattr(target, "kind", None) == "word" else ""):
                    stdin_script = ""  # `sh < <(cmd)`: code another command prints
            elif rtype in _WRITE_REDIRECTS and getattr(part.output, "word", "/dev/null") != "/dev/null":
                writes.append(part.output.word)
        # substitutions anywhere in the command (words, assignments, redirect targets) run too
        for attr in () if scanned else ("parts", "output", "command"):
            sub = getattr(part, attr, None)
            for child in sub if isinstance(sub, list) else [sub]:
                if child is not None and hasattr(child, "kind"):
                    _walk(child, out, depth)
    if not words:
        risky = [env_name(a) for a in assigns if risky_env(env_name(a))]
        if risky:
            out.opaque.append(f"it sets {risky[0]}, which changes what later commands run")
        return None
    if stdin_script is None and piped and not has_stdin_redirect:
        stdin_script = stdin_text if stdin_text is not None else ""  # "" = unseen piped code
    cmd = _add_command(words, dynamic, out, depth, stdin_script, assigns)
    cmd.writes = writes
    cmd.word_dynamic = word_dynamic
    if stdin_script is not None and not piped:
        cmd.heredoc = stdin_script
    return cmd


def _param_into(node, out: ParsedShell, depth: int, scan: bool = True) -> None:
    value = getattr(node, "value", "") or ""
    if why := param_opaque(value):
        out.opaque.append(f"`${{{value[:40]}}}` {why}")
    if scan:
        _scan_into(value, out, depth)


def _params(node) -> list:
    """The parameter nodes inside a word (bashlex nests them in substitutions too)."""
    found, stack = [], list(getattr(node, "parts", None) or [])
    while stack:
        part = stack.pop()
        if getattr(part, "kind", None) == "parameter":
            found.append(part)
        stack.extend(getattr(part, "parts", None) or [])
    return found


def _scan_into(text: str, out: ParsedShell, depth: int, quotes: bool = False) -> None:
    """Parse the `$(...)`, backtick and `<(...)` bodies in text bashlex keeps opaque or misreads
    (it stops a substitution at its first newline). `quotes`: single quotes make text literal
    (a word as written); without, every substitution counts (here-document bodies, `${...}`)."""
    scripts, ok = substitutions(text, quotes)
    if not ok:
        out.opaque.append("it has an unbalanced substitution inside an expansion or here-document")
    for script in scripts:
        _parse_into(script, out, depth + 1)


def _word(node, out: ParsedShell) -> tuple[str, str]:
    """(value, raw text) of a word: bash's quote removal on the text as written (bashlex keeps
    quotes in `'it'\\''s'` and `'a'"'"'b'`, the forms shlex.quote makes), bashlex's value otherwise."""
    pos = getattr(node, "pos", None)
    src = out._src[-1] if out._src else ""
    raw = src[pos[0] : pos[1]] if pos and src and pos[1] <= len(src) else node.word
    value = unquote(raw)
    return (node.word if value is None else value), raw


def _is_dynamic(word_node) -> bool:
    stack = list(getattr(word_node, "parts", None) or [])
    while stack:
        p = stack.pop()
        if getattr(p, "kind", None) in ("parameter", "commandsubstitution", "processsubstitution"):
            return True
    return False


def _add_command(
    words: list[str],
    dynamic: list[bool],
    out: ParsedShell,
    depth: int,
    stdin_script: str | None = None,
    assigns: list[str] | None = None,
    tails: bool = True,
) -> SimpleCommand:
    env_assigns: list[str] = []
    argv, dyn, wrappers = peel(words, dynamic, env_assigns)
    cmd = SimpleCommand(
        words=list(words),
        argv=argv,
        wrappers=wrappers,
        dynamic=bool(dyn and dyn[0]),
        assigns=[*(assigns or []), *env_assigns],
    )
    out.commands.append(cmd)
    if len(out.commands) > _MAX_COMMANDS:  # a line built to make checking slow is not checked
        out.error = out.error or "too many commands to check"
        return cmd
    if not argv:
        return cmd
    judge(cmd, dyn)
    cmd.inline_code = inline_code_reason(argv, stdin_script)
    prog = os.path.basename(argv[0])
    nested: list[str] = option_commands(argv)
    if prog in SHELLS or prog in ("source", "."):
        script = shell_c_string(argv) if prog in SHELLS else None
        operand = script_operand(argv)
        if script is not None:
            nested.append(script)
            cmd.carrier = True
        elif operand is not None and dyn[operand]:  # `bash <(curl ...)`, `source $F`
            cmd.dynamic, cmd.opaque = True, "runs code from an expansion or another command's output"
        elif operand is None and (prog not in SHELLS or shell_reads_stdin(argv)):
            if stdin_script is None:
                pass  # interactive shell on the terminal
            elif stdin_script == "":  # `curl ... | sh`
                cmd.dynamic, cmd.opaque = True, "runs code it reads from a pipe we cannot see"
            else:
                nested.append(stdin_script)
                cmd.carrier = True
    elif prog == "eval":
        nested.append(" ".join(argv[1:]))
        cmd.carrier = True
    elif prog == "trap" and len(argv) > 1 and not argv[1].startswith("-"):  # its code runs later
        nested.append(argv[1])
    elif prog == "alias":  # so is an alias's
        nested += [a.split("=", 1)[1] for a in argv[1:] if "=" in a]
    elif prog in ("su", "watch") or prog in EXEC_WRAPPERS:
        script = dash_c_value(argv) if prog != "watch" else " ".join(skip_opts(argv[1:], {"-n", "-d"}))
        if script:
            nested.append(script)
            cmd.carrier = prog in ("su", "watch")
        if prog in EXEC_WRAPPERS and tails and depth < _MAX_DEPTH:
            nested += _tails(argv, dyn, out, depth)
    elif prog == "git":
        key, start = program_key(argv)
        scripts, argvs = git_runs(argv, key.split(" ")[1] if " " in key else None, argv[start:])
        nested += scripts
        for inner in argvs:
            _add_command(inner, [False] * len(inner), out, depth + 1)
    elif prog == "find":
        _find_exec(argv, out, depth)
    for script in nested:
        _parse_into(script, out, depth + 1)
    return cmd


def _tails(argv: list[str], dyn: list[bool], out: ParsedShell, depth: int) -> list[str]:
    """An EXEC_WRAPPERS program may run any tail of its argv (`flock /tmp/l rm -rf t`): each tail
    that starts with an operand becomes a command; a one-word operand with spaces is a script."""
    scripts = []
    for i in range(1, min(len(argv), 16)):
        word = argv[i]
        if not word or word.startswith("-"):
            continue
        if i == len(argv) - 1 and re.search(r"[\s;&|]", word):
            scripts.append(word)
        else:
            _add_command(argv[i:], dyn[i:], out, depth + 1, tails=False)  # its tails are ours
    return scripts


def _find_exec(argv: list[str], out: ParsedShell, depth: int) -> None:
    i = 0
    while i < len(argv):
        if argv[i] in _FIND_EXEC:
            j = i + 1
            while j < len(argv) and argv[j] not in (";", "+", "\\;"):
                j += 1
            inner = argv[i + 1 : j]
            if inner:
                _add_command(inner, [False] * len(inner), out, depth + 1)
            i = j
        i += 1


# --------------------------------------------------------------------------- fallback

_SPLIT = re.compile(r"\|\||&&|;;|[;&\n`(){}]|\$\(|<\(|>\(")


def _crude_into(text: str, out: ParsedShell, depth: int) -> None:
    """Best-effort split for deny checks when bashlex fails: operators, substitutions, quotes."""
    for segment in _SPLIT.split(text):
        members: list[SimpleCommand] = []
        for piece in segment.split("|"):
            words = _crude_words(piece)
            while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                words = words[1:]
            if words and words[0] in ("then", "do", "else", "elif", "if", "while", "until", "!", "coproc"):
                words = words[1:]
            if not words:
                continue
            argv, _, wrappers = peel(words, [False] * len(words))
            cmd = SimpleCommand(words=words, argv=argv, wrappers=wrappers)
            out.commands.append(cmd)
            members.append(cmd)
            if argv and os.path.basename(argv[0]) in SHELLS | {"eval"} and depth < _MAX_DEPTH:
                script = " ".join(argv[1:]) if argv[0] == "eval" else shell_c_string(argv)
                if script:
                    sub = ParsedShell()
                    _parse_into(script, sub, depth + 1)
                    out.commands.extend(sub.commands)
                    out.pipelines.extend(sub.pipelines)
        if len(members) >= 2:
            out.pipelines.append(members)


def _crude_words(piece: str) -> list[str]:
    try:
        return shlex.split(piece)
    except ValueError:
        return piece.replace('"', " ").replace("'", " ").replace("\\", "").split()
