"""Rewrite a command line, for analysis only, into a form bashlex reads and that keeps what bash
would do visible: `[[ ]]` as `[ ]`, `time` dropped, quoted here-document delimiters renamed (their
bodies are literal), arithmetic on plain numbers as `0`/`true` and on anything else as the marker
command tools/safety/shelljudge.py calls opaque."""

from __future__ import annotations

import re

from clover.tools.safety.shelljudge import ARITH_MARK, arith_safe


def prepare(text: str) -> str:
    """Rewrite forms bashlex lacks into equivalents it reads (analysis only): `[[ ]]`, `time`,
    quoted here-doc delimiters (renamed `QUOTED_MARK...`: their bodies are literal), arithmetic on
    plain numbers."""
    text = _mark_quoted_heredocs(text)
    text = _mark_arithmetic(text)
    text = re.sub(r"\$\(\(([\d\s+\-*/%<>=!&|^~?:]*)\)\)", "0", text)
    text = re.sub(r"(?<![^\s;&|(])\[\[(?=\s)", "[", text)
    text = re.sub(r"(?<=\s)\]\](?=$|[\s;&|)])", "]", text)
    return re.sub(r"(^|[;&|(]\s*|\n\s*)time\s+(?:-p\s+)?", r"\1", text)


_ARITH_CMD = re.compile(r"(?<![$<>\w])\(\(((?:[^()]|\([^()]*\))*)\)\)")
_DOUBLE_TEST = re.compile(r"\[\[(\s.*?\s)\]\]")
_ARITH_TEST = re.compile(r"\s-(?:eq|ne|lt|le|gt|ge)\s")


def _mark_arithmetic(text: str) -> str:
    """`(( expr ))` and `[[ a -eq b ]]` evaluate arithmetic, which bashlex does not model: on plain
    numbers they become `true`; on anything else the marker command shelljudge calls opaque."""

    def command(m: re.Match[str]) -> str:
        return "true" if arith_safe(m.group(1)) else ARITH_MARK

    def test(m: re.Match[str]) -> str:
        inner = m.group(1)
        if not _ARITH_TEST.search(inner):
            return m.group(0)
        words = [w.strip("\"'") for w in inner.split()]
        operands = [w for w in words if w not in ("!", "&&", "||", "(", ")") and not w.startswith("-")]
        if all(arith_safe(w) for w in operands):
            return m.group(0)
        return f"{ARITH_MARK}{inner}]"

    return _DOUBLE_TEST.sub(test, _ARITH_CMD.sub(command, text))


_HEREDOC_OP = re.compile(r"(?<!<)<<(-?)[ \t]*(?:(['\"])([\w.-]+)\2|\\([\w.-]+)|([\w.-]+))")
QUOTED_MARK = "CLOVERQUOTED"


def _mark_quoted_heredocs(text: str) -> str:
    """`<<'EOF'` ... `EOF` -> `<<CLOVERQUOTED0EOF` ... `CLOVERQUOTED0EOF` (bashlex cannot read quoted
    delimiters, and a quoted body is literal so its `$(...)` must not count). Bodies are skipped while
    looking for operators; a delimiter that never ends leaves the rest as it was (bashlex fails)."""
    lines, out, pending = text.split("\n"), [], []
    for line in lines:
        if pending:
            name, new, dash = pending[0]
            if (line.lstrip("\t") if dash else line) == name:
                out.append(line.replace(name, new, 1))
                pending.pop(0)
            else:
                out.append(line)
            continue

        def mark(m: re.Match[str]) -> str:
            quoted = m.group(3) or m.group(4)
            name = quoted or m.group(5)
            new = f"{QUOTED_MARK}{len(out)}{name}" if quoted else name
            pending.append((name, new, bool(m.group(1))))
            return f"<<{m.group(1)}{new}"

        out.append(_HEREDOC_OP.sub(mark, line))
    return "\n".join(out)
