"""What the analysis of a command line (tools/safety/shellparse.py) yields: a SimpleCommand for each
command the line would run, with the spellings deny and allow rules are matched against (and what
an `echo` / `printf` / `cat <<EOF` prints, for the shell it is piped to), and the ParsedShell that
holds them all with the line's pipelines, parse error and opaque reasons.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from clover.tools.safety.shellnorm import canonical_argv, env_name, harmless_env, program_key
from clover.tools.safety.shellwords import expand_braces
from clover.tools.safety.shellwrap import PRIVILEGED


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
    inline_code: str | None = None  # why code written into the line may start programs (shellcode.py)
    # per word of `words`: its value is only known when it runs (`$X`, `$(...)`, an unquoted glob,
    # brace or `~`); such a word may stand for any number of words
    word_dynamic: list[bool] = field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(self.words)

    def deny_forms(self) -> list[str]:
        """Every spelling a deny rule should be tried against."""
        forms = [" ".join(self.words), " ".join(self.argv)]
        if self.argv:
            base = [os.path.basename(self.argv[0]) or self.argv[0], *self.argv[1:]]
            forms.append(" ".join(base))
            if base[0] == "git":  # `git -C dir -c k=v push --force` is still `git push --force`
                key, start = program_key(base)
                forms.append(" ".join([*key.split(" "), *base[start:]]))
            expanded = [e for w in base for e in expand_braces(w)]
            forms.append(" ".join(expanded))
            for words in (base, expanded):  # flags first, merged; long ones also kept as written
                forms += [" ".join(canonical_argv(words)), " ".join(canonical_argv(words, fold=False))]
            if self.writes:  # lets `bash(* > /etc/*)` style rules see redirect targets
                forms.append(" ".join(base + [f"> {w}" for w in self.writes]))
            if self.assigns:  # `bash(GIT_CONFIG* *)` style rules see the prefixes
                forms.append(" ".join([*self.assigns, *base]))
        return list(dict.fromkeys(f for f in forms if f))

    def program(self) -> str | None:
        """`rm`, `git push`: what a rule must name to match this command whatever its unknown tail."""
        return program_key(self.argv)[0] if self.argv and not self.dynamic else None

    def allow_words(self) -> list[list[str]]:
        """Word lists an allow rule may match: as written, or with harmless wrappers removed.
        Environment prefixes stay visible unless harmless (LANG, TZ, ...; see tools/safety/shellnorm.py)."""
        shown = [a for a in self.assigns if not harmless_env(env_name(a))]
        forms = [[*shown, *self.words]]
        if not PRIVILEGED.intersection(self.wrappers):
            forms.append([*shown, *self.argv])
        return [f for f in forms if f]


@dataclass
class ParsedShell:
    commands: list[SimpleCommand] = field(default_factory=list)
    pipelines: list[list[SimpleCommand]] = field(default_factory=list)  # two or more commands
    error: str | None = None  # set when the line could not be parsed; commands are then a guess
    opaque: list[str] = field(default_factory=list)  # line-level reasons what runs is unknowable
    compound: list[str] = field(default_factory=list)  # loops, conditionals, functions in the line
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


def literal_output(cmd: SimpleCommand | None) -> str | None:
    """What `echo ...` / `printf ...` / `cat <<EOF` writes, so `echo 'rm -rf x' | sh` is checked."""
    if cmd is None or not cmd.argv or cmd.dynamic:
        return None
    prog = os.path.basename(cmd.argv[0])
    if prog == "cat" and len(cmd.argv) == 1 and cmd.heredoc is not None:
        return cmd.heredoc
    args = [a for a in cmd.argv[1:] if not (prog == "echo" and a in ("-n", "-e", "-E"))]
    return " ".join(args) if prog in ("echo", "printf") else None
