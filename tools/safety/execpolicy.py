"""The exec check's decision for one program start: go on, refuse, or ask.

1. Which program is it? Not what its argv[0] says: the file the kernel will run, opened in the
   process's own view (tools/safety/exectarget.py). A hard link, symlink or copy of a program a deny rule
   names is that program (same device and inode, or the same bytes: `cp /bin/rm ./del`). A `#!`
   script is also its interpreter with the script's arguments (`#!/bin/rm -rf`); the dynamic
   loader (`ld-linux.so /bin/rm -rf t`) is the program it loads; a multi-call binary (busybox) is
   the applet its argv names.
2. Deny rules: any of those spellings matching a deny rule refuses the start, in every mode.
3. Otherwise, with a grant that covers `everything` (yolo) it goes on. Else it must be covered:
   by a program the approved line names (tools/safety/execgrant.py), by an allow rule or a remembered
   approval on its exact argv, or be a helper of an approved program (a file under /usr/lib,
   /usr/libexec, /lib that is not on PATH and not a shell or interpreter: git-remote-https, cc1),
   or be started inside an approved script installed outside what the agent can write (a pyenv
   shim on its way to the real python), or only read (the standard plan mode's commands meet:
   `git rev-parse --git-dir`, `file -b x`). The program a template or rule names must be this
   very file as the command's PATH (or its working directory, for `./x`) finds it. An LD_PRELOAD
   or LD_AUDIT in its environment is never covered (that loads other code into it). Not covered:
   asked about, or refused (plan mode, headless).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from clover.tools.safety.execgrant import Grant
from clover.tools.safety.exectarget import ExecCall, Opened, TargetGone, env_names, open_in_task, shebang
from clover.tools.safety.permrules import SHELL_RULES, Rule, join_words
from clover.tools.safety.shelljudge import git_opaque
from clover.tools.safety.shellnorm import has_glob
from clover.tools.safety.shellparse import parse_shell
from clover.tools.safety.shellproof import read_only_proof
from clover.tools.safety.shellwrap import SHELLS

_SYSTEM_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_HELPER_DIRS = (
    "/usr/lib/",
    "/usr/libexec/",
    "/usr/lib64/",
    "/lib/",
    "/lib64/",
    "/usr/local/lib/",
    "/usr/local/libexec/",
)
_MULTICALL = {"busybox", "toybox", "coreutils"}
_LOADER = re.compile(r"^ld(-linux[\w.-]*|64)?\.so[\d.]*$|^ld-[\w.-]+\.so[\d.]*$")
_LOADER_ARGOPTS = {
    "--library-path",
    "--inhibit-rpath",
    "--audit",
    "--preload",
    "--argv0",
    "--glibc-hwcaps-prepend",
    "--glibc-hwcaps-mask",
}
_INTERPRETERS = re.compile(
    r"^(python[\d.]*|pypy[\d.]*|perl[\d.]*|ruby[\d.]*|node(js)?|php[\d.]*|lua[\d.]*|"
    r"tclsh[\d.]*|Rscript|java|env|busybox|toybox|gdb)$"
)
_LOADED_CODE = ("LD_PRELOAD", "LD_AUDIT")

Action = Literal["allow", "deny", "ask"]


@dataclass
class Verdict:
    action: Action
    reason: str
    argv: list[str]  # the start as shown to the user (the real program's name first)


class ProgramIndex:
    """The binaries of the programs deny rules name, and the multi-call binaries: by device and
    inode, and by size then SHA-256 (a copy has new inode but the same bytes)."""

    def __init__(self, names: Iterable[str], search_path: str) -> None:
        self.by_key: dict[tuple[int, int], set[str]] = {}
        self.by_size: dict[int, list[tuple[str, str]]] = {}  # size -> [(name, path)]
        self.multicall: set[tuple[int, int]] = set()
        self._hashes: dict[tuple[int, int, int, int], str] = {}
        dirs = [d for d in search_path.split(os.pathsep) if d] + list(_SYSTEM_DIRS)
        for name in {*names, *_MULTICALL}:
            for d in dict.fromkeys(dirs):
                path = os.path.join(d, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    continue
                real = os.path.basename(os.path.realpath(path))
                multi = name in _MULTICALL or real in _MULTICALL
                self.by_key.setdefault((st.st_dev, st.st_ino), set()).add("" if multi else name)
                if multi:
                    self.multicall.add((st.st_dev, st.st_ino))
                self.by_size.setdefault(st.st_size, []).append(("" if multi else name, path))

    def identify(self, opened: Opened) -> tuple[set[str], bool]:
        """(names of denied programs this file is, whether it is a multi-call binary)."""
        key = opened.key
        if key in self.by_key:
            names = self.by_key[key]
            return {n for n in names if n}, key in self.multicall
        same_size = self.by_size.get(opened.st.st_size)
        if not same_size or not stat.S_ISREG(opened.st.st_mode):
            return set(), False
        digest = self._digest_fd(opened)
        if digest is None:
            return set(), False
        names, multi = set(), False
        for name, path in same_size:
            if self._digest_path(path) == digest:
                names.add(name)
                multi = multi or not name
        return {n for n in names if n}, multi

    def _digest_fd(self, opened: Opened) -> str | None:
        st = opened.st
        cache = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        if cache not in self._hashes:
            try:
                digest = hashlib.sha256()
                offset = 0
                while chunk := os.pread(opened.fd, 1 << 20, offset):
                    digest.update(chunk)
                    offset += len(chunk)
            except OSError:  # an execute-only file: unread, so unidentified
                return None
            self._hashes[cache] = digest.hexdigest()
        return self._hashes[cache]

    def _digest_path(self, path: str) -> str | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            return self._digest_fd(Opened(fd, os.fstat(fd), path, b""))
        finally:
            os.close(fd)


def denied_names(rules: Iterable[Rule]) -> set[str]:
    """The programs deny rules name (`bash(rm -rf *)` -> rm, `bash(git push*)` -> git)."""
    names = set()
    for rule in rules:
        if rule.tool not in SHELL_RULES or not rule.pattern:
            continue
        first = rule.pattern.split(" ", 1)[0]
        if first and not has_glob(first) and "=" not in first:
            names.add(os.path.basename(first))
    return names


class ExecPolicy:
    """Decides each program start of one command (see the module doc)."""

    def __init__(self, grant: Grant, search_path: str, index: ProgramIndex) -> None:
        self.grant = grant
        self.path = search_path
        self.index = index
        self._which: dict[tuple[str, str], tuple[int, int] | None] = {}
        self._denials: dict[tuple, str | None] = {}
        # pid -> (its start time, the script): processes running an approved installed script
        self._trusted: dict[int, tuple[str, str]] = {}

    # ------------------------------------------------------------------ identity

    def spellings(self, call: ExecCall, opened: Opened, depth: int = 0) -> list[list[str]]:
        """Every name-and-arguments this start may be read as (see the module doc, point 1)."""
        args = call.argv[1:]
        names, multi = self.index.identify(opened)
        names |= {os.path.basename(call.path or opened.path), os.path.basename(opened.path)}
        forms = [[n, *args] for n in sorted(n for n in names if n)]
        if multi:
            if call.argv:
                forms.append([os.path.basename(call.argv[0]), *args])
            if args:
                forms.append([os.path.basename(args[0].split("=")[-1]), *args[1:]])
        if depth < 4 and (bang := shebang(opened.head)):
            interp, arg = bang
            inner = open_in_task(call.pid, interp)
            if inner is not None:
                try:
                    script = [call.path or opened.path, *args]
                    sub = ExecCall(call.pid, interp, [interp, *([arg] if arg else []), *script])
                    forms += self.spellings(sub, inner, depth + 1)
                finally:
                    inner.close()
        if depth < 4 and _LOADER.match(os.path.basename(opened.path)) and (target := _loaded(args)):
            inner = open_in_task(call.pid, target[0])
            if inner is not None:
                try:
                    forms += self.spellings(ExecCall(call.pid, target[0], target), inner, depth + 1)
                finally:
                    inner.close()
        out: list[list[str]] = []
        for form in forms:
            if form not in out:
                out.append(form)
        return out

    def _same_program(self, call: ExecCall, word: str, opened: Opened) -> bool:
        """Whether `word` (a template's or rule's program) names the very file being run, as the
        command's PATH finds a bare name, or relative to the process's directory."""
        if "/" in word:
            other = open_in_task(call.pid, word)
            if other is None:
                return False
            try:
                return other.key == opened.key
            finally:
                other.close()
        # a PATH with relative entries finds other files in other directories
        relative = any(not d.startswith("/") for d in self.path.split(os.pathsep))
        cache = (word, str(call.pid) if relative else "")
        if cache not in self._which:
            self._which[cache] = self._lookup(call.pid, word)
        return self._which[cache] == opened.key

    def _lookup(self, pid: int, name: str) -> tuple[int, int] | None:
        for d in self.path.split(os.pathsep):
            other = open_in_task(pid, os.path.join(d or ".", name))
            if other is None:
                continue
            try:
                if stat.S_ISREG(other.st.st_mode) and other.st.st_mode & 0o111:
                    return other.key
            finally:
                other.close()
        return None

    # ------------------------------------------------------------------ decision

    def decide(self, call: ExecCall, opened: Opened) -> Verdict:
        grant = self.grant
        if denial := self._denial(call, opened):
            return Verdict("deny", denial, call.argv)
        if grant.everything:
            return Verdict("allow", "allowed", call.argv)
        why = self._not_covered(call, opened)
        if why is None:
            return Verdict("allow", "covered by the approval", call.argv)
        return Verdict("deny" if grant.read_only or grant.ask is None else "ask", why, call.argv)

    def _denial(self, call: ExecCall, opened: Opened) -> str | None:
        """Why a deny rule refuses this start, or None; remembered per file and argv (a loop
        starting the same program a thousand times is matched once)."""
        policy = self.grant.policy
        if policy is None or not policy.deny:
            return None
        st = opened.st
        key = (call.path, tuple(call.argv), opened.key, st.st_mtime_ns, st.st_size, opened.path)
        if key in self._denials:
            return self._denials[key]
        denial = None
        forms = self.spellings(call, opened)
        for form in forms:
            if rule := policy.denied_argv(form):
                read_as = "" if form == call.argv else f" (read as `{join_words(form)[:200]}`)"
                denial = f"denied by rule {rule.text}{read_as}"
                break
        git_rules = [r for r in policy.deny if r.pattern and r.pattern.startswith("git ")]
        git = next((f for f in forms if f and f[0] == "git"), None)
        if denial is None and git_rules and git and (why := git_opaque(git, [False] * len(git))):
            # an alias expands inside git (no program start): `git p` may be `git push`
            denial = f"it {why}, and rule {git_rules[0].text} names a git command"
        if len(self._denials) > 4096:
            self._denials.clear()
        self._denials[key] = denial
        return denial

    def _not_covered(self, call: ExecCall, opened: Opened) -> str | None:
        argv = call.argv
        try:
            loads = sorted(n for n in env_names(call) if n in _LOADED_CODE)
        except TargetGone:
            loads = []
        if loads:
            return f"it starts with {loads[0]} set, which loads other code into it"
        if self._in_trusted_chain(call, opened):
            return None
        covered = any(
            not t.dynamic[0] and t.matches(argv) and self._same_program(call, t.words[0], opened)
            for t in self.grant.templates
        )
        policy = self.grant.policy
        if not covered and policy is not None and argv:
            rule = policy.allowed_argv([os.path.basename(argv[0]), *argv[1:]], self.grant.remembered)
            rule = rule or policy.allowed_argv(argv, self.grant.remembered)
            covered = rule is not None and self._rule_names_it(rule, call, opened)
        if covered:
            if self._installed_script(opened):
                self._trusted[call.pid] = (_start_time(call.pid), call.path or opened.path)
            return None
        if self.grant.helpers and self._helper(opened):
            return None
        if (
            argv
            and read_only_proof(parse_shell(join_words(argv))) is None
            and self._same_program(call, argv[0], opened)
        ):
            return None  # it only reads (as plan mode's commands): `git rev-parse`, `file -b x`
        what = "the approved command" if not self.grant.read_only else "the read-only command"
        return f"it is not a program {what} names, and no allow rule covers it"

    def _installed_script(self, opened: Opened) -> bool:
        """A `#!` script installed outside everything the agent can write (a pyenv or rbenv shim,
        /usr/bin/pytest): what it starts on its way to the real program counts as approved."""
        if not opened.head.startswith(b"#!") or opened.st.st_mode & 0o002:
            return False
        return not any(
            opened.path == w or opened.path.startswith(w.rstrip("/") + "/") for w in self.grant.writable
        )

    def _in_trusted_chain(self, call: ExecCall, opened: Opened) -> bool:
        """Whether this start happens inside an approved installed script (see `_installed_script`):
        by the script's own process (a shim's `exec` of the next stage or of the real program,
        after which the chain ends) or by a process it started (`$(pyenv-version-name)`)."""
        pid = call.pid
        if not self._trusted:
            return False
        if pid in self._trusted and self._trusted[pid][0] == _start_time(pid):
            script = self._trusted[pid][1]
            if self._installed_script(opened):
                self._trusted[pid] = (self._trusted[pid][0], call.path or opened.path)
            elif script not in call.argv[1:]:  # not `env bash SCRIPT` for the `#!` line: the real program
                del self._trusted[pid]  # runs now, and what it starts is its own doing
            return True
        for ancestor in _ancestors(pid):
            if ancestor in self._trusted and self._trusted[ancestor][0] == _start_time(ancestor):
                return True
        return False

    def _rule_names_it(self, rule: Rule, call: ExecCall, opened: Opened) -> bool:
        words = rule.argv or rule.prefix
        if words is None and rule.exact:
            try:
                words = shlex.split(rule.exact)
            except ValueError:
                words = None
        if not words or has_glob(words[0]):
            return True  # `bash(*)`, `bash(*test*)`: the rule's author allowed any program
        return self._same_program(call, words[0], opened)

    def _helper(self, opened: Opened) -> bool:
        path = opened.path
        name = os.path.basename(path)
        if (
            not path.startswith(_HELPER_DIRS)
            or _LOADER.match(name)
            or _INTERPRETERS.match(name)
            or name in SHELLS
        ):
            return False
        if opened.st.st_uid != 0 or opened.st.st_mode & 0o022:
            return False  # only root's, unwritable files are the system's own
        return not any(shutil.which(name, path=d) for d in self.path.split(os.pathsep) if d)


def _stat_fields(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return []
    return raw[raw.rfind(")") + 2 :].split()  # after the command name, which may hold spaces


def _start_time(pid: int) -> str:
    fields = _stat_fields(pid)
    return fields[19] if len(fields) > 19 else ""


def _ancestors(pid: int, limit: int = 32) -> list[int]:
    out = []
    for _ in range(limit):
        fields = _stat_fields(pid)
        if len(fields) < 2 or int(fields[1]) <= 1:
            break
        pid = int(fields[1])
        out.append(pid)
    return out


def _loaded(args: list[str]) -> list[str] | None:
    """The program and arguments `ld.so [OPTIONS] PROGRAM ARGS...` runs."""
    i = 0
    while i < len(args) and args[i].startswith("--"):
        i += 2 if args[i] in _LOADER_ARGOPTS else 1
    return args[i:] if i < len(args) else None
