"""Bash word-level lexing for permission checks: quote removal as bash does it, brace expansion,
the bodies of the substitutions inside a piece of text and of a here-document, and whether a word
as written expands."""

from __future__ import annotations

import re

_ANSI_C = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def unquote(raw: str) -> str | None:
    """Bash quote removal of one word as written (`'it'\\''s'` -> `it's`, `$'r\\x6d'` -> `rm`,
    `"a\\$b"` -> `a$b`); expansions are left as text. None when a quote is left open."""
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch == "\\":
            if i + 1 < n and raw[i + 1] != "\n":
                out.append(raw[i + 1])
            i += 2
        elif ch == "'":
            end = raw.find("'", i + 1)
            if end == -1:
                return None
            out.append(raw[i + 1 : end])
            i = end + 1
        elif ch == "$" and raw.startswith("'", i + 1):
            text, i = _ansi_c(raw, i + 2)
            if text is None:
                return None
            out.append(text)
        elif ch == '"':
            i += 1
            while i < n and raw[i] != '"':
                if raw[i] == "\\" and i + 1 < n and raw[i + 1] in '$`"\\\n':
                    if raw[i + 1] != "\n":
                        out.append(raw[i + 1])
                    i += 2
                else:
                    out.append(raw[i])
                    i += 1
            if i >= n:
                return None
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _ansi_c(raw: str, i: int) -> tuple[str | None, int]:
    out: list[str] = []
    while i < len(raw):
        ch = raw[i]
        if ch == "'":
            return "".join(out), i + 1
        if ch == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            m = re.match(
                r"x([0-9A-Fa-f]{1,2})|([0-7]{1,3})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})", raw[i + 1 :]
            )
            if m:
                hexa = m.group(1) or m.group(3) or m.group(4)
                code = int(hexa, 16) if hexa else int(m.group(2), 8)
                out.append(chr(code) if code < 0x110000 else "?")
                i += 1 + m.end()
                continue
            out.append(_ANSI_C.get(nxt, "\\" + nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return None, i


_MAX_BRACE = 64


def expand_braces(word: str) -> list[str]:
    """Bash brace expansion of one word (`-r{f,}` -> `-rf`, `-r`; `{1..3}`); at most 64 results."""
    out = _expand(word)
    return out[:_MAX_BRACE] if out else [word]


def _expand(word: str) -> list[str]:
    start = word.find("{")
    while start != -1:
        depth, commas, end = 0, [], -1
        for i in range(start, len(word)):
            ch = word[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    end = i
                    break
            elif ch == "," and depth == 1:
                commas.append(i)
        if end == -1:
            return [word]
        inner = word[start + 1 : end]
        pre, post = word[:start], word[end + 1 :]
        if commas:
            cuts = [start, *commas, end]
            options = [word[a + 1 : b] for a, b in zip(cuts, cuts[1:], strict=False)]
        else:
            options = _sequence(inner)
        if options is not None:
            results: list[str] = []
            for opt in options:
                for tail in _expand(pre + opt + post) if len(results) < _MAX_BRACE else []:
                    results.append(tail)
            return results
        start = word.find("{", start + 1)
    return [word]


def _sequence(inner: str) -> list[str] | None:
    m = re.fullmatch(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?|([A-Za-z])\.\.([A-Za-z])", inner)
    if not m:
        return None
    if m.group(4):
        a, b = ord(m.group(4)), ord(m.group(5))
        step = 1 if b >= a else -1
        return [chr(c) for c in range(a, b + step, step)][:_MAX_BRACE]
    a, b = int(m.group(1)), int(m.group(2))
    step = abs(int(m.group(3) or 1)) or 1
    step = step if b >= a else -step
    return [str(n) for n in range(a, b + (1 if step > 0 else -1), step)][:_MAX_BRACE]


def substitutions(text: str, quotes: bool = False) -> tuple[list[str], bool]:
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
            found.append(text[i + 1 : end])
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
            body = text[i + 2 : j]
            if not (ch == "$" and body.startswith("(")):  # `$((...))` arithmetic: scan inside it
                found.append(body)
                i = j + 1
                continue
            i += 3
            continue
        i += 1
    return found, True


def heredoc_body(value: str, delimiter: str) -> str:
    """A here-document's text as bashlex gives it, without its closing delimiter line."""
    lines = value.split("\n")
    delim = delimiter.strip("'\"")
    if lines and lines[-1].strip() == delim:
        lines = lines[:-1]
    return "\n".join(lines)


def expands_unquoted(raw: str) -> bool:
    """Whether bash expands this word as written: an unquoted glob character, brace expansion or
    leading `~` (the value is then filenames or $HOME, not the text)."""
    if raw.startswith("~"):
        return True
    plain, i, quote = [], 0, ""
    while i < len(raw):
        ch = raw[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "\\":
            i += 1
        else:
            plain.append(ch)
        i += 1
    text = "".join(plain)
    return bool(re.search(r"[*?]|\[.*\]", text)) or expand_braces(text) != [text]
