"""One-site repairs of a code snippet: the edits a small bug fix makes (the embedded model's new_str).

The embedded model finds the faulty line far more often than it writes the fixed one: asked for
new_str it copies old_str back or garbles the changed token. `repairs(old, ...)` lists what old_str
could become with one small change of the kinds one-line bugs take (the families of one-line bugs):
- an operator or comparison swapped (`+`/`-`, `<`/`<=`, `==`/`!=`, `and`/`or`, `in`/`not in`);
- a constant off by one, scaled by ten, or replaced by a number the issue states;
- an end off by one (`n` -> `n + 1` inside brackets or after a comparison; a `+ 1` dropped);
- a builtin or method for its counterpart (`min`/`max`, `lower`/`upper`, ...) or a name for another
  the snippet, the issue or (after a dot) the file uses: a wrong attribute or variable;
- two arguments swapped, a condition inverted (`not` added or dropped), a `return` added;
- a word inside a string literal for a close word of the issue's (`Helo` -> `Hello`), or a literal
  for one the issue quotes.
The model then chooses among them by likelihood (edit_choice.py); it still finds the line.
A lexer by regular expression keeps this usable on snippets that do not parse on their own.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from functools import lru_cache

from clover.tools.pynames import newly_undefined
from clover.tools.pysyntax import parse_error

TOKEN = re.compile(
    r"""(?P<str>[rRbBfFuU]{0,2}(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'))"""
    r"|(?P<num>\d+(?:\.\d+)?)"
    r"|(?P<name>[A-Za-z_]\w*)"
    r"|(?P<op>\*\*|//|==|!=|<=|>=|\+=|-=|\*=|/=|->|[-+*/%<>=()\[\]{},:.])"
    r"|(?P<comment>\#[^\n]*)"
)
OP_SWAPS = {
    "+": ["-", "*"],
    "-": ["+"],
    "*": ["/", "+"],
    "/": ["*", "//"],
    "//": ["/"],
    "%": ["//"],
    "<": ["<=", ">"],
    "<=": ["<", ">="],
    ">": [">=", "<"],
    ">=": [">", "<="],
    "==": ["!="],
    "!=": ["=="],
    "+=": ["-="],
    "-=": ["+="],
    "*=": ["/="],
    "/=": ["*="],
}
PAIRS = [
    ("min", "max"),
    ("any", "all"),
    ("True", "False"),
    ("and", "or"),
    ("floor", "ceil"),
    ("lower", "upper"),
    ("startswith", "endswith"),
    ("lstrip", "rstrip"),
    ("append", "extend"),
    ("keys", "values"),
    ("sorted", "reversed"),
    ("first", "last"),
    ("left", "right"),
    ("start", "end"),
    ("width", "height"),
    ("min_value", "max_value"),
    ("break", "continue"),
    ("remove", "discard"),
    ("index", "find"),
]
# a wrong builtin: one of these called where another was meant (one argument each)
BUILTINS = (
    "len",
    "sum",
    "min",
    "max",
    "abs",
    "round",
    "int",
    "float",
    "str",
    "sorted",
    "list",
    "set",
    "any",
    "all",
)
COUNTERPART = {a: b for a, b in PAIRS} | {b: a for a, b in PAIRS}
KEYWORDS = frozenset(keyword.kwlist)
CONDITION_HEADS = frozenset({"if", "elif", "while", "return", "assert"})
WORD = re.compile(r"[A-Za-z]{3,}")
QUOTED = re.compile(r"""["'`]([^"'`\n]{1,40})["'`]""")
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
IDENT = re.compile(r"[A-Za-z_]\w*")
KEYWORD_ARG = re.compile(r"\s*\w+\s*=(?!=)")
MAX_CANDIDATES = 240


@dataclass(frozen=True)
class Tok:
    kind: str
    text: str
    start: int
    end: int


def lex(text: str, offset: int = 0) -> list[Tok]:
    """Tokens of `text`; an f-string's replacement fields follow it as code tokens of their own."""
    out = []
    for m in TOKEN.finditer(text):
        kind = m.lastgroup or ""
        if kind == "comment":
            continue
        out.append(Tok(kind, m.group(), offset + m.start(), offset + m.end()))
        if kind == "str" and "f" in m.group()[:2].lower():
            for field in re.finditer(r"(?<!\{)\{([^{}]+)\}", m.group()):
                out += lex(field.group(1), offset + m.start() + field.start(1))
    return out


def _edits_distance_le(a: str, b: str, limit: int) -> bool:
    """Levenshtein distance <= limit (small words only, so the plain table is fine)."""
    if abs(len(a) - len(b)) > limit:
        return False
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1] <= limit


