"""What the parser can prove about a command line, for rules that let it run without asking.

`literal_proof`: every command is literal words (no loops, conditionals or functions, no
expansions or substitutions, no text bash may evaluate as code, no redirect that writes, no
inline code, no program that runs a string, no dangerous option). Allow rules and remembered
approvals apply only to such lines (tools/safety/permissions.py).

`read_only_proof`: the line is literal (globs allowed) and every command is a program that only
reads, with options that only read (`git log` without `--output`, `find` without `-exec`/`-delete`,
`sed -n` with printing commands only, ...). Plan mode runs such lines, inside the read-only
sandbox: the proof is the first answer, the sandbox and the exec check are the guarantee.

A long option counts as every option it abbreviates (`--upload-pa` is `--upload-pack`): getopt_long
and git accept any unambiguous prefix.
"""

from __future__ import annotations

import os
import re

from clover.tools.safety.shellcommand import ParsedShell, SimpleCommand
from clover.tools.safety.shellnorm import long_option_names, program_key

# program (or `git SUBCOMMAND`) -> (long options that run code, write files or read options from a
# file, short letters that do). A short letter counts anywhere in a cluster (`sort -rno x`).
_DANGEROUS: dict[str, tuple[frozenset[str], str]] = {}


def _danger(programs: str, longs: str, shorts: str = "") -> None:
    for prog in programs.split(","):
        _DANGEROUS[prog.strip()] = (frozenset(longs.split()), shorts)


_GIT_DIFF_LIKE = "--output --ext-diff --textconv --open-files-in-pager"
_danger("git", "--config-env --exec-path --git-dir --work-tree --namespace --super-prefix", "c")
_danger(
    "git log,git show,git diff,git whatchanged,git range-diff,git diff-tree,git diff-index,git diff-files,"
    "git blame,git annotate,git shortlog,git stash",
    _GIT_DIFF_LIKE,
)
_danger("git grep", "--open-files-in-pager --ext-grep", "O")
_danger("git format-patch", "--output-directory --output", "o")
_danger(
    "git fetch,git pull,git ls-remote,git remote,git submodule",
    "--upload-pack --receive-pack --exec --config --server-option",
    "",
)
_danger("git clone", "--upload-pack --config --template --separate-git-dir", "uc")
_danger("git init", "--template --separate-git-dir", "")
_danger("git push", "--receive-pack --exec", "")
_danger("git archive", "--exec --remote --output", "o")
_danger("git rebase", "--exec", "x")
_danger("git difftool,git mergetool", "--extcmd --tool --tool-help", "xt")
_danger("git send-email", "--sendmail-cmd --smtp-server --to-cmd --cc-cmd --header-cmd", "")
_danger("git config", "--file --blob --includes", "f")
_danger(
    "tar,gtar,bsdtar",
    "--to-command --use-compress-program --info-script --new-volume-script --rsh-command "
    "--rmt-command --checkpoint-action --index-file",
    "IF",
)
_danger("zip", "--unzip-command", "")
_danger("sed,gsed", "--in-place --file", "if")
_danger("awk,gawk,mawk,nawk", "--file --include --load --exec --source", "filE")
_danger("sort", "--output --compress-program --files0-from", "o")
_danger("rg", "--pre --pre-glob --search-zip", "z")
_danger("rsync", "--rsh --rsync-path", "e")
_danger("ssh,autossh", "", "oFS")
_danger("scp,sftp", "", "oFS")
_danger("curl", "--config --output --output-dir --remote-name --remote-name-all", "KoO")
_danger("wget", "--execute --config --output-document --output-file", "eoO")
_danger("make,gmake", "--eval --file --makefile", "Ef")
_danger("node,nodejs", "--require --import --eval --print --loader --experimental-loader", "rep")
_danger("vim,vi,nvim,ex,view", "--cmd", "cSu")
_danger("tree", "", "o")
_danger("xxd", "--revert", "r")
_danger("date", "--set --file", "sf")
_danger("tee", "", "")
_danger("less,more", "--lesskey-file --lesskey-src", "k")


def dangerous_option(argv: list[str]) -> str | None:
    """The first option of `argv` that runs code, writes a file or reads options from a file, as
    written (`--upload-pa=x`); None when there is none we know of."""
    if not argv:
        return None
    key, start = program_key(argv)
    prog = key.split(" ", 1)[0]
    spans = [(prog, argv[1 : start - 1] if " " in key else argv[1:])]
    if " " in key:
        spans.append((key, argv[start:]))
    for table_key, words in spans:
        longs, shorts = _DANGEROUS.get(table_key, (frozenset(), ""))
        if table_key == "zip" and "-TT" in words:
            return "-TT"
        for word in words:
            if word == "--":
                break
            if word.startswith("--"):
                if long_option_names(word, longs):
                    return word
            elif word.startswith("-") and len(word) > 1 and shorts and any(c in shorts for c in word[1:]):
                return word
    return None


# --------------------------------------------------------------------------- literal lines

_EVALUATED = re.compile(r"\$\(|`|\$\{|\$\[")  # text bash may still evaluate (`test -v 'a[$(x)]'`)


def literal_proof(parsed: ParsedShell, globs: bool = False) -> str | None:
    """None when every command of the line is exactly its literal words; else why not.
    `globs`: unquoted filename patterns pass (plan mode: they only name files)."""
    if why := parsed.undecidable():
        return why
    if parsed.compound:
        return f"it uses `{parsed.compound[0]}` (rules cover single commands, not shell programs)"
    if not parsed.commands:
        return "it runs no command"
    for cmd in parsed.commands:
        if why := _command_problem(cmd, globs):
            return f"`{cmd.text[:80]}` {why}"
    return None


