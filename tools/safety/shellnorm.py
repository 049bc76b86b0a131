"""Normalising shell words for permission rules: flag order, risky environment names, git
subcommands, and "could this unfinished command still match that glob?"

What deny rules see, normalised (tools/safety/permissions.py compares every form):
- short flags anywhere before `--` are merged into one sorted cluster right after the program
  (`rm t -r -f`, `rm -fr t`, `rm -rf t` -> `rm -fr t`); long synonyms fold into it for the programs
  in `_FLAG_SYNONYMS` (`rm --recursive --force` -> `rm -fr`), abbreviated too (`rm --rec --fo`, as
  getopt_long reads them), other long flags move before operands;
- `git` is read as `git SUBCOMMAND` (global options before the subcommand are dropped);
- brace expansion is applied (`rm -r{f,} t` -> `rm -rf -r t`; tools/safety/shellwords.py);
- quotes are removed as bash does (`r'm'`, `$'r\\x6d'` -> `rm`; tools/safety/shellwords.py).
"""

from __future__ import annotations

import os
import re

_SHORT = re.compile(r"^-[A-Za-z]+$")
_GLOB_CHARS = set("*?[")
# program -> (long options, short letters) that mean the same as one of its short flags
_FLAG_SYNONYMS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "rm": ({"--recursive": "r", "--force": "f", "--dir": "d", "--verbose": "v"}, {"R": "r"}),
    "cp": ({"--recursive": "r", "--force": "f"}, {"R": "r"}),
    "chmod": ({"--recursive": "R"}, {}),
    "chown": ({"--recursive": "R"}, {}),
    "git push": ({"--force": "f", "--delete": "d", "--all": "a"}, {}),
    "git reset": ({}, {}),
    "git clean": ({"--force": "f", "--dry-run": "n"}, {}),
}

# Git subcommands that are git's own (anything else may be an alias, which can run any command).
_GIT_WORDS = """
add am annotate apply archive bisect blame branch bundle cat-file check-attr check-ignore check-mailmap
check-ref-format checkout checkout-index cherry cherry-pick clean clone commit commit-graph commit-tree
config count-objects describe diff diff-files diff-index diff-tree difftool fetch for-each-ref
format-patch fsck gc grep hash-object help init log ls-files ls-remote ls-tree maintenance merge
merge-base merge-file merge-tree mergetool mktag mktree mv name-rev notes pack-refs prune pull push
range-diff read-tree rebase reflog remote repack replace rerere reset restore rev-list rev-parse revert
rm shortlog show show-branch show-ref sparse-checkout stash status stripspace submodule switch
symbolic-ref tag update-index update-ref var verify-commit verify-tag version whatchanged worktree
write-tree lfs
"""
GIT_COMMANDS = frozenset(_GIT_WORDS.split())
GIT_GLOBAL_ARG = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"}

# Environment names that change which program or code a command runs (the search path, the
# dynamic loader, shell start-up files, git's configuration, pagers and editors). Set on a command
# or exported, they make the command impossible to check against deny rules.
_RISKY_ENV = re.compile(
    r"^(PATH|ENV|BASH_ENV|SHELLOPTS|BASHOPTS|PROMPT_COMMAND|PS[0-4]|HOME|XDG_CONFIG_HOME|XDG_CONFIG_DIRS"
    r"|LD_\w+|DYLD_\w+|BASH_FUNC_\S*|BASH_LOADABLES_PATH|PAGER|EDITOR|VISUAL|MANPAGER|LESSOPEN|LESSCLOSE"
    r"|SSH_ASKPASS|SUDO_ASKPASS|BROWSER|GIT_(?!AUTHOR_|COMMITTER_|TERMINAL_PROMPT$)\w+)$"
)
# Environment prefixes an allow rule may look past (`LANG=C git status` is still `git status`);
# any other prefix stays part of what allow rules must match.
_HARMLESS_ENV = re.compile(
    r"^(LANG|LANGUAGE|LC_\w+|TZ|TERM|NO_COLOR|FORCE_COLOR|CLICOLOR|COLUMNS|LINES|CI|PYTHONUNBUFFERED"
    r"|PYTHONDONTWRITEBYTECODE|PYTHONHASHSEED|PYTHONIOENCODING|GIT_AUTHOR_\w+|GIT_COMMITTER_\w+"
    r"|GIT_TERMINAL_PROMPT)$"
)


def env_name(assignment: str) -> str:
    return assignment.split("=", 1)[0].rstrip("+")


