"""Issue texts a user would write: the symptom, a small reproduction, what they expected.

Everything shown is observed, not invented: the generator runs the example call against the buggy
and the correct code and passes both outcomes here. The text never names the faulty line (a
traceback, when there is one, shows only what Python itself would print).
"""

from __future__ import annotations

import random
import traceback
from dataclasses import dataclass
from typing import Any


@dataclass
class Outcome:
    """What evaluating one example expression did: returned `value` or raised `error`."""

    value: Any = None
    error: BaseException | None = None
    trace: str = ""  # the traceback a user would see, for errors

    @property
    def raised(self) -> bool:
        return self.error is not None

    @property
    def error_name(self) -> str:
        return type(self.error).__name__ if self.error is not None else ""


def format_traceback(error: BaseException, module_file: str, module_lines: list[str], shown_path: str) -> str:
    """A REPL-style traceback limited to the user's line and the library's frames."""
    lines = ["Traceback (most recent call last):", '  File "<stdin>", line 1, in <module>']
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename != module_file or frame.lineno is None:
            continue
        lines.append(f'  File "{shown_path}", line {frame.lineno}, in {frame.name}')
        lines.append("    " + module_lines[frame.lineno - 1].strip())
    only = traceback.TracebackException.from_exception(error).format_exception_only()
    lines.extend(part.rstrip("\n") for part in only)
    return "\n".join(lines)


_INTROS = (
    "I ran into this while using {pkg} {version}.",
    "Found this while writing a small script on top of `{pkg}`.",
    "Not sure whether this is intended, but it looks like a bug to me.",
    "We use `{name}` in a data pipeline and started seeing odd results.",
    "",
    "Hi! Small bug report for `{dotted}`.",
)

_VALUE_TITLES = (
    "`{name}` returns the wrong result",
    "Incorrect output from {name}()",
    "{name}: unexpected return value for `{call}`",
    "Wrong value from `{dotted}.{name}`",
    "`{call}` gives {actual}",
)

_RAISE_TITLES = (
    "{name}() raises {error}",
    "{error} when calling {name}",
    "Crash in `{name}`: {error}",
)

_NO_RAISE_TITLES = (
    "{name}() accepts invalid input instead of raising {expected_error}",
    "`{call}` should raise {expected_error}",
)

_EXPECT_VALUE = (
    "I expected `{expected}`.",
    "It should return `{expected}`.",
    "The expected result is `{expected}`.",
    "As far as I can tell the correct answer is `{expected}`.",
)


def _doc_line(doc: str | None, name: str, rng: random.Random) -> str:
    if not doc or rng.random() < 0.3:
        return ""
    return rng.choice(
        (
            f'The docstring of `{name}` says: "{doc}"',
            f'According to the documentation, {name} should do this: "{doc}"',
            f'(Docs: "{doc}")',
        )
    )


def _repl(import_line: str, call: str, result: Outcome) -> str:
    if result.raised:
        return f"```python\n>>> {import_line}\n>>> {call}\n{result.trace}\n```"
    if result.value is None:
        return f"```python\n>>> {import_line}\n>>> print({call})\nNone\n```"
    return f"```python\n>>> {import_line}\n>>> {call}\n{result.value!r}\n```"


def _script(import_line: str, call: str, result: Outcome) -> str:
    shown = f"raises {result.error_name}" if result.raised else repr(result.value)
    return f"```python\n{import_line}\n\nresult = {call}\nprint(result)  # {shown}\n```"


