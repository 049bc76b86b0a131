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
LD_PRELOAD, GIT_*, ... see tools/shellnorm.py), `git -c` (aliases, pagers) and git subcommands that
are not git's own (aliases). Such a command has `opaque` set (or the line has `ParsedShell.opaque`);
a command whose arguments are only partly known (`rm $F`, `xargs rm`) has `open_tail` set. Code in
files (scripts, `source`, `make`, `python -c`) is not looked into: deny rules cannot see inside it.
Here-document bodies are scanned for `$(...)` and backticks whether or not the delimiter is quoted.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

import bashlex

from clover.tools.shellnorm import (
    GIT_COMMANDS,
    GIT_GLOBAL_ARG,
    canonical_argv,
    env_name,
    expand_braces,
    harmless_env,
    has_glob,
    program_key,
    risky_env,
    unquote,
)

SHELLS = {"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish"}
PRIVILEGED = {"sudo", "doas", "su", "pkexec", "run0"}
# wrapper -> options that take a separate argument
_WRAPPER_ARGOPTS: dict[str, set[str]] = {
    "env": {"-u", "-C", "--unset", "--chdir"},
    "sudo": {"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group"},
    "doas": {"-u", "-C"},
    "pkexec": {"--user"},
    "run0": {"-u", "--user"},
    "nohup": set(),
    "timeout": {"-s", "-k", "--signal", "--kill-after"},
    "command": set(),
    "builtin": set(),
    "exec": {"-a"},
    "nice": {"-n", "--adjustment"},
    "ionice": {"-c", "-n", "-p", "--class", "--classdata"},
    "stdbuf": {"-i", "-o", "-e"},
    "setsid": set(),
    "time": {"-f", "-o"},
    "unbuffer": set(),
    "busybox": set(),  # `busybox rm -rf x` runs the applet
    "chrt": set(),
    "taskset": set(),
    "xargs": {"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter", "--max-args",
              "--max-procs", "--max-chars", "--max-lines"},
}
# Programs that run a command given in their arguments, with options we do not model: deny rules
# see every tail of their argv (`flock /tmp/l rm -rf t` is tried as `rm -rf t`), and a `-c` string
# is parsed as a script.
EXEC_WRAPPERS = {"flock", "strace", "ltrace", "valgrind", "unshare", "chroot", "nsenter", "runuser", "script",
                 "parallel", "xvfb-run", "firejail", "systemd-run", "catchsegv", "proot", "fakeroot", "faketime",
                 "torsocks", "proxychains", "proxychains4", "nocache", "eatmydata", "tini", "dumb-init", "sg",
                 "rlwrap", "cpulimit", "prlimit", "ccache", "distcc", "sudoedit", "setpriv", "capsh", "chpst",
                 "numactl", "hyperfine", "entr", "gtimeout", "caffeinate", "with-contenv", "s6-setuidgid"}
# wrappers followed by one positional argument before the command (duration, priority, cpu mask)
_WRAPPER_POSITIONAL = {"timeout": 1, "chrt": 1, "taskset": 1}
_WRITE_REDIRECTS = {">", ">>", ">|", "&>", "&>>", ">&", "<>"}
# builtins that change how later words are run: their effect cannot be followed statically
_OPAQUE_BUILTINS = {"alias": "defines an alias", "hash": "sets a command hash", "enable": "loads builtins",
                    "trap": "sets a trap"}
# builtins that assign variables (checked for risky names such as PATH or GIT_CONFIG_*)
_ASSIGNING = {"export", "declare", "typeset", "local", "readonly", "read", "mapfile", "readarray", "getopts",
              "let"}
# `git -c KEY=VALUE` keys that cannot run code or rename commands
_SAFE_GIT_CONFIG = re.compile(r"(?i)^(user\.\w+|color\.[\w.]+|advice\.\w+|init\.defaultbranch|commit\.gpgsign"
                              r"|tag\.gpgsign|core\.quotepath|core\.autocrlf|log\.\w+|pull\.rebase|gc\.auto)=")
