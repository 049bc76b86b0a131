"""What an issue says a call should do, as checks a candidate fix can be run against.

People report a bug the way they saw it: a `>>>` session or a short script with its output, a
traceback, or a sentence ("`to_fahrenheit(100)` returns 148 but should be 212"). An engineer's first
step is to reproduce it; this module turns such a report into `Check`s: statements to run first
(the report's imports, or imports found for the names it uses), one expression (the probe) and
what it should give (a value, an exception, or at least no crash). reproduce.py runs them
(those check_safety.py lets run).

Only what the issue's own text states is used: a report without a call and an expected outcome
gives no check (the edit is then chosen by the model alone). What Python printed is not what the
user expects: a pasted traceback's frames and exception message (`ValueError: not enough values to
unpack (expected 2, got 1)`) never give an expected value. Sessions and tracebacks are
read fenced or not: people paste them into a report's prose as often as into a code block.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from clover.steering.check_safety import safe

MAX_CHECKS = 3
MAX_ISSUE_CHARS = 20_000  # a longer report is read up to here
MAX_PROBES = 24  # calls looked at, in order of appearance
BLOCK = re.compile(r"```[\w+-]*\n(.*?)```", re.S)
VALUE = r"(?:`(?P<tick>[^`\n]+)`|(?P<bare>[^`\s][^\n]{0,300}))"  # a bare value: the longest literal it starts with
# "should be 212", "I expected `5.0`", "the correct answer is `7`", "... instead of 60"
EXPECT = re.compile(
    r"(?:should (?:[\w.]+ ){0,6}?(?:be|return|give|say)|(?:I )?expected(?: result is| value is)?|correct "
    r"(?:answer|result) is"
    r"|expect(?:ed)?\s*:|instead of(?: returning)?|want(?:ed)?)\s*:?\s*" + VALUE,
    re.I,
)
RAISES = re.compile(
    r"(?:should raise|instead of raising|expected to raise)\s+`?(?P<err>[A-Z]\w*(?:Error|Exception|Warning))`?"
)
# "Expected: `f(1)` -> `2`", "`f(1)` should give `2`" (a bare "`f(1)` gives `3`" reports what it does)
ARROW = re.compile(
    r"(?:Expected:\s*`(?P<call>[^`\n]+\))`\s*(?:gives|returns)|`(?P<call2>[^`\n]+\))`\s*"
    r"(?:->|→|=>|==|should give|should return|should be))\s*" + VALUE
)
TICKED_CALL = re.compile(r"`(?P<call>[A-Za-z_][\w.]*\([^`\n]*\))`")
BARE_CALL = re.compile(r"(?m)^(?P<call>[A-Za-z_][\w.]*\([^\n]*?\)) (?:returns|gives|raises|crashes|should)")
CRASHES = re.compile(r"\s*(?:raises|crashes|throws|fails with)\b")
NO_ARGS = re.compile(r"[A-Za-z_][\w.]*\(\)")
ASSIGN = re.compile(r"[A-Za-z_][\w.]*\s*=(?!=)")
TRACE_FRAME = re.compile(r'^\s*File "[^"]*", line \d+, in <module>\n(?P<code>[^\n]+)', re.M)
TRACE_START = re.compile(r"^\s*Traceback \(most recent call last\):\s*$")
# an exception's own line (`ValueError: ...`, `json.decoder.JSONDecodeError: ...`, a bare `KeyError`)
EXCEPTION_LINE = re.compile(
    r"^\s*(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt|Iteration)\b(?::.*)?$"
)
EXCEPTION_TEXT = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Warning): [^`\n]*")  # one quoted in a sentence


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def without_tracebacks(text: str) -> str:
    """`text` with every pasted traceback (from its `Traceback` line to its exception's line) and
    every exception message written as blanks, offsets kept: what Python printed states no expected
    value, whatever words it holds ("expected 2, got 1")."""
    out, inside = [], False
    for line in text.split("\n"):
        if TRACE_START.match(line):
            inside = True
        if inside or EXCEPTION_LINE.match(line):
            out.append(_blank(line))
            inside = inside and not EXCEPTION_LINE.match(line) and bool(line.strip())
        else:
            out.append(line)
    return EXCEPTION_TEXT.sub(lambda m: _blank(m.group()), "\n".join(out))


def unfenced_blocks(text: str) -> list[tuple[str, int]]:
    """(block, where it ends) for each `>>>` session and traceback written outside a code fence:
    a session runs from its first `>>>` line to the next blank line, a traceback to its exception's
    line; both dedented."""
    outside = BLOCK.sub(lambda m: _blank(m.group()), text)
    lines = outside.split("\n")
    found, i = [], 0
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(">>>") or TRACE_START.match(line):
            session = not TRACE_START.match(line)
            j = i + 1
            while j < len(lines) and lines[j].strip():
                if not session and EXCEPTION_LINE.match(lines[j]):
                    j += 1
                    break
                j += 1
            indent = min(len(x) - len(x.lstrip()) for x in lines[i:j] if x.strip())
            found.append(("\n".join(x[indent:] for x in lines[i:j]), starts[j] - 1))
            i = j
        else:
            i += 1
    return found


@dataclass(frozen=True)
class Expect:
    kind: str  # "value" | "raises" | "no_error"
    text: str = ""  # the value as written (a literal, or text compared with repr/str), or the error name


@dataclass(frozen=True)
class Check:
    setup: tuple[str, ...]  # statements run first (imports, assignments)
    probe: str  # one expression
    expect: Expect

    def to_json(self) -> dict:
        return {
            "setup": list(self.setup),
            "probe": self.probe,
            "kind": self.expect.kind,
            "text": self.expect.text,
        }


def _expression(code: str) -> str | None:
    """`code` as one expression: a `print(x)` is `x`, an assignment `y = f()` is `f()`."""
    try:
        tree = ast.parse(code.strip())
    except (SyntaxError, ValueError):
        return None
    if len(tree.body) != 1:
        return None
    node = tree.body[0]
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return ast.unparse(node.value)
    if not isinstance(node, ast.Expr):
        return None
    value = node.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print":
        if len(value.args) == 1 and not value.keywords:
            return ast.unparse(value.args[0])
        return None
    return ast.unparse(value)


def _session(block: str) -> tuple[list[str], str | None, bool | str]:
    """A `>>>` session, a short script or a script's traceback: (statements before the probe, the
    probe, whether the report shows it raising: "crash" for a traceback alone, whose line may do
    more than the call the report is about, so only "it should not crash" is taken from it)."""
    lines = block.strip("\n").split("\n")
    if any(line.startswith(">>>") for line in lines):
        stmts: list[str] = []
        for line in lines:
            if line.startswith(">>>"):
                stmts.append(line[3:].strip())
            elif line.startswith("...") and stmts:
                stmts[-1] += "\n" + line[4:]
        raised = "Traceback (most recent call last)" in block
    elif lines and lines[0].startswith("Traceback"):  # a script's crash: it should not crash
        frames = TRACE_FRAME.findall(block)
        return ([], _expression(frames[-1]) if frames else None, "crash")
    else:
        code = "\n".join(line.split("  # ", 1)[0] for line in lines)
        try:
            stmts = [ast.get_source_segment(code, n) or "" for n in ast.parse(code).body]
        except (SyntaxError, ValueError):
            return [], None, False
        raised = bool(re.search(r"#\s*raises\s+\w+", block))
        # `result = f(); print(result)`: the probe is what was printed
        if len(stmts) >= 2 and (printed := _expression(stmts[-1])) and re.fullmatch(r"[A-Za-z_]\w*", printed):
            for i in range(len(stmts) - 2, -1, -1):
                if re.match(rf"{printed}\s*=(?!=)", stmts[i]):
                    return stmts[:i], _expression(stmts[i]), raised
    for i in range(len(stmts) - 1, -1, -1):
        stmt = stmts[i]
        probe = None if stmt.startswith(("from ", "import ")) else _expression(stmt)
        if probe is not None and (i == len(stmts) - 1 or not ASSIGN.match(stmt)):
            return stmts[:i], probe, raised
    return stmts, None, raised


def _expected(text: str, after: int) -> Expect | None:
    """The outcome the report asks for, the first one stated after `after` (else anywhere); `text`
    without its tracebacks (without_tracebacks)."""
    for start in (after, 0):
        raises = RAISES.search(text, start)
        value = next(
            ((m.start(), v) for m in EXPECT.finditer(text, start) if (v := _value(m)) is not None), None
        )
        if raises is not None and (value is None or raises.start() < value[0]):
            return Expect("raises", raises.group("err"))
        if value is not None:
            return Expect("value", value[1])
    return None


def _value(m: re.Match) -> str | None:
    """A match's value: a backticked one as written, a bare one only when it is a Python literal."""
    if m.group("tick") is not None:
        value = m.group("tick").strip()
        return None if TICKED_CALL.fullmatch(f"`{value}`") or value.endswith("Error") else value
    rest = m.group("bare")
    ends = [i for i in range(len(rest), 0, -1) if i == len(rest) or rest[i] in " .,;:)!?"]
    for end in ends:
        bare = rest[:end].strip()
        if bare.endswith((",", ".")):  # the sentence's punctuation, not a tuple or a float
            continue
        try:
            ast.literal_eval(bare)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return bare
    return None