def problem_statement(
    rng: random.Random,
    *,
    pkg: str,
    version: str,
    dotted: str,
    name: str,
    subject: str,
    call: str,
    doc: str | None,
    correct: Outcome,
    buggy: Outcome,
) -> str:
    """Title line, blank line, body — the shape of a GitHub issue's text in SWE-bench.

    `name` is what the reproduction imports; `subject` is what the text talks about (a function,
    or `Class.method`).
    """
    import_line = f"from {dotted} import {name}"
    fmt = {"pkg": pkg, "version": version, "dotted": dotted, "name": subject, "call": call}
    if not buggy.raised:
        fmt["actual"] = repr(buggy.value)
    if correct.raised:
        fmt["expected_error"] = correct.error_name
    else:
        fmt["expected"] = repr(correct.value)
    if buggy.raised:
        fmt["error"] = buggy.error_name

    if buggy.raised:
        title = rng.choice(_RAISE_TITLES)
        body = [_repl(import_line, call, buggy)]
        if correct.raised:
            body.append(f"This should raise `{correct.error_name}`, not `{buggy.error_name}`.")
        else:
            body.append(rng.choice(_EXPECT_VALUE).format(**fmt))
    elif correct.raised:
        title = rng.choice(_NO_RAISE_TITLES)
        body = [
            rng.choice((_repl, _script))(import_line, call, buggy),
            f"Instead of returning `{buggy.value!r}` this should raise `{correct.error_name}`.",
        ]
    else:
        title = rng.choice(_VALUE_TITLES)
        lead = rng.choice(
            (
                "Calling `{call}` returns `{actual}`.",
                "`{call}` gives `{actual}`:",
                "Minimal example:",
                "Reproduction:",
            )
        ).format(**fmt)
        body = [
            lead,
            rng.choice((_repl, _script))(import_line, call, buggy),
            rng.choice(_EXPECT_VALUE).format(**fmt),
        ]

    intro = rng.choice(_INTROS).format(**fmt)
    doc_line = _doc_line(doc, subject, rng)
    parts = [title.format(**fmt), intro, *body, doc_line]
    return "\n\n".join(p for p in parts if p) + "\n"


# ---------------------------------------------------------------------- plain prose
# How people often write a report: one or two sentences, an expected/actual pair, a failing test's
# name, a bare traceback; no import line, so finding the code is the agent's job. Values are shown
# as repr (backticked or not), the way a user pastes them.

_PROSE_VALUE = (
    "`{call}` returns {actual} but should be {expected}.",
    "`{call}` returns `{actual}` but should return `{expected}`.",
    "`{call}` should give `{expected}`, but it gives `{actual}`.",
    "Expected: `{call}` -> `{expected}`\nActual: `{actual}`",
    "Expected: `{call}` gives `{expected}`\nActual: it gives `{actual}`",
    "{call} returns {actual} instead of {expected}.",
    "I get `{actual}` from `{call}`; I expected `{expected}`.",
)

_PROSE_RAISE = (
    "`{call}` raises `{error}: {message}` instead of returning `{expected}`.",
    "`{call}` crashes with {error} ({message}). It should return `{expected}`.",
    "```\n{trace}\n```\n\n`{call}` should give `{expected}`.",
)

_PROSE_RAISE_BOTH = ("`{call}` raises `{error}`, but it should raise `{expected_error}`.",)

_PROSE_NO_RAISE = (
    "`{call}` returns `{actual}` instead of raising `{expected_error}`.",
    "`{call}` should raise {expected_error}, but it returns {actual}.",
)

_PROSE_TITLES = (
    "{name} returns the wrong value",
    "{name} is wrong for `{call}`",
    "Bug in {name}",
    "{name}() gives the wrong answer",
    "{test} fails",
    "",
)


def prose_statement(
    rng: random.Random, *, name: str, call: str, correct: Outcome, buggy: Outcome, test: str
) -> str:
    """A short plain-prose report about `name` (no import line, no runnable example); `test` is the
    failing test's id a title may name."""
    fmt = {"name": name, "call": call, "test": test}
    if buggy.raised:
        fmt |= {"error": buggy.error_name, "message": str(buggy.error), "trace": buggy.trace}
        if correct.raised:
            fmt["expected_error"] = correct.error_name
            body = rng.choice(_PROSE_RAISE_BOTH)
        else:
            fmt["expected"] = repr(correct.value)
            body = rng.choice(_PROSE_RAISE)
    elif correct.raised:
        fmt |= {"actual": repr(buggy.value), "expected_error": correct.error_name}
        body = rng.choice(_PROSE_NO_RAISE)
    else:
        fmt |= {"actual": repr(buggy.value), "expected": repr(correct.value)}
        body = rng.choice(_PROSE_VALUE)
    title = rng.choice(_PROSE_TITLES)
    parts = [title.format(**fmt), body.format(**fmt)]
    return "\n\n".join(p for p in parts if p) + "\n"
