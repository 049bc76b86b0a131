"""Text helpers shared by the file tools: byte-exact decoding, line numbering, diffs, paths."""

from __future__ import annotations

import difflib
import os
from typing import Any

from clover.core.environment_protocol import Environment
from clover.core.tool_protocol import ToolResult
from clover.tools.paths import PathError, resolve_path

SNIFF_BYTES = 8192
MAX_LINE_CHARS = 2000  # longer lines are cut when shown


def is_binary(data: bytes) -> bool:
    return b"\x00" in data[:SNIFF_BYTES]


def decode(data: bytes) -> str:
    """Bytes to str so that `encode(decode(b)) == b` for any bytes (invalid UTF-8 survives)."""
    return data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def printable(text: str) -> str:
    """A str safe to show or serialise: escaped invalid bytes become U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


_C_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\v": "\\v",
    "\f": "\\f",
    "\r": "\\r",
    '"': '\\"',
    "\\": "\\\\",
}


def quoted_path(path: str) -> str:
    """A path on one line, as git shows it (core.quotePath off): as it is when every character is
    printable, else in double quotes with C escapes: `"a\\nb.txt"`, a byte that is not UTF-8 (kept
    as a surrogate escape) as `\\377`. A name with a newline cannot fake a line of a report."""
    if path.isprintable() and not path.startswith('"'):
        return path
    out = []
    for ch in path:
        if ch in _C_ESCAPES:
            out.append(_C_ESCAPES[ch])
        elif "\udc80" <= ch <= "\udcff":
            out.append(f"\\{ord(ch) - 0xDC00:03o}")
        elif not ch.isprintable():
            out.append("".join(f"\\{b:03o}" for b in ch.encode("utf-8", "surrogatepass")))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_CONTROL_NAMES = {
    "\x1b": "\\e",
    "\r": "\\r",
    "\b": "\\b",
    "\a": "\\a",
    "\f": "\\f",
    "\v": "\\v",
    "\x7f": "\\x7f",
}
_HIDDEN = {
    0x200B,
    0x200C,
    0x200D,
    0x200E,
    0x200F,
    0x2028,
    0x2029,
    0x2060,
    0xFEFF,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
}


def escape_controls(text: str) -> str:
    """Text a terminal shows as written: control characters other than newline and tab, C1 codes
    and invisible or direction-changing Unicode become escapes (`touch p #\\e[2K\\e[1Gls` cannot
    repaint itself as `ls` in an approval preview)."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in "\n\t" or (
            code >= 0x20 and code != 0x7F and not 0x80 <= code < 0xA0 and code not in _HIDDEN
        ):
            out.append(ch)
        else:
            out.append(_CONTROL_NAMES.get(ch) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"))
    return "".join(out)


def uses_crlf(text: str) -> bool:
    crlf = text.count("\r\n")
    return crlf > 0 and crlf >= text.count("\n") - crlf


def lines_of(text: str) -> list[str]:
    """Lines without their terminators ('\\n' or '\\r\\n'); no empty last line for a final newline."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def numbered(lines: list[str], first: int) -> str:
    """`cat -n` style: right-aligned line number, a tab, the line (very long lines cut)."""
    out = []
    for i, line in enumerate(lines, first):
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f" [... {len(line) - MAX_LINE_CHARS} more characters]"
        out.append(f"{i:6}\t{printable(line)}")
    return "\n".join(out)


def snippet(text: str, first_line: int, last_line: int, context: int = 4) -> str:
    """Numbered lines first_line..last_line (1-based) of `text` with some context around them."""
    lines = lines_of(text)
    lo = max(first_line - context, 1)
    hi = min(last_line + context, len(lines))
    return numbered(lines[lo - 1 : hi], lo)


def unified_diff(old: str, new: str, rel: str, new_file: bool = False) -> str:
    """git's form: a file that did not exist before comes from /dev/null."""
    old_lines = [line + "\n" for line in lines_of(old)]
    new_lines = [line + "\n" for line in lines_of(new)]
    diff = difflib.unified_diff(
        old_lines, new_lines, "/dev/null" if new_file else f"a/{rel}", f"b/{rel}", n=3
    )
    return printable("".join(diff))


def display_path(env: Environment, path: os.PathLike | str) -> str:
    """`path` relative to the workspace root when it lies inside it, else absolute."""
    root = os.path.realpath(env.root)
    path = str(path)
    if path == root:
        return "."
    return os.path.relpath(path, root) if path.startswith(root + os.sep) else path


def resolve(env: Environment, path: Any, write: bool = False) -> str:
    """Workspace-contained absolute path for a tool argument; raises PathError. Reads may also
    reach the environment's readable roots (spilled command output); writes may not."""
    if path is None:
        raise PathError("'path' is required")
    if not isinstance(path, str):
        raise PathError(f"path must be a string, got {type(path).__name__}")
    roots = list(env.allowed_roots)
    if not write:
        roots += env.readable_roots
    return str(resolve_path(env.root, path, roots))


def error(message: str) -> ToolResult:
    return ToolResult(output=message, is_error=True)


def read_text(env: Environment, path: str) -> str:
    """A text file's content, byte-exact; raises ValueError with a clear message otherwise."""
    try:
        data = env.read_file(path)
    except FileNotFoundError:
        raise ValueError(f"{display_path(env, path)}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{display_path(env, path)}: is a directory, not a file") from None
    except OSError as exc:
        raise ValueError(f"{display_path(env, path)}: cannot read: {exc.strerror or exc}") from None
    if is_binary(data):
        raise ValueError(f"{display_path(env, path)}: binary file ({len(data)} bytes); not shown or edited")
    return decode(data)


def arg_int(args: dict[str, Any], name: str, default: int | None = None) -> int | None:
    value = args.get(name, default)
    if value is None or isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise ValueError(f"{name} must be an integer, got {value!r}")


def arg_bool(args: dict[str, Any], name: str) -> bool:
    value = args.get(name, False)
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