def _free_names(stmts: Iterable[str]) -> list[str]:
    """Names the statements use before they define or import them (in order, builtins left out)."""
    bound, free = set(dir(builtins)), []
    for stmt in stmts:
        try:
            tree = ast.parse(stmt)
        except (SyntaxError, ValueError):
            return []
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
                free.append(node.id)
        for node in ast.walk(tree):
            if isinstance(node, ast.alias):
                bound.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
    return list(dict.fromkeys(free))


def module_of(path: str) -> str | None:
    """The dotted module a workspace file is imported as (flat or `src/` layout)."""
    if not path.endswith(".py"):
        return None
    parts = path[:-3].split("/")
    if parts[0] in ("src", "lib") and len(parts) > 1:
        parts = parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) if parts and all(p.isidentifier() for p in parts) else None


def definitions(files: Iterable[str], read: Callable[[str], str | None]) -> dict[str, list[str]]:
    """Top-level `def`/`class` names -> the modules defining them (test files last)."""
    found: dict[str, list[str]] = {}
    ordered = sorted((f for f in files if f.endswith(".py")), key=lambda f: ("test" in f.split("/")[-1], f))
    for path in ordered:
        mod = module_of(path)
        text = read(path) if mod else None
        for name in re.findall(r"(?m)^(?:async )?(?:def|class) ([A-Za-z_]\w*)", text or ""):
            found.setdefault(name, []).append(mod)  # type: ignore[arg-type]
    return found


