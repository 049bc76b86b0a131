"""Programs in other languages written into a command line, and options that name a command.

`python -c "import os; os.system('rm -rf t')"` runs `rm -rf t`, yet no shell parse sees it. Code
that comes with the command (`-c`/`-e` strings, here-documents and pipes into an interpreter) is
part of the command, so where deny or ask rules exist it must be proven harmless or the line counts
as undecided (`inline_code_reason`). Python code passes when it names nothing that can start a
process or reach one indirectly (identifiers are NFKC-normalised first, as Python reads them);
inline code of other interpreters is never analysed and always counts. Code in files (`python x.py`,
`make`) is not looked into: only the sandbox bounds what a program does.

`option_commands` returns the command lines that options and operands hand to a shell: ssh's remote
command and ProxyCommand/LocalCommand, rsync's `-e`, tar's `--to-command`/`-I`/checkpoint actions,
zip's `-TT`. tools/safety/shellparse.py parses them like `bash -c` strings, so deny rules see inside.
"""

from __future__ import annotations

import os
import re
import shlex
import unicodedata

_PYTHON = re.compile(r"^(python[0-9.]*|pypy[0-9.]*)$")
# interpreter -> options whose value is a program
_INLINE_FLAGS: dict[str, tuple[str, ...]] = {
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "node": ("-e", "--eval", "-p", "--print"),
    "nodejs": ("-e", "--eval", "-p", "--print"),
    "php": ("-r",),
    "lua": ("-e",),
    "luajit": ("-e",),
    "Rscript": ("-e",),
    "osascript": ("-e",),
    "jshell": (),
    "tclsh": (),
    "wish": (),
    "expect": ("-c",),
    "gdb": ("-ex", "--eval-command", "-iex", "--init-eval-command"),
}
_PY_ARGOPTS = {"-W", "-X", "--check-hash-based-pycs"}
# Anything in Python code that starts a process, or reaches a name without spelling it.
_PY_RISKY = re.compile(
    r"system|popen|exec|spawn|subprocess|\bpty\b|ctypes|cffi|fork|__import__|importlib|getattr|attrgetter"
    r"|methodcaller|eval|compile|globals|locals|builtins|vars\s*\(|__dict__|__class__|__subclasses__"
    r"|\\[xuUN0-7]|chr\s*\(|fromhex|b64|base64|codecs|marshal|pickle|shelve|webbrowser|startfile|sys\.modules"
    r"|breakpoint|code\.interact|runpy|os\.[a-z_]*exec"
)
_AWK = {"awk", "gawk", "mawk", "nawk", "busybox-awk"}
_AWK_RISKY = re.compile(r"system|getline|\|")
_VIM = {"vim", "vi", "nvim", "ex", "view", "gvim", "vimdiff"}
_SED_ADDR = r"(\d+|\$|/[^/]*/)(\s*[,~]\s*(\d+|\$|/[^/]*/))?"
_SED_EXEC = re.compile(
    r"(^|[;\n{}])\s*(" + _SED_ADDR + r")?\s*!?\s*e(\s|;|$)|s(?P<d>.).*(?P=d).*(?P=d)[gpIiMm0-9]*e"
)


def _python_code(argv: list[str], stdin_script: str | None) -> str | None:
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-c":
            return argv[i + 1] if i + 1 < len(argv) else ""
        if arg.startswith("-c"):
            return arg[2:]
        if arg == "-m" or arg.startswith("-m"):
            return None  # a module, like a script file
        if re.fullmatch(r"-[A-Za-z]+", arg) and ("c" in arg or "m" in arg):  # a cluster: -Ic, -uBm
            cut = min(arg.index(x) for x in "cm" if x in arg)
            if arg[cut] == "m":
                return None
            return arg[cut + 1 :] or (argv[i + 1] if i + 1 < len(argv) else "")
        if arg == "-" or not arg.startswith("-"):
            return stdin_script if arg == "-" else None
        i += 2 if arg in _PY_ARGOPTS else 1
    return stdin_script