def _closing(toks: list[Tok], i: int) -> int | None:
    """Index of the bracket closing toks[i] (an opening one), or None."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j].text
        if t in pairs:
            depth += 1
        elif t in pairs.values():
            depth -= 1
            if depth == 0:
                return j
    return None


def _arguments(toks: list[Tok], i: int, j: int) -> list[tuple[int, int]]:
    """Top-level argument spans (char offsets) between brackets toks[i] and toks[j]."""
    spans, depth, first = [], 0, i + 1
    for k in range(i + 1, j):
        t = toks[k].text
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        elif t == "," and depth == 0:
            if k > first:
                spans.append((toks[first].start, toks[k - 1].end))
            first = k + 1
    if j > first:
        spans.append((toks[first].start, toks[j - 1].end))
    return spans


@lru_cache(maxsize=4)  # edit_choice asks once per line of the same file
def _code_names(file_text: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(names, called names, attribute names) of the file's code: a docstring's words are not
    variables, and what the code calls or defines as a function or class is not swapped for a
    variable (nor the other way round)."""
    code = lex(file_text)
    pairs = list(zip(code, code[1:], strict=False))
    names = frozenset(t.text for t in code if t.kind == "name" and len(t.text) > 1) - KEYWORDS
    called = {a.text for a, b in pairs if a.kind == "name" and b.text == "("}
    called |= {b.text for a, b in pairs if a.text in ("def", "class")}
    attrs = frozenset(b.text for a, b in pairs if a.text == "." and b.kind == "name")
    return names, frozenset(called), attrs