def _with_imports(setup: list[str], probe: str, defs: dict[str, list[str]]) -> list[str] | None:
    """The setup with an import for each name it needs (None: a name no module defines)."""
    imports = []
    for name in _free_names([*setup, probe]):
        mods = defs.get(name)
        if not mods:
            return None
        imports.append(f"from {mods[0]} import {name}")
    return [*imports, *setup]


def extract_checks(
    issue: str, files: Iterable[str] = (), read: Callable[[str], str | None] = lambda p: None
) -> list[Check]:
    """The checks an issue's text states (at most MAX_CHECKS, the first first); `files` and `read`
    find the imports a prose report leaves out."""
    issue = issue[:MAX_ISSUE_CHARS]
    said = without_tracebacks(issue)  # what the user wrote, not what Python printed
    found: list[tuple[list[str], str, int, bool | str]] = []  # setup, probe, where it ends, shown raising
    arrow_values: dict[str, str] = {}
    blocks = [(m.group(1), m.end()) for m in BLOCK.finditer(issue)] + unfenced_blocks(issue)
    for block, end in sorted(blocks, key=lambda b: b[1]):
        setup, probe, raised = _session(block)
        if probe:
            found.append((setup, probe, end, raised))
    for m in ARROW.finditer(said):
        value = _value(m)
        if value is not None and (probe := _expression(m.group("call") or m.group("call2"))):
            arrow_values.setdefault(probe, value)
            found.append(([], probe, m.end(), False))
    for pattern in (TICKED_CALL, BARE_CALL):
        for m in pattern.finditer(said):
            if probe := _expression(m.group("call")):
                found.append(([], probe, m.end(), bool(CRASHES.match(said, m.end()))))
    defs: dict[str, list[str]] | None = None
    modules = {m for f in files if (m := module_of(f))}
    modules |= {m.rsplit(".", i)[0] for m in modules for i in range(1, m.count(".") + 1)}
    checks: list[Check] = []
    for setup, probe, end, raised in found[:MAX_PROBES]:
        expect = Expect("value", arrow_values[probe]) if probe in arrow_values else _expected(said, end)
        if raised == "crash":
            expect = None
        if expect is None:
            if not raised:
                continue
            expect = Expect("no_error")
        defs = definitions(files, read) if defs is None else defs
        if _free_names([*setup, probe]):
            full = _with_imports(setup, probe, defs)
            if full is None:
                continue
            setup = full
        check = Check(tuple(setup), probe, expect)
        if safe(check, modules, defs) and check not in checks and all(c.probe != probe for c in checks):
            checks.append(check)
    # `f()` from a title ("f() gives the wrong answer") says nothing where `f(2)` is checked too
    bare = [c for c in checks if NO_ARGS.fullmatch(c.probe)]
    called = set(probed_names([c for c in checks if c not in bare]))
    return [c for c in checks if not (c in bare and c.probe[:-2].rsplit(".", 1)[-1] in called)][:MAX_CHECKS]


def probed_names(checks: Iterable[Check]) -> list[str]:
    """The functions and classes the checks call (where to look for the bug first)."""
    names: list[str] = []
    for check in checks:
        try:
            tree = ast.parse(check.probe, mode="eval")
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                names.append(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return [n for n in dict.fromkeys(names) if n]


__all__ = [
    "Check",
    "Expect",
    "definitions",
    "extract_checks",
    "module_of",
    "probed_names",
    "unfenced_blocks",
    "without_tracebacks",
]