def _flag_code(argv: list[str], flags: tuple[str, ...], stdin_script: str | None) -> str | None:
    for i, arg in enumerate(argv[1:], 1):
        for flag in flags:
            if arg == flag:
                return argv[i + 1] if i + 1 < len(argv) else ""
            if arg.startswith(flag + "=") or (len(flag) == 2 and arg.startswith(flag) and len(arg) > 2):
                return arg.split("=", 1)[1] if arg.startswith(flag + "=") else arg[2:]
            letter = flag[1:]
            if len(flag) == 2 and re.fullmatch(r"-[A-Za-z]+", arg) and letter in arg:  # -we, -le: clustered
                rest = arg[arg.index(letter) + 1 :]
                return rest or (argv[i + 1] if i + 1 < len(argv) else "")
    operands = [a for a in argv[1:] if not a.startswith("-")]
    return stdin_script if not operands or operands[0] == "-" else None


def inline_code_reason(argv: list[str], stdin_script: str | None) -> str | None:
    """Why this command runs inline code that could start any program, or None.

    `stdin_script`: the text fed on stdin (a here-document or a literal piped in), "" for a pipe we
    cannot see, None for none."""
    if not argv:
        return None
    prog = os.path.basename(argv[0])
    if _PYTHON.match(prog):
        code = _python_code(argv, stdin_script)
        if code is None:
            return None
        if code == "":
            return "runs Python code it reads from a pipe we cannot see"
        if _PY_RISKY.search(unicodedata.normalize("NFKC", code)):
            return "runs inline Python code that can start other programs"
        return None
    if prog in ("at", "batch") and "-f" not in argv and stdin_script is not None:
        return "schedules shell commands it reads from stdin (they run later, unchecked)"
    if prog in _INLINE_FLAGS:
        code = _flag_code(argv, _INLINE_FLAGS[prog], stdin_script)
        return None if code is None else f"runs inline {prog} code (not analysed; it can start any program)"
    if prog in _AWK:
        program = _awk_program(argv)
        if program is not None and _AWK_RISKY.search(program):
            return "runs an awk program that can start commands (system, getline or a pipe)"
    if prog in _VIM and any(a in ("-c", "--cmd", "-S") or a.startswith("+") for a in argv[1:]):
        return f"runs {prog} commands given on the command line (they can start any program)"
    if (prog in _VIM or prog in ("ed", "red")) and stdin_script is not None:
        return f"runs {prog} commands it reads from its input (`!` starts a shell)"
    if prog in ("make", "gmake") and any(
        _reads_stdin_file(a, b) for a, b in zip(argv, argv[1:], strict=False)
    ):
        return "runs a makefile it reads from stdin or another command (its recipes are shell lines)"
    if prog == "sed" and _SED_EXEC.search(" ".join(_sed_scripts(argv))):
        return "runs a sed script with the e command (it starts a shell)"
    return None


def _reads_stdin_file(opt: str, value: str) -> bool:
    name = (
        value
        if opt in ("-f", "--file", "--makefile")
        else opt.split("=", 1)[-1]
        if opt.startswith(("--file=", "--makefile="))
        else opt[2:]
        if opt.startswith("-f") and len(opt) > 2
        else None
    )
    return name is not None and (name == "-" or name.startswith(("/dev/", "/proc/")))


def _awk_program(argv: list[str]) -> str | None:
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in ("-f", "--file") or arg.startswith("-f"):
            return None  # a program file
        if arg in ("-v", "-F", "--assign", "--field-separator"):
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return arg
    return None


def _sed_scripts(argv: list[str]) -> list[str]:
    scripts, i = [], 1
    while i < len(argv):
        arg = argv[i]
        if arg in ("-e", "--expression") and i + 1 < len(argv):
            scripts.append(argv[i + 1])
            i += 2
            continue
        if arg.startswith("--expression="):
            scripts.append(arg.split("=", 1)[1])
        elif not arg.startswith("-") and not scripts:
            scripts.append(arg)  # the first operand is the script when no -e is given
            break
        i += 1
    return scripts


