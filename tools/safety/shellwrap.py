"""What wrappers and shells run: `sudo -u x rm` runs `rm`, `bash -c 'STRING'` runs STRING.

tools/safety/shellparse.py peels the wrappers in `_WRAPPER_ARGOPTS` off a command (deny and allow rules then
see the command they run), parses `-c` strings of shells, `su`, `watch` and the EXEC_WRAPPERS, checks
every tail of an EXEC_WRAPPERS command's argv as a command, and the commands git runs for
`rebase -x`, `bisect run`, `submodule foreach`, `--upload-pack`, ... (`git_runs`).
"""

from __future__ import annotations

import os
import re

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
    "xargs": {
        "-a",
        "-d",
        "-E",
        "-I",
        "-L",
        "-n",
        "-P",
        "-s",
        "--arg-file",
        "--delimiter",
        "--max-args",
        "--max-procs",
        "--max-chars",
        "--max-lines",
    },
}
# Programs that run a command given in their arguments, with options we do not model: every tail of
# their argv that starts with an operand is checked as a command (`flock /tmp/l rm -rf t` runs
# `rm -rf t`), a last operand with spaces and a `-c` string as a script.
EXEC_WRAPPERS = {
    "flock",
    "strace",
    "ltrace",
    "valgrind",
    "unshare",
    "chroot",
    "nsenter",
    "runuser",
    "script",
    "parallel",
    "xvfb-run",
    "firejail",
    "systemd-run",
    "catchsegv",
    "proot",
    "fakeroot",
    "faketime",
    "torsocks",
    "proxychains",
    "proxychains4",
    "nocache",
    "eatmydata",
    "tini",
    "dumb-init",
    "sg",
    "rlwrap",
    "cpulimit",
    "prlimit",
    "ccache",
    "distcc",
    "sudoedit",
    "setpriv",
    "capsh",
    "chpst",
    "numactl",
    "hyperfine",
    "entr",
    "gtimeout",
    "caffeinate",
    "with-contenv",
    "s6-setuidgid",
}
# wrappers followed by one positional argument before the command (duration, priority, cpu mask)
_WRAPPER_POSITIONAL = {"timeout": 1, "chrt": 1, "taskset": 1}


def peel(
    words: list[str], dynamic: list[bool], env_assigns: list[str] | None = None, limit: int = 64
) -> tuple[list[str], list[bool], list[str]]:
    """Strip wrappers (`sudo -u x`, `env A=1`, `timeout 5`, `xargs -0`, a leading `\\`), at most
    `limit` of them; the assignments `env` makes go to `env_assigns`."""
    i, wrappers = 0, []
    while i < len(words) and len(wrappers) < limit:
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
            split_arg = None
            if prog == "env" and opt in ("-S", "--split-string") and i < len(words):
                split_arg, i = words[i], i + 1
            elif prog == "env" and (opt.startswith("--split-string=") or re.fullmatch(r"-[iv0]*S.+", opt)):
                split_arg = opt.split("=", 1)[1] if opt.startswith("--") else opt[opt.index("S") + 1 :]
            if split_arg is not None:  # env -S "cmd args" runs the split string
                split = split_arg.split() + words[i:]
                return split, [dynamic[i - 1]] * len(split), wrappers
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


def shell_c_string(argv: list[str]) -> str | None:
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-", "--"):
        opt = argv[i]
        if not opt.startswith("--") and "c" in opt[1:]:
            rest = [a for a in argv[i + 1 :]]
            j = 0
            while j < len(rest) and rest[j].startswith("-") and rest[j] != "-":
                if rest[j] == "--":  # `bash -c -- 'rm -rf t'`
                    j += 1
                    break
                j += 2 if rest[j] in ("-o", "-O") else 1
            return rest[j] if j < len(rest) else ""
        i += 2 if opt in ("-o", "-O", "--rcfile", "--init-file") else 1
    return None


STDIN_PATHS = {"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"}