def risky_env(name: str) -> bool:
    return bool(_RISKY_ENV.match(name))


def harmless_env(name: str) -> bool:
    return bool(_HARMLESS_ENV.match(name))


def has_glob(word: str) -> bool:
    return any(c in _GLOB_CHARS for c in word)


def program_key(words: list[str]) -> tuple[str, int]:
    """(`rm`, 1) or (`git push`, index after the subcommand) for `git [globals] push ...`."""
    prog = os.path.basename(words[0]) or words[0]
    if prog != "git":
        return prog, 1
    i = 1
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in GIT_GLOBAL_ARG else 1
    if i < len(words):
        return f"git {words[i]}", i + 1
    return "git", i


def canonical_argv(words: list[str], fold: bool = True) -> list[str]:
    """Program, one sorted short-flag cluster, other flags, then operands (see the module doc).
    `fold`: long options with a short synonym join the cluster (`--force` -> `f`)."""
    if not words:
        return list(words)
    key, start = program_key(words)
    long_names, letters_map = _FLAG_SYNONYMS.get(key, ({}, {})) if fold else ({}, {})
    letters: list[str] = []
    longs: list[str] = []
    operands: list[str] = []
    rest = words[start:]
    for i, word in enumerate(rest):
        if word == "--":
            operands += rest[i + 1 :]
            break
        if _SHORT.match(word):
            letters.extend(letters_map.get(c, c) for c in word[1:])
        elif word in long_names:
            letters.append(long_names[word])
        elif abbreviated := _abbreviation_letters(word, long_names):  # `--rec` is `--recursive`
            letters += abbreviated
        elif word.startswith("--") and len(word) > 2 and not has_glob(word):
            longs.append(word)
        else:
            operands.append(word)
    head = key.split(" ")
    cluster = ["-" + "".join(sorted(set(letters)))] if letters else []
    return [*head, *cluster, *longs, *operands]


def _abbreviation_letters(word: str, long_names: dict[str, str]) -> list[str]:
    """GNU getopt_long and git take any unambiguous prefix of a long option (`rm --rec --fo`).
    For deny rules every option the prefix could stand for counts, ambiguous or not (the program
    then fails, or runs one of them)."""
    if not word.startswith("--") or len(word) < 3 or "=" in word or has_glob(word):
        return []
    return [letter for name, letter in long_names.items() if name.startswith(word)]


def long_option_names(word: str, known: set[str] | frozenset[str]) -> list[str]:
    """The options of `known` that `--word[=value]` names, spelled in full or abbreviated."""
    if not word.startswith("--") or len(word) < 3:
        return []
    name = word.split("=", 1)[0]
    return [k for k in known if k == name or k.startswith(name)]


def glob_prefix_feasible(prefix: str, pattern: str) -> bool:
    """True when some string starting with `prefix` matches the fnmatch `pattern` (`*` also
    matches `/` and spaces): a command whose tail is unknown may still match the rule."""
    tokens = _glob_tokens(pattern)
    states = _closure({0}, tokens)
    for ch in prefix:
        nxt = set()
        for s in states:
            if s >= len(tokens):
                continue
            kind, val = tokens[s]
            if kind == "*":
                nxt.add(s)
            elif kind == "?" or (kind == "lit" and val == ch) or (kind == "set" and _in_set(ch, val)):
                nxt.add(s + 1)
        states = _closure(nxt, tokens)
        if not states:
            return False
    return bool(states)


def _closure(states: set[int], tokens: list[tuple[str, str]]) -> set[int]:
    out = set(states)
    for s in sorted(states):
        while s < len(tokens) and tokens[s][0] == "*":
            s += 1
            out.add(s)
    return out


def _glob_tokens(pattern: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            tokens.append(("*", ""))
        elif ch == "?":
            tokens.append(("?", ""))
        elif ch == "[":
            j = i + 1
            if j < len(pattern) and pattern[j] == "!":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1
            while j < len(pattern) and pattern[j] != "]":
                j += 1
            if j >= len(pattern):
                tokens.append(("lit", "["))
            else:
                tokens.append(("set", pattern[i + 1 : j]))
                i = j
        else:
            tokens.append(("lit", ch))
        i += 1
    return tokens


def _in_set(ch: str, spec: str) -> bool:
    negate = spec.startswith("!")
    spec = spec[1:] if negate else spec
    hit, i = False, 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            hit = hit or spec[i] <= ch <= spec[i + 2]
            i += 3
        else:
            hit = hit or spec[i] == ch
            i += 1
    return hit != negate