def _site_edits(
    text: str, toks: list[Tok], issue: str, file_text: str, context: str
) -> list[tuple[int, int, str]]:
    """(start, end, replacement) for every one-site repair of `text`. Attribute names come from the
    file and the conversation (`context`: files the agent viewed name a class's fields)."""
    edits: list[tuple[int, int, str]] = []
    issue_words = {w for w in WORD.findall(issue)}
    issue_numbers = list(dict.fromkeys(NUMBER.findall(issue)))[:12]
    snippet_names = {t.text for t in toks if t.kind == "name" and t.text not in KEYWORDS}
    file_names, called, attrs = _code_names(file_text)
    issue_names = set(IDENT.findall(issue)) & file_names
    attrs = attrs | set(
        re.findall(r"\bself\.([A-Za-z_]\w*)\s*=", context)
    )  # fields of classes the agent viewed
    depth = 0
    for i, t in enumerate(toks):
        prev = toks[i - 1] if i else None
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if t.text in "([{":
            depth += 1
        elif t.text in ")]}":
            depth -= 1
        if t.kind == "op":
            for alt in OP_SWAPS.get(t.text, []):
                edits.append((t.start, t.end, alt))
            if t.text in "+-" and nxt is not None and nxt.text == "1" and prev is not None:  # drop a `+ 1`
                edits.append((prev.end, nxt.end, ""))
            if t.text == "-" and (prev is None or prev.kind == "op" and prev.text not in ")]}"):
                edits.append((t.start, t.end, ""))  # a sign
        elif t.kind == "name":
            if t.text in COUNTERPART:
                edits.append((t.start, t.end, COUNTERPART[t.text]))
            if (
                t.text in BUILTINS
                and nxt is not None
                and nxt.text == "("
                and (prev is None or prev.text != ".")
                and _single_argument(toks, i + 1)
            ):
                edits += [(t.start, t.end, b) for b in BUILTINS if b != t.text]
            if t.text == "in" and not (prev and prev.text == "not") and not _loop_in(toks, i):
                edits.append((t.start, t.end, "not in"))
            if t.text == "not":
                end = nxt.start if nxt is not None else t.end
                edits.append((t.start, end, ""))  # drop a negation (`not in` -> `in` too)
            if t.text == "is" and not (nxt and nxt.text == "not"):
                edits.append((t.start, t.end, "is not"))
            if t.text in CONDITION_HEADS and nxt is not None and nxt.text != "not":
                edits.append((nxt.start, nxt.start, "not "))
            if t.text not in KEYWORDS:
                # another field the code uses, or a name the issue and the file share (a name the
                # snippet already holds is no fix: the model copies those too readily)
                pool = attrs if prev is not None and prev.text == "." else issue_names - snippet_names
                is_call = nxt is not None and nxt.text == "("
                pool = {n for n in pool if (n in called) == is_call}
                for alt in sorted(pool - {t.text} - KEYWORDS):
                    edits.append((t.start, t.end, alt))
                if len(t.text) >= 3:  # a misspelt name: the close one the file uses
                    near = [n for n in file_names - pool if n != t.text and _edits_distance_le(n, t.text, 2)]
                    edits += [(t.start, t.end, n) for n in sorted(near)]
        elif t.kind == "num":
            edits.extend(_number_edits(t, issue_numbers))
        elif t.kind == "str":
            edits.extend(_string_edits(t, issue_words, issue))
        # an end one short or one long: `x` -> `x + 1` before a closing bracket, comma or colon
        # inside brackets, or at the end of a comparison's right side
        if t.kind in ("name", "num") or t.text in ")]":
            closes = nxt is not None and nxt.text in (")", "]", ",", ":") and depth > 0
            compared = (
                prev is not None and prev.text in ("<", "<=", ">", ">=") and (nxt is None or nxt.text == ":")
            )
            returned = (
                depth == 0
                and t.kind != "op"
                and _ends_line(text, t)
                and _line_of(text, t).lstrip().startswith("return ")
            )
            if (closes or compared or returned) and t.text not in KEYWORDS:
                edits += [(t.end, t.end, " + 1"), (t.end, t.end, " - 1")]
            if (
                t.kind == "name"
                and t.text not in KEYWORDS
                and nxt is not None
                and nxt.text in ("*", "/", "//")
            ):
                edits += [(t.start, t.end, f"({t.text} - 1)"), (t.start, t.end, f"({t.text} + 1)")]
        if t.text == "(" and prev is not None and prev.kind == "name":
            j = _closing(toks, i)
            args = _arguments(toks, i, j) if j is not None else []
            if 2 <= len(args) <= 3 and not any(KEYWORD_ARG.match(text[a:b]) for a, b in args):
                for x in range(len(args)):
                    for y in range(x + 1, len(args)):
                        edits.append(_swap(text, args[x], args[y]))
    for line_start, line in _lines(text):
        body = line.strip()
        first = body.split(" ", 1)[0].rstrip(":(")
        if (
            body
            and first not in KEYWORDS
            and not re.search(r"(?<![=!<>])=(?!=)", body)
            and not body.endswith(":")
        ):
            at = line_start + len(line) - len(line.lstrip())
            edits.append((at, at, "return "))
        assigned = re.match(r"\s*[A-Za-z_]\w*\s*=(?!=)\s*", line)
        if assigned:  # a result computed, then dropped
            at = line_start + len(line) - len(line.lstrip())
            edits.append((at, line_start + assigned.end(), "return "))
    return edits