def shell_reads_stdin(argv: list[str]) -> bool:
    rest = skip_opts(argv[1:], {"-o", "-O", "--rcfile", "--init-file"})
    return not rest or rest[0] in STDIN_PATHS or "-s" in argv[1:]


def script_operand(argv: list[str]) -> int | None:
    """Index of the file a shell (or `source`/`.`) reads its code from, None for none or stdin."""
    if os.path.basename(argv[0]) in ("source", "."):
        return 1 if len(argv) > 1 and argv[1] not in STDIN_PATHS else None
    if "-s" in argv[1:]:
        return None
    rest = skip_opts(argv[1:], {"-o", "-O", "--rcfile", "--init-file"})
    if not rest or rest[0] in STDIN_PATHS:
        return None
    return len(argv) - len(rest)


def skip_opts(args: list[str], argopts: set[str]) -> list[str]:
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        if args[i] == "--":
            return args[i + 1 :]
        i += 2 if args[i] in argopts else 1
    return args[i:]


def dash_c_value(argv: list[str]) -> str | None:
    for i, a in enumerate(argv[1:], start=1):
        if (a in ("-c", "--command") or re.fullmatch(r"-[A-Za-z]+c", a)) and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--command="):
            return a.split("=", 1)[1]
    return None


# git subcommands' options whose value is a command git runs (`git rebase -x CMD`, `git fetch
# --upload-pack=CMD` on a local path, ...)
_GIT_EXEC_OPTS = {
    "rebase": ("-x", "--exec"),
    "difftool": ("-x", "--extcmd"),
    "grep": ("-O", "--open-files-in-pager"),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack",),
    "clone": ("-u", "--upload-pack"),
    "ls-remote": ("--upload-pack",),
    "archive": ("--exec",),
    "push": ("--receive-pack", "--exec"),
    "send-email": ("--sendmail-cmd", "--smtp-server"),
}


# git configuration keys whose value is a command git runs later (`alias.x = !cmd`, core.fsmonitor ...)
_GIT_CODE_KEY = re.compile(
    r"(?i)^(alias\..+|core\.(fsmonitor|pager|editor|sshcommand|askpass|gitproxy)|sequence\.editor|diff\.external"
    r"|(diff|difftool|mergetool|merge|filter|browser|man|credential|gpg|pager|remote)\..*"
    r"|credential\.helper|gpg\.program|uploadpack\.packobjectshook|web\.browser|sendemail\..*)$"
)


def git_runs(argv: list[str], sub: str | None, rest: list[str]) -> tuple[list[str], list[list[str]]]:
    """(scripts, argvs) that `git SUB REST...` runs: option values above, `bisect run CMD...`,
    `submodule foreach CMD`."""
    scripts: list[str] = []
    argvs: list[list[str]] = []
    if sub == "bisect" and rest[:1] == ["run"]:
        argvs.append(rest[1:])
    if sub == "config":  # the value of a key that names a command runs on later git commands
        operands = [w for w in rest if not w.startswith("-") and w not in ("set", "--add")]
        if len(operands) >= 2 and _GIT_CODE_KEY.match(operands[0]):
            scripts.append(operands[1].removeprefix("!"))
    if sub == "submodule" and "foreach" in rest:
        tail = rest[rest.index("foreach") + 1 :]
        scripts.append(" ".join(w for w in tail if w not in ("--recursive", "-q", "--quiet")))
    for i, word in enumerate(rest):
        for opt in _GIT_EXEC_OPTS.get(sub or "", ()):
            if word == opt and i + 1 < len(rest):
                scripts.append(rest[i + 1])
            elif word.startswith(opt + "="):
                scripts.append(word.split("=", 1)[1])
            elif not opt.startswith("--") and word.startswith(opt) and len(word) > len(opt):
                scripts.append(word[len(opt) :])
    return [s for s in scripts if s.strip()], [a for a in argvs if a]
