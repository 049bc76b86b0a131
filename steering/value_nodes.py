"""Token-level automata for grounded tool values (grounding.py says what each value may be).

`Vocab` is a byte-level BPE vocabulary as bytes, with a trie to find the tokens that spell a prefix.
A `Node` is a state of one value being written: `options()` are the tokens that keep it a prefix
of some candidate (CLOSE where it may end), `forced()` the one token left where the value is
determined, `preferred()` the copy prior's choices. `CandidateSet` serves a set of names (paths,
symbols; a new file's name where allowed), `FileIndex` a file's text (old_str: whole lines, unique
to close). Nodes are built lazily and cached with their transitions.
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from clover.steering.mentions import Mentions

CLOSE = -1  # the value may close here (the grammar's `</parameter>`)
NL = b"\n"
NAME_CHARS = re.compile(rb"[A-Za-z0-9._+@=,-]+")  # a new file's name: ordinary characters only


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet, reversed: the character a byte is written as -> the byte."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs, strict=True)}


class Vocab:
    """A byte-level BPE vocabulary as bytes, with a byte trie to find the tokens that spell a prefix
    of some text. Added (special) tokens are left out: they never appear inside a value."""

    def __init__(self, tokenizer: Any, vocab_size: int) -> None:
        self.tok = tokenizer
        raw = tokenizer._tok  # tokenizers.Tokenizer
        added = set(raw.get_added_tokens_decoder()) if hasattr(raw, "get_added_tokens_decoder") else set()
        dec = _byte_decoder()
        self.bytes: dict[int, bytes] = {}
        self.root: list = [{}, []]  # node: [children by byte, ids ending here]
        for piece, i in raw.get_vocab().items():
            if i in added or i >= vocab_size or not piece or any(c not in dec for c in piece):
                continue
            b = bytes(dec[c] for c in piece)
            self.bytes[i] = b
            node = self.root
            for byte in b:
                node = node[0].setdefault(byte, [{}, []])
            node[1].append(i)
        self.longest = max((len(b) for b in self.bytes.values()), default=1)
        self._runs: dict[bytes, tuple[int, ...]] = {}

    def prefixes(self, text: bytes, start: int = 0) -> list[int]:
        """The tokens whose bytes are a prefix of text[start:]."""
        out, node = [], self.root
        for byte in text[start : start + self.longest]:
            node = node[0].get(byte)
            if node is None:
                break
            out.extend(node[1])
        return out

    def run(self, text: bytes) -> tuple[int, ...]:
        """How the tokenizer writes `text` on its own (the canonical continuation)."""
        if text not in self._runs:
            ids = self.tok.encode(text.decode("utf-8", "replace"))
            ok = b"".join(self.bytes.get(i, b"\0") for i in ids) == text
            self._runs[text] = tuple(ids) if ok else ()  # () : not spellable canonically, stay free
        return self._runs[text]


# --------------------------------------------------------------------------- nodes


class Node:
    """A value written so far. `options()`: the allowed next tokens (CLOSE: the value may end);
    `next(t)`: the node after token t, or None. Both cached."""

    __slots__ = ("_next", "_options", "ban")

    def __init__(self) -> None:
        self._next: dict[int, Node | None] = {}
        self._options: list[int] | None = None
        self.ban: Any = None  # the grammar's cached ban row

    def options(self) -> list[int]:
        if self._options is None:
            # A value no token continues may end (e.g. an old_str that reached the end of the file
            # without becoming unique): banning every token would stall the decoder until the
            # grammar gives up and the call comes out unclosed; the tool reports the problem.
            self._options = self._compute() or [CLOSE]
        return self._options

    def next(self, t: int) -> Node | None:
        if t not in self._next:
            self._next[t] = self._step(t) if t in set(self.options()) else None
        return self._next[t]

    def forced(self) -> int | None:
        opts = self.options()
        return opts[0] if len(opts) == 1 else None

    def preferred(self) -> list[int]:
        """The next tokens toward a candidate the conversation names (the copy prior); [] : none."""
        return []

    def text(self) -> str:
        raise NotImplementedError

    def _compute(self) -> list[int]:
        raise NotImplementedError

    def _step(self, t: int) -> Node | None:
        raise NotImplementedError


class _Run(Node):
    """The determined rest of a value, as the tokenizer writes it; then `after` takes over."""

    __slots__ = ("after", "ids", "prev")

    def __init__(self, prev: Node, ids: tuple[int, ...], after: Any) -> None:
        super().__init__()
        self.prev, self.ids, self.after = prev, ids, after

    def _compute(self) -> list[int]:
        return [self.ids[0]]

    def _step(self, t: int) -> Node | None:
        return _Run(self, self.ids[1:], self.after) if len(self.ids) > 1 else self.after()

    def text(self) -> str:  # only asked of complete values, never of a run in progress
        return self.prev.text()


class SetNode(Node):
    """A value that must be one of a sorted list of candidates (each ending with b"\\n").
    `extra`: for `create`, a new file name in an existing directory is also allowed."""

    __slots__ = ("_preferred", "hi", "lo", "space", "value")

    def __init__(self, space: CandidateSet, value: bytes, lo: int, hi: int) -> None:
        super().__init__()
        self.space, self.value, self.lo, self.hi = space, value, lo, hi
        self._preferred: list[int] | None = None

    def text(self) -> str:
        return self.value.decode("utf-8", "replace").removesuffix("\n")

    def _compute(self) -> list[int]:
        sp, v = self.space, self.value
        if v.endswith(NL):
            return [CLOSE]  # complete (candidates hold no inner newline)
        if self.hi - self.lo == 1 and not sp.new_names:  # one candidate left: its rest is determined
            rest = sp.items[self.lo][len(v) :]
            run = sp.vocab.run(rest)
            if run:
                return [run[0]]
        found: set[int] = set()
        for c in sp.items[self.lo : self.hi]:
            found.update(sp.vocab.prefixes(c, len(v)))
        if sp.new_names and sp.new_name_ok(v, partial=True):  # a new name goes on (or ends)
            found.update(sp.name_tokens)
            if sp.new_name_ok(v + NL, partial=False):
                found.update(sp.newlines)
        return sorted(found)

    def preferred(self) -> list[int]:
        if self._preferred is None:  # the grammar asks every round while the value waits here
            self._preferred = self._compute_preferred()
        return self._preferred

    def _compute_preferred(self) -> list[int]:
        sp, v = self.space, self.value
        if not sp.named or v.endswith(NL):
            return []
        lo = bisect.bisect_left(sp.named, v)
        hi = bisect.bisect_left(sp.named, v + b"\xff\xff\xff\xff")
        found: set[int] = set()
        for c in sp.named[lo:hi]:
            found.update(sp.vocab.prefixes(c, len(v)))
        return sorted(found & set(self.options()))

    def _step(self, t: int) -> Node | None:
        sp, v = self.space, self.value
        if t == CLOSE:
            return None
        if self.hi - self.lo == 1 and not sp.new_names:
            rest = sp.items[self.lo][len(v) :]
            run = sp.vocab.run(rest)
            if run and run[0] == t:
                final = sp.node(v + rest)
                return _Run(self, run[1:], lambda: final) if len(run) > 1 else final
        return sp.node(v + sp.vocab.bytes[t])


class CandidateSet:
    """The values a string parameter may take: sorted candidates, each + b"\\n"."""

    def __init__(self, vocab: Vocab, names: list[str], *, new_dirs: list[str] | None = None) -> None:
        self.vocab = vocab
        self.items = sorted({n.encode("utf-8", "surrogateescape") + NL for n in names if n and "\n" not in n})
        self.new_names = new_dirs is not None  # create: any new name in one of these directories
        self.dirs = {d.encode() for d in new_dirs or []}
        self.name_tokens = [t for t, b in vocab.bytes.items() if NAME_CHARS.fullmatch(b)]
        self.newlines = [t for t, b in vocab.bytes.items() if b == NL]
        self.named: list[bytes] = []  # the candidates the conversation names (see `name`)
        self._nodes: dict[bytes, SetNode | None] = {}

    def name(self, mentioned: Mentions) -> None:
        """Mark the candidates `mentioned` names as preferred (the copy prior)."""
        self.named = [c for c in self.items if mentioned.names(c[:-1].decode("utf-8", "surrogateescape"))]

    def new_name_ok(self, value: bytes, *, partial: bool) -> bool:
        """`value` (maybe ending with the closing newline) is a new name under an existing directory."""
        head, sep, name = value.rpartition(b"/")
        if sep and head not in self.dirs:
            return False
        done = name.endswith(NL)
        name = name.removesuffix(NL)
        if (name and not NAME_CHARS.fullmatch(name)) or (done and name in (b"", b".", b"..")):
            return False
        return partial or done

    def node(self, value: bytes) -> SetNode | None:
        if value not in self._nodes:
            lo = bisect.bisect_left(self.items, value)
            hi = bisect.bisect_left(self.items, value + b"\xff\xff\xff\xff")
            ok = lo < hi or (self.new_names and self.new_name_ok(value, partial=True))
            self._nodes[value] = SetNode(self, value, lo, hi) if ok else None
        return self._nodes[value]

    def root(self) -> SetNode | None:
        return self.node(b"")


class LinesNode(Node):
    """old_str so far: `ends` are where its occurrences end in the file (None: not started)."""

    __slots__ = ("ends", "index", "value")

    def __init__(self, index: FileIndex, value: bytes, ends: tuple[int, ...] | None) -> None:
        super().__init__()
        self.index, self.value, self.ends = index, value, ends

    def text(self) -> str:
        return self.value.decode("utf-8", "surrogateescape").removesuffix("\n")

    def _compute(self) -> list[int]:
        ix, v = self.index, self.value
        if self.ends is None:
            return ix.first_tokens()
        close = [CLOSE] if v.endswith(NL) and len(v) > 1 and ix.unique(v[:-1]) else []
        ends = [e for e in self.ends if ix.allowed(e + 1)]  # the next byte's line may be copied
        if len(self.ends) == 1:  # one place: the rest of its line is determined
            e = self.ends[0]
            if e >= len(ix.text) or not ends:
                return close
            run = ix.line_run(e)
            if run:
                return [*close, run[0]]
        windows = {ix.text[e : e + ix.vocab.longest] for e in ends}
        found: set[int] = set()
        for w in windows:
            found.update(ix.vocab.prefixes(w))
        return [*close, *sorted(found)]

    def _step(self, t: int) -> Node | None:
        ix = self.index
        if t == CLOSE:
            return None
        e = self.ends[0] if self.ends is not None and len(self.ends) == 1 else len(ix.text)
        run = ix.line_run(e) if e < len(ix.text) and ix.allowed(e + 1) else ()
        if run and t == run[0]:  # the line's rest as the tokenizer writes it
            line_end = ix.text.index(NL, e) + 1
            final = LinesNode(ix, self.value + ix.text[e:line_end], (line_end,))
            return _Run(self, run[1:], lambda: final) if len(run) > 1 else final
        b = ix.vocab.bytes[t]
        if self.ends is None:
            ends = tuple(s + len(b) for s in ix.starts if ix.text.startswith(b, s))
        else:
            ends = tuple(e + len(b) for e in self.ends if ix.text.startswith(b, e))
        if ix.protected:  # a value never reaches into a protected line (edit_scope.py: docstrings)
            ends = tuple(e for e in ends if ix.allowed(e))
        return LinesNode(ix, self.value + b, ends) if ends else None


class FileIndex:
    """One version of a file, for old_str: its text (CRLF read as LF, as str_replace matches it,
    with a final newline), where lines start (and where their text starts after the indentation),
    the first tokens that can start a line, and the tokenizer's spelling of each line's rest.
    `protected`: 0-based numbers of lines old_str may not copy (they neither start nor continue it)."""

    def __init__(self, vocab: Vocab, data: bytes, protected: frozenset[int] = frozenset()) -> None:
        text = data.replace(b"\r\n", b"\n")
        self.real = text  # what str_replace searches
        self.text = text if text.endswith(NL) or not text else text + NL
        self.vocab = vocab
        self.protected = protected
        self.line_starts: list[int] = []
        self.starts: list[int] = []  # where each line starts, and where its text does after the indentation
        pos = 0
        for number, line in enumerate(self.text.split(NL)[:-1]):
            self.line_starts.append(pos)
            if number not in protected:
                self.starts.append(pos)
                indent = len(line) - len(line.lstrip(b" \t"))
                if 0 < indent < len(line):
                    self.starts.append(pos + indent)
            pos += len(line) + 1
        self.lines = self.text.count(NL)
        self.root = LinesNode(self, b"", None)
        self._first: list[int] | None = None
        self._runs: dict[int, tuple[int, ...]] = {}

    def first_tokens(self) -> list[int]:
        """The tokens some line starts with (a bisection per token in the sorted line starts)."""
        if self._first is None:
            heads = sorted({self.text[s : s + self.vocab.longest] for s in self.starts})
            found = []
            for t, b in self.vocab.bytes.items():
                i = bisect.bisect_left(heads, b)
                if i < len(heads) and heads[i].startswith(b):
                    found.append(t)
            self._first = sorted(found)
        return self._first

    def line_run(self, e: int) -> tuple[int, ...]:
        """The tokens of the text from `e` to its line's end, newline included."""
        if e not in self._runs:
            end = self.text.index(NL, e) + 1
            self._runs[e] = self.vocab.run(self.text[e:end])
        return self._runs[e]

    def allowed(self, end: int) -> bool:
        """Is the byte before `end` on a line old_str may copy?"""
        return not self.protected or bisect.bisect_right(self.line_starts, end - 1) - 1 not in self.protected

    def unique(self, value: bytes) -> bool:
        first = self.real.find(value)
        return first != -1 and self.real.find(value, first + 1) == -1


__all__ = ["CLOSE", "CandidateSet", "FileIndex", "LinesNode", "Node", "SetNode", "Vocab"]