_FIND_EXEC = {"-exec", "-execdir", "-ok", "-okdir"}
_MAX_DEPTH = 8
_SUBST = re.compile(r"\$\(|`|[<>]\(")
_MAX_LEN = 100_000
_SHORT_FLAGS = re.compile(r"^-[A-Za-z]+$")
# program -> (long options, short letters) that mean the same as one of its short flags
_FLAG_SYNONYMS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "rm": ({"--recursive": "r", "--force": "f", "--dir": "d", "--verbose": "v"}, {"R": "r"}),
}


@dataclass
class SimpleCommand:
    """One command the line would run.

    words: as written (quotes removed, leading VAR=value dropped). argv: the same with wrappers
    peeled off. carrier: the command only runs other code that is listed separately (`bash -c`,
    `eval`, `xargs CMD`), so allow rules judge the inner commands instead. dynamic: the program
    name comes from an expansion (`$X`, `$(...)`) or a shell reads code we cannot see.
    """

    words: list[str]
    argv: list[str]
    wrappers: list[str] = field(default_factory=list)
    carrier: bool = False
    dynamic: bool = False
    heredoc: str | None = field(default=None, repr=False)  # text fed on stdin by <<EOF / <<<
    writes: list[str] = field(default_factory=list)  # files written by `>`, `>>`, `&>`, `<>` redirects
    assigns: list[str] = field(default_factory=list)  # `VAR=value` prefixes (also `env VAR=value`)
    opaque: str | None = None  # why what runs cannot be known from the text (see the module doc)
    open_tail: bool = False  # some arguments are unknown (`rm $F`, `xargs rm`): only the program is
    runs_tail: bool = False  # an EXEC_WRAPPERS program: any tail of argv may be the command it runs

    @property
    def text(self) -> str:
        return " ".join(self.words)

    def deny_forms(self) -> list[str]:
        """Every spelling a deny rule should be tried against."""
        forms = [" ".join(self.words), " ".join(self.argv)]
        if self.argv:
            base = [os.path.basename(self.argv[0]) or self.argv[0], *self.argv[1:]]
            forms += [" ".join(base), " ".join(canonical_flags(base))]
            if base[0] == "git":  # `git -C dir -c k=v push --force` is still `git push --force`
                plain = _strip_git_globals(base)
                forms += [" ".join(plain), " ".join(canonical_flags(plain))]
            expanded = [e for w in base for e in expand_braces(w)]
            forms += [" ".join(expanded), " ".join(canonical_argv(base)), " ".join(canonical_argv(expanded))]
            if self.writes:  # lets `bash(* > /etc/*)` style rules see redirect targets
                forms.append(" ".join(base + [f"> {w}" for w in self.writes]))
            if self.assigns:  # `bash(GIT_CONFIG* *)` style rules see the prefixes
                forms.append(" ".join([*self.assigns, *base]))
            if self.runs_tail:
                for i in range(1, len(expanded)):
                    tail = [os.path.basename(expanded[i]) or expanded[i], *expanded[i + 1:]]
                    forms += [" ".join(tail), " ".join(canonical_argv(tail))]
        return list(dict.fromkeys(f for f in forms if f))

    def program(self) -> str | None:
        """`rm`, `git push`: what a rule must name to match this command whatever its unknown tail."""
        return program_key(self.argv)[0] if self.argv and not self.dynamic else None

    def allow_forms(self) -> list[str]:
        """Spellings an allow rule may match: as written, or with harmless wrappers removed.
        Environment prefixes stay visible unless harmless (LANG, TZ, ...; see tools/shellnorm.py)."""
        shown = [a for a in self.assigns if not harmless_env(env_name(a))]
        forms = [" ".join([*shown, *self.words])]
        if not PRIVILEGED.intersection(self.wrappers):
            forms.append(" ".join([*shown, *self.argv]))
        return list(dict.fromkeys(f for f in forms if f))