_SSH_ARGOPTS = {
    "-B",
    "-b",
    "-c",
    "-D",
    "-E",
    "-e",
    "-F",
    "-I",
    "-i",
    "-J",
    "-L",
    "-l",
    "-m",
    "-O",
    "-o",
    "-p",
    "-Q",
    "-R",
    "-S",
    "-W",
    "-w",
}
_SSH_LOCAL = re.compile(r"(?i)^(proxycommand|localcommand|knownhostscommand)\s*[= ]\s*(.*)$")
_TAR_COMMAND = (
    "--to-command=",
    "--use-compress-program=",
    "--info-script=",
    "--new-volume-script=",
    "--rsh-command=",
)


# Project runners whose subcommand runs the rest of the line as a command (`uv run rm -rf t`).
_RUNNERS = {
    ("uv", "run"),
    ("poetry", "run"),
    ("pipenv", "run"),
    ("conda", "run"),
    ("pdm", "run"),
    ("hatch", "run"),
    ("rye", "run"),
    ("npm", "exec"),
    ("pnpm", "exec"),
    ("pnpm", "dlx"),
    ("yarn", "exec"),
    ("bundle", "exec"),
    ("perf", "stat"),
    ("perf", "record"),
    ("perf", "trace"),
    ("mise", "exec"),
    ("direnv", "exec"),
    ("nix-shell", "--run"),
    ("npx", "-c"),
    ("npm", "x"),
}


def option_commands(argv: list[str]) -> list[str]:
    """Shell command lines that this command's options or operands run (see the module doc)."""
    if not argv:
        return []
    prog = os.path.basename(argv[0])
    found: list[str] = []
    for i, word in enumerate(argv[1:4], 1):  # `uv run [opts] CMD ...`: every tail after the subcommand
        if (prog, word) in _RUNNERS:
            tail = argv[i + 1 :]
            found += [shlex.join(tail[j:]) for j in range(len(tail)) if not tail[j].startswith("-")][:4]
            if word in ("-c", "--run") and tail:
                found.append(tail[0])
            break
    if prog in ("scp", "sftp"):
        for i, arg in enumerate(argv):
            value = (
                argv[i + 1] if arg == "-o" and i + 1 < len(argv) else arg[2:] if arg.startswith("-o") else ""
            )
            if m := _SSH_LOCAL.match(value):
                found.append(m.group(2))
        return found
    if prog in ("ssh", "autossh"):
        i = 1
        while i < len(argv) and argv[i].startswith("-"):
            opt = argv[i]
            value = argv[i + 1] if opt in _SSH_ARGOPTS and i + 1 < len(argv) else None
            if opt.startswith("-o") and (m := _SSH_LOCAL.match(value if opt == "-o" and value else opt[2:])):
                found.append(m.group(2))
            i += 2 if value is not None else 1
        if i + 1 < len(argv):  # host, then the remote command
            found.append(" ".join(argv[i + 1 :]))
    elif prog == "rsync":
        for i, arg in enumerate(argv):
            if arg in ("-e", "--rsh") and i + 1 < len(argv):
                found.append(argv[i + 1])
            elif arg.startswith(("--rsh=", "--rsync-path=")):
                found.append(arg.split("=", 1)[1])
    elif prog in ("tar", "gtar", "bsdtar"):
        for i, arg in enumerate(argv):
            if arg.startswith(_TAR_COMMAND):
                found.append(arg.split("=", 1)[1])
            elif (arg + "=" in _TAR_COMMAND or arg in ("-I", "-F")) and i + 1 < len(
                argv
            ):  # `--to-command CMD`
                found.append(argv[i + 1])
            elif arg.startswith("--checkpoint-action=exec="):
                found.append(arg.split("=", 2)[2])
    elif prog == "zip":
        for i, arg in enumerate(argv):
            if arg in ("-TT", "--unzip-command") and i + 1 < len(argv):
                found.append(argv[i + 1])
            elif arg.startswith("--unzip-command="):
                found.append(arg.split("=", 1)[1])
    return found