def _single_argument(toks: list[Tok], i: int) -> bool:
    """Does the call whose `(` is toks[i] take exactly one argument?"""
    j = _closing(toks, i)
    return j is not None and len(_arguments(toks, i, j)) == 1


def _loop_in(toks: list[Tok], i: int) -> bool:
    """Is toks[i] (`in`) the `in` of a `for` (its target is names, dots, commas and brackets only)?"""
    for j in range(i - 1, -1, -1):
        t = toks[j]
        if t.text == "for":
            return True
        if not (t.kind == "name" and t.text not in KEYWORDS or t.text in ",.()[]"):
            return False
    return False


def _line_of(text: str, t: Tok) -> str:
    return text[text.rfind("\n", 0, t.start) + 1 : _line_end(text, t)]


def _line_end(text: str, t: Tok) -> int:
    end = text.find("\n", t.end)
    return len(text) if end < 0 else end


def _ends_line(text: str, t: Tok) -> bool:
    return not text[t.end : _line_end(text, t)].strip()


def _lines(text: str) -> list[tuple[int, str]]:
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, line))
        pos += len(line) + 1
    return out


def _swap(text: str, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int, str]:
    return a[0], b[1], text[b[0] : b[1]] + text[a[1] : b[0]] + text[a[0] : a[1]]


def _number_edits(t: Tok, issue_numbers: list[str]) -> list[tuple[int, int, str]]:
    out = []
    if "." in t.text:
        value = float(t.text)
        alts = [repr(value * 10), repr(value / 10)]
    else:
        n = int(t.text)
        alts = [
            str(n + 1),
            str(n - 1) if n > 0 else None,
            str(n * 10),
            str(n // 10) if n % 10 == 0 and n else None,
        ]
    alts += [x.lstrip("-") for x in issue_numbers]
    for alt in dict.fromkeys(a for a in alts if a is not None and a != t.text):
        out.append((t.start, t.end, alt))
    return out


def _string_edits(t: Tok, issue_words: set[str], issue: str) -> list[tuple[int, int, str]]:
    out = []
    body_at = t.text.index(t.text[-1]) + 1  # after the prefix and the opening quote
    body = t.text[body_at:-1]
    for m in WORD.finditer(body):
        word = m.group()
        for w in sorted(issue_words):
            if w != word and _edits_distance_le(word.lower(), w.lower(), 2):
                out.append((t.start + body_at + m.start(), t.start + body_at + m.end(), w))
    for q in dict.fromkeys(QUOTED.findall(issue)):
        if q != body and "{" not in body:
            out.append((t.start + body_at, t.end - 1, q))
    return out


def _parses(text: str) -> bool:
    return parse_error(text, "<repair>") is None


@lru_cache(maxsize=4)  # edit_choice asks once per line of the same file
def _file_parses(text: str) -> bool:
    return _parses(text)


def repairs(
    old: str, *, issue: str = "", file_text: str = "", path: str = "", context: str = ""
) -> list[str]:
    """The one-site repairs of `old` (distinct, never `old` itself), cheapest kinds first. In a
    Python file that parses, a repair that would break it, or make it use a name it does not define
    or import (the edit tools refuse both), is left out."""
    toks = lex(old)
    seen: dict[str, None] = {}
    for start, end, new in _site_edits(old, toks, issue, file_text, context):
        cand = old[:start] + new + old[end:]
        if cand != old and cand.strip():
            seen.setdefault(cand)
    out = list(seen)
    if path.endswith((".py", ".pyi")) and file_text and old in file_text and _file_parses(file_text):
        at = file_text.index(old)
        out = [c for c in out if _parses(file_text[:at] + c + file_text[at + len(old) :])]
        known = set(IDENT.findall(old))  # a repair that brings no new identifier cannot add an undefined one
        out = [
            c
            for c in out
            if set(IDENT.findall(c)) <= known
            or not newly_undefined(path, file_text, file_text[:at] + c + file_text[at + len(old) :])
        ]
    return out[:MAX_CANDIDATES]


__all__ = ["repairs"]