@dataclass
class ParsedShell:
    commands: list[SimpleCommand] = field(default_factory=list)
    pipelines: list[list[SimpleCommand]] = field(default_factory=list)  # two or more commands
    error: str | None = None  # set when the line could not be parsed; commands are then a guess
    opaque: list[str] = field(default_factory=list)  # line-level reasons what runs is unknowable
    _src: list[str] = field(default_factory=list, repr=False, compare=False)  # texts being walked

    @property
    def ok(self) -> bool:
        return self.error is None

    def undecidable(self) -> str | None:
        """Why this line cannot be fully checked (unparsed, opaque), or None."""
        if self.error:
            return f"it could not be parsed ({self.error})"
        if self.opaque:
            return self.opaque[0]
        return next((f"`{c.text[:80]}` {c.opaque}" for c in self.commands if c.opaque), None)




def _strip_git_globals(argv: list[str]) -> list[str]:
    """`git [global options] CMD ...` -> `git CMD ...` (options before the subcommand only)."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in GIT_GLOBAL_ARG else 1
    return [argv[0], *argv[i:]]


def canonical_flags(words: list[str]) -> list[str]:
    """Merge the short-flag clusters right after the program: `rm -r -f x` -> `rm -fr x`, with the
    program's known synonyms folded in (`rm -R --force x` -> `rm -fr x`)."""
    if not words:
        return words
    long_names, letters_map = _FLAG_SYNONYMS.get(os.path.basename(words[0]), ({}, {}))
    i, letters = 1, []
    while i < len(words):
        if _SHORT_FLAGS.match(words[i]):
            letters.extend(letters_map.get(c, c) for c in words[i][1:])
        elif words[i] in long_names:
            letters.append(long_names[words[i]])
        else:
            break
        i += 1
    if i == 1:
        return list(words)
    return [words[0], "-" + "".join(sorted(set(letters))), *words[i:]]


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
    prepared = _prepare(text)
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


def _prepare(text: str) -> str:
    """Rewrite forms bashlex lacks into equivalents it reads (analysis only): `[[ ]]`, `time`,
    quoted here-doc delimiters (bodies are scanned either way), arithmetic on plain numbers."""
    text = re.sub(r"<<(-?)[ \t]*(['\"])([\w.-]+)\2", r"<<\1\3", text)
    text = re.sub(r"<<(-?)[ \t]*\\([\w.-]+)", r"<<\1\2", text)
    text = re.sub(r"\$\(\(([\d\s+\-*/%<>=!&|^~?:]*)\)\)", "0", text)
    text = re.sub(r"(?<![^\s;&|(])\[\[(?=\s)", "[", text)
    text = re.sub(r"(?<=\s)\]\](?=$|[\s;&|)])", "]", text)
    return re.sub(r"(^|[;&|(]\s*|\n\s*)time\s+(?:-p\s+)?", r"\1", text)


def _walk(node, out: ParsedShell, depth: int) -> None:
    kind = getattr(node, "kind", None)
    if kind == "command":
        _command_node(node, out, depth)
        return
    if kind == "parameter":  # `${X:-$(cmd)}`: bashlex leaves the inner substitution as text
        _scan_into(getattr(node, "value", "") or "", out, depth)
        return
    if kind == "function":
        out.opaque.append("it defines a shell function (it can stand in for any command)")
    if kind == "pipeline":
        members: list[SimpleCommand] = []
        prev_literal: str | None = None
        for part in node.parts:
            if getattr(part, "kind", None) == "command":
                cmd = _command_node(part, out, depth, stdin_text=prev_literal, piped=bool(members))
                if cmd is not None:
                    members.append(cmd)
                prev_literal = _literal_output(cmd)
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