def _command_problem(cmd: SimpleCommand, globs: bool) -> str | None:
    if cmd.dynamic or cmd.opaque:
        return cmd.opaque or "takes its program from an expansion"
    if cmd.carrier:
        return "runs a string of shell code (rules match the commands themselves)"
    if cmd.inline_code:
        return cmd.inline_code
    for word, dynamic in zip(cmd.words, cmd.word_dynamic or [False] * len(cmd.words), strict=False):
        if dynamic and not (globs and "$" not in word and "`" not in word):
            return f"has `{word[:40]}`, whose value is only known when it runs"
        if _EVALUATED.search(word):
            return f"has `{word[:40]}`, text that bash or the program may evaluate as code"
    if cmd.open_tail:
        return "has arguments only known when it runs"
    if cmd.writes:
        return f"writes {cmd.writes[0]} (a redirect)"
    if option := dangerous_option(cmd.argv):
        return f"uses {option}, which can run code or write files"
    if cmd.argv and os.path.basename(cmd.argv[0]) == "find" and (action := _find_action(cmd.argv)):
        return f"uses find {action}, which runs commands or changes files"
    return None


# --------------------------------------------------------------------------- read-only lines

_READER_WORDS = """
ls cat head tail wc grep egrep fgrep rg stat file du df tree which type realpath readlink dirname basename
cut tr diff cmp comm join paste nl od hexdump md5sum sha1sum sha224sum sha256sum sha384sum sha512sum b2sum
cksum jq column fold fmt expand unexpand rev tac strings id whoami uname pwd echo printf true false test [
seq cd ps pgrep free uptime nproc getconf locale groups printenv sort uniq xxd date hostname env less more
find sed awk gawk mawk git
"""
_READERS = frozenset(_READER_WORDS.split())
_GIT_READER_WORDS = """
status log diff show rev-parse ls-files ls-tree blame annotate grep describe shortlog cat-file rev-list
show-ref show-branch for-each-ref count-objects merge-base name-rev whatchanged range-diff diff-tree
diff-index diff-files check-ignore check-attr version help var
"""
_GIT_READERS = frozenset(_GIT_READER_WORDS.split())
# git subcommands that only read when given no operands (or only these listing flags)
_GIT_LISTERS = {
    "branch": {"-a", "-r", "-v", "-vv", "--all", "--list", "-l", "--show-current", "--remotes"},
    "tag": {"-l", "--list", "-n"},
    "remote": {"-v", "--verbose"},
    "stash": {"list"},
    "reflog": {"show"},
    "config": {"--get", "--get-all", "--list", "-l", "--get-regexp"},
    "worktree": {"list"},
    "submodule": {"status"},
}
_SED_SCRIPT = re.compile(
    r"^\s*((\d+|\$|/(\\.|[^/\\])*/)(\s*,\s*(\d+|\$|/(\\.|[^/\\])*/))?\s*!?\s*[pl=qQdnNPD]?"
    r"\s*[;\n]?\s*)+$"
)
_AWK_WRITES = re.compile(r"system|getline|[|>]|close|fflush")


def read_only_proof(parsed: ParsedShell) -> str | None:
    """None when every command only reads (see the module doc); else why it may change something."""
    if why := literal_proof(parsed, globs=True):
        return why
    for cmd in parsed.commands:
        if why := _reader_problem(cmd):
            return f"`{cmd.text[:80]}` {why}"
    return None


def _reader_problem(cmd: SimpleCommand) -> str | None:
    argv = cmd.argv
    if not argv:  # a bare `env` or `time`
        return None
    if cmd.wrappers:
        return f"runs through {cmd.wrappers[0]}"
    prog = os.path.basename(argv[0])
    operands = [a for a in argv[1:] if not a.startswith("-")]
    if prog not in _READERS:
        return f"runs {prog}, which is not a program known to only read"
    if prog == "git":
        key, start = program_key(argv)
        sub = key.split(" ", 1)[1] if " " in key else ""
        if sub in _GIT_LISTERS:
            allowed = _GIT_LISTERS[sub]
            if any(a not in allowed for a in argv[start:] if not (sub == "config" and not a.startswith("-"))):
                return f"may change the repository (git {sub} with arguments)"
            if sub == "config" and not any(a in allowed for a in argv[start:]):
                return "may change git's configuration"
        elif sub not in _GIT_READERS:
            return f"runs git {sub or '(no subcommand)'}, which may change the repository"
    elif prog in ("uniq", "xxd") and len(operands) > 1:
        return f"writes its second operand ({prog} IN OUT)"
    elif prog == "hostname" and operands:
        return "sets the host name"
    elif prog == "sed":
        script = _sed_script(argv)
        if (
            "-n" not in argv
            and "--quiet" not in argv
            and "--silent" not in argv
            or script is None
            or not _SED_SCRIPT.match(script)
        ):
            return "runs a sed script that is not only printing (sed -n with p, =, l, q, d)"
    elif prog in ("awk", "gawk", "mawk"):
        program = next((a for a in argv[1:] if not a.startswith("-")), "")
        if _AWK_WRITES.search(program):
            return "runs an awk program that may write files or start programs"
    return None


def _sed_script(argv: list[str]) -> str | None:
    scripts = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-e", "--expression")]
    scripts += [a.split("=", 1)[1] for a in argv if a.startswith("--expression=")]
    if scripts:
        return "\n".join(scripts)
    return next((a for a in argv[1:] if not a.startswith("-")), None)


_FIND_ACTIONS = ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls")


def _find_action(argv: list[str]) -> str | None:
    return next((a for a in argv[1:] if a in _FIND_ACTIONS), None)