def _command_node(node, out: ParsedShell, depth: int, stdin_text: str | None = None,
                  piped: bool = False) -> SimpleCommand | None:
    words: list[str] = []
    dynamic: list[bool] = []
    assigns: list[str] = []
    stdin_script: str | None = None
    has_stdin_redirect = False
    writes: list[str] = []
    for part in node.parts:
        pk = getattr(part, "kind", None)
        if pk in ("word", "assignment") and _SUBST.search(raw := _word(part, out)[1]):
            _scan_into(raw, out, depth, quotes=True)
        if pk == "word":
            word, raw = _word(part, out)
            words.append(word)
            # `$'rm'` is quoting, not an expansion
            dynamic.append(_is_dynamic(part) and bool(re.search(r"\$(?!')|`", raw)))
        elif pk == "assignment" and not words:
            assigns.append(_word(part, out)[0])
        elif pk == "redirect":
            rtype = getattr(part, "type", "")
            target = getattr(part, "output", None)
            if getattr(target, "kind", None) == "word" and _SUBST.search(raw := _word(target, out)[1]):
                _scan_into(raw, out, depth, quotes=True)
            if rtype in ("<<", "<<-") and getattr(part, "heredoc", None) is not None:
                stdin_script = _heredoc_body(part.heredoc.value, getattr(part.output, "word", ""))
                _scan_into(stdin_script, out, depth)  # `$(...)` in a body runs when the line runs
            elif rtype == "<<<":
                stdin_script = getattr(part.output, "word", "")
            elif rtype == "<":
                has_stdin_redirect = True
            elif rtype in _WRITE_REDIRECTS and getattr(part.output, "word", "/dev/null") != "/dev/null":
                writes.append(part.output.word)
        # substitutions anywhere in the command (words, assignments, redirect targets) run too
        for attr in ("parts", "output", "command"):
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
    if stdin_script is not None and not piped:
        cmd.heredoc = stdin_script
    return cmd


def _scan_into(text: str, out: ParsedShell, depth: int, quotes: bool = False) -> None:
    """Parse the `$(...)`, backtick and `<(...)` bodies in text bashlex keeps opaque or misreads
    (it stops a substitution at its first newline). `quotes`: single quotes make text literal
    (a word as written); without, every substitution counts (here-document bodies, `${...}`)."""
    scripts, ok = _substitutions(text, quotes)
    if not ok:
        out.opaque.append("it has an unbalanced substitution inside an expansion or here-document")
    for script in scripts:
        _parse_into(script, out, depth + 1)


def _substitutions(text: str, quotes: bool = False) -> tuple[list[str], bool]:
    """Bodies of `$(...)`, `<(...)`, `>(...)` and `...` in text; quotes inside a body are not
    honoured (over-approximating is safe). False when one is left open."""
    found: list[str] = []
    i, in_double = 0, False
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if quotes and ch == '"':
            in_double = not in_double
        elif quotes and ch == "'" and not in_double:
            end = text.find("'", i + 1)
            if end == -1:
                return found, False
            i = end + 1
            continue
        if ch == "`":
            end = text.find("`", i + 1)
            if end == -1:
                return found, False
            found.append(text[i + 1:end])
            i = end + 1
            continue
        if ch in "$<>" and text.startswith("(", i + 1):
            depth, j = 0, i + 1
            while j < len(text):
                if text[j] == "(":
                    depth += 1
                elif text[j] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= len(text):
                return found, False
            body = text[i + 2:j]
            if not (ch == "$" and body.startswith("(")):  # `$((...))` arithmetic: scan inside it
                found.append(body)
                i = j + 1
                continue
            i += 3
            continue
        i += 1
    return found, True


def _word(node, out: ParsedShell) -> tuple[str, str]:
    """(value, raw text) of a word: bash's quote removal on the text as written (bashlex keeps
    quotes in `'it'\\''s'` and `'a'"'"'b'`, the forms shlex.quote makes), bashlex's value otherwise."""
    pos = getattr(node, "pos", None)
    src = out._src[-1] if out._src else ""
    raw = src[pos[0]:pos[1]] if pos and src and pos[1] <= len(src) else node.word
    value = unquote(raw)
    return (node.word if value is None else value), raw


def _is_dynamic(word_node) -> bool:
    stack = list(getattr(word_node, "parts", None) or [])
    while stack:
        p = stack.pop()
        if getattr(p, "kind", None) in ("parameter", "commandsubstitution", "processsubstitution"):
            return True
    return False


def _heredoc_body(value: str, delimiter: str) -> str:
    lines = value.split("\n")
    delim = delimiter.strip("'\"")
    if lines and lines[-1].strip() == delim:
        lines = lines[:-1]
    return "\n".join(lines)


def _literal_output(cmd: SimpleCommand | None) -> str | None:
    """What `echo ...` / `printf ...` / `cat <<EOF` writes, so `echo 'rm -rf x' | sh` is checked."""
    if cmd is None or not cmd.argv or cmd.dynamic:
        return None
    prog = os.path.basename(cmd.argv[0])
    if prog == "cat" and len(cmd.argv) == 1 and cmd.heredoc is not None:
        return cmd.heredoc
    args = [a for a in cmd.argv[1:] if not (prog == "echo" and a in ("-n", "-e", "-E"))]
    return " ".join(args) if prog in ("echo", "printf") else None


def _add_command(words: list[str], dynamic: list[bool], out: ParsedShell, depth: int,
                 stdin_script: str | None = None, assigns: list[str] | None = None) -> SimpleCommand:
    env_assigns: list[str] = []
    argv, dyn, wrappers = _peel(words, dynamic, env_assigns)
    cmd = SimpleCommand(words=list(words), argv=argv, wrappers=wrappers, dynamic=bool(dyn and dyn[0]),
                        assigns=[*(assigns or []), *env_assigns])
    out.commands.append(cmd)
    if not argv:
        return cmd
    _judge(cmd, dyn)
    prog = os.path.basename(argv[0])
    nested: list[str] = []
    if prog in SHELLS:
        script = _shell_c_string(argv)
        if script is not None:
            nested.append(script)
            cmd.carrier = True
        elif _shell_reads_stdin(argv):
            if stdin_script is None:
                pass  # interactive shell on the terminal
            elif stdin_script == "":
                cmd.dynamic = True  # runs piped code we cannot see (`curl ... | sh`)
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
        script = _dash_c_value(argv) if prog != "watch" else " ".join(_skip_opts(argv[1:], {"-n", "-d"}))
        if script:
            nested.append(script)
            cmd.carrier = prog in ("su", "watch")
        cmd.runs_tail = prog in EXEC_WRAPPERS
        if cmd.runs_tail and any(dyn) and not cmd.opaque:
            cmd.opaque = f"runs a command ({prog}) with words from an expansion"
    elif prog == "find":
        _find_exec(argv, out, depth)
    for script in nested:
        _parse_into(script, out, depth + 1)
    return cmd


def _judge(cmd: SimpleCommand, dyn: list[bool]) -> None:
    """Set `opaque` / `open_tail` (see the module doc)."""
    argv = cmd.argv
    prog = os.path.basename(argv[0])
    risky = [env_name(a) for a in cmd.assigns if risky_env(env_name(a))]
    if cmd.dynamic:
        cmd.opaque = "takes its program name from an expansion"
    elif has_glob(argv[0]) or expand_braces(argv[0]) != [argv[0]]:
        cmd.opaque = "takes its program name from a glob or brace expansion"
        cmd.dynamic = True
    elif risky:
        cmd.opaque = f"sets {risky[0]}, which changes what the command runs"
    elif prog in _OPAQUE_BUILTINS:
        cmd.opaque = f"{_OPAQUE_BUILTINS[prog]} (it can stand in for any command)"
    elif prog == "shopt" and "expand_aliases" in argv:
        cmd.opaque = "turns on aliases (they can stand in for any command)"
    elif prog in _ASSIGNING or (prog == "printf" and "-v" in argv):
        names = [env_name(a) for a in argv[1:] if not a.startswith("-")]
        if bad := next((n for n in names if risky_env(n)), None):
            cmd.opaque = f"sets {bad}, which changes what later commands run"
    elif prog == "git":
        cmd.opaque = _git_opaque(argv, dyn)
    unknown = any(d or (w.startswith("-") and has_glob(w)) for w, d in zip(argv, dyn, strict=False))
    cmd.open_tail = unknown or "xargs" in cmd.wrappers


def _git_opaque(argv: list[str], dyn: list[bool]) -> str | None:
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        opt = argv[i]
        value = argv[i + 1] if i + 1 < len(argv) else ""
        if opt == "-c" and not _SAFE_GIT_CONFIG.match(value):
            return f"sets git configuration `{value[:60]}` (aliases, pagers and hooks can run any command)"
        if opt in ("--config-env", "--exec-path") or opt.startswith(("--config-env=", "--exec-path=")):
            return f"uses git {opt.split('=')[0]} (it can change what git runs)"
        i += 2 if opt in GIT_GLOBAL_ARG else 1
    if i < len(argv):
        if dyn[i]:
            return "takes its git subcommand from an expansion"
        if argv[i] not in GIT_COMMANDS:
            return f"runs `git {argv[i][:40]}`, not a git command of its own (an alias can run any command)"
    return None


def _peel(words: list[str], dynamic: list[bool],
          env_assigns: list[str] | None = None) -> tuple[list[str], list[bool], list[str]]:
    """Strip wrappers (`sudo -u x`, `env A=1`, `timeout 5`, `xargs -0`, a leading `\\`); the
    assignments `env` makes go to `env_assigns`."""
    i, wrappers = 0, []
    while i < len(words):
        prog = os.path.basename(words[i].lstrip("\\"))
        if prog not in _WRAPPER_ARGOPTS or dynamic[i]:
            break
        wrappers.append(prog)
        argopts = _WRAPPER_ARGOPTS[prog]
        i += 1
        while i < len(words) and words[i].startswith("-") and words[i] != "-":
            opt = words[i]
            i += 1
            if opt == "--":
                break
            if prog == "env" and opt in ("-S", "--split-string") and i < len(words):
                # env -S "cmd args" runs the split string
                split = words[i].split() + words[i + 1:]
                return split, [dynamic[i]] * len(split), wrappers
            if opt in argopts and i < len(words):
                i += 1
        for _ in range(_WRAPPER_POSITIONAL.get(prog, 0)):
            if i < len(words):
                i += 1
        # `env A=1 cmd`, `sudo A=1 cmd` (other wrappers would fail on it; assume they do not)
        while i < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i]):
            if env_assigns is not None:
                env_assigns.append(words[i])
            i += 1
        if prog == "xargs" and i >= len(words):
            return ["echo"], [False], wrappers
    argv = list(words[i:])
    if argv:
        argv[0] = argv[0].lstrip("\\") or argv[0]
    return argv, list(dynamic[i:]), wrappers


def _shell_c_string(argv: list[str]) -> str | None:
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-", "--"):
        opt = argv[i]
        if not opt.startswith("--") and "c" in opt[1:]:
            rest = [a for a in argv[i + 1:]]
            j = 0
            while j < len(rest) and rest[j].startswith("-") and rest[j] != "-":
                if rest[j] == "--":  # `bash -c -- 'rm -rf t'`
                    j += 1
                    break
                j += 2 if rest[j] in ("-o", "-O") else 1
            return rest[j] if j < len(rest) else ""
        i += 2 if opt in ("-o", "-O", "--rcfile", "--init-file") else 1
    return None


def _shell_reads_stdin(argv: list[str]) -> bool:
    rest = _skip_opts(argv[1:], {"-o", "-O", "--rcfile", "--init-file"})
    return not rest or rest[0] == "-" or "-s" in argv[1:]


def _skip_opts(args: list[str], argopts: set[str]) -> list[str]:
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            return args[i + 1:]
        i += 2 if args[i] in argopts else 1
    return args[i:]


def _dash_c_value(argv: list[str]) -> str | None:
    for i, a in enumerate(argv[1:], start=1):
        if (a in ("-c", "--command") or re.fullmatch(r"-[A-Za-z]+c", a)) and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--command="):
            return a.split("=", 1)[1]
    return None


def _find_exec(argv: list[str], out: ParsedShell, depth: int) -> None:
    i = 0
    while i < len(argv):
        if argv[i] in _FIND_EXEC:
            j = i + 1
            while j < len(argv) and argv[j] not in (";", "+", "\\;"):
                j += 1
            inner = argv[i + 1:j]
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
            argv, _, wrappers = _peel(words, [False] * len(words))
            cmd = SimpleCommand(words=words, argv=argv, wrappers=wrappers)
            out.commands.append(cmd)
            members.append(cmd)
            if argv and os.path.basename(argv[0]) in SHELLS | {"eval"} and depth < _MAX_DEPTH:
                script = " ".join(argv[1:]) if argv[0] == "eval" else _shell_c_string(argv)
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
