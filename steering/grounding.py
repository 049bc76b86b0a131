"""Grounded tool values: the workspace is the grammar.

The tool grammar (tool_grammar.py) asks this module what a value may be, token by token:
- a `path` is one of the workspace's files (tracked and untracked, .gitignore honoured; directories
  too where the tool takes one); `create` may also name a new file in an existing directory. Only
  relative paths inside the workspace are decodable (the permission layer stays the authority);
- `str_replace`'s `old_str` is a run of whole lines of the named file's current text (it starts at
  a line's start or after its indentation, and ends at a line's end), and may close only where it
  occurs exactly once;
- what may be edited at all (edit_scope.py): str_replace and insert take no test file, and old_str
  copies no docstring line, unless the request names them;
- `outline`'s `symbol` is a name the repository defines (tree-sitter definitions, as `outline`
  reads them), bare or qualified (`Class.method`).

Values are written as the chat format renders them: the value's text, then `\\n</parameter>`, so a
value is complete once its text plus that newline is written. Token-level rule: a token is allowed
iff its bytes extend the value to a prefix of some candidate (a byte-level BPE token may span a
line end, e.g. `:\\n`). Where the value is already determined (one candidate path left, one place in
the file matched) its rest is placed as the tokenizer itself would write it, one token at a time,
and those tokens cost no forward (the grammar's `forced`).

A copy prior: among a path's or symbol's candidates, those the conversation already names (the
issue, earlier calls and tool outputs) are `preferred()`; the grammar adds the `copy_bias` setting
to their logits where the model chooses. A small model copies names from its context poorly (the
embedded one wrote `OFounted_total` for the issue's `discounted_total` and looked up another
function); a model that means another candidate still takes it (the bonus is a prior, not a ban).

Nodes are built lazily and cached with their transitions; a file's index is kept while its bytes
are unchanged and rebuilt when they change, so the grammar follows the agent's own edits.
"""

from __future__ import annotations

from clover.core.environment_protocol import Environment
from clover.steering.answer_spans import AnswerSpans
from clover.steering.edit_scope import asks_for_docstrings, docstring_lines, may_edit
from clover.steering.mentions import Mentions
from clover.steering.value_nodes import CLOSE, CandidateSet, FileIndex, Node, Vocab

MAX_SYMBOL_FILES = 2000
MAX_INDEX_BYTES = 4 * 1024 * 1024  # larger files are not grounded (old_str stays free text)


# --------------------------------------------------------------------------- the workspace

PATH_KINDS = {
    ("view", "path"): "any",
    ("outline", "path"): "any",
    ("grep", "path"): "any",
    ("glob", "path"): "dir",
    ("str_replace", "path"): "edit",
    ("insert", "path"): "edit",
    ("create", "path"): "new",
}
OLD_STR = ("str_replace", "old_str")
SYMBOL = ("outline", "symbol")
LINE_BOUNDED = {("view", "view_range"), ("insert", "insert_line")}
NEEDS_PATH = {OLD_STR, *LINE_BOUNDED}  # decoded after the call's path, which grounds them


class Workspace:
    """What a turn's values may be, read through the agent's Environment. One per agent; the file
    list is read again every turn, file indexes and symbols are kept while the bytes match."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self._files: dict[str, tuple[bytes, FileIndex]] = {}
        self._symbols: dict[str, tuple[bytes, list[str]]] = {}

    def listing(self) -> tuple[list[str], list[str]]:
        """(files, directories) relative to the root; the root itself is '.'."""
        try:  # the Environment protocol's listing: tracked and untracked, .gitignore honoured
            files = list(self.env.list_files(self.env.root))
        except (OSError, ValueError):
            files = []
        dirs = {"."}
        for f in files:
            parts = f.split("/")[:-1]
            dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        return files, sorted(dirs)

    def read(self, rel: str) -> bytes | None:
        import os

        try:
            data = self.env.read_file(os.path.join(self.env.root, rel))
        except (OSError, ValueError):
            return None
        return data if len(data) <= MAX_INDEX_BYTES and b"\0" not in data[:8192] else None

    def file_index(self, vocab: Vocab, rel: str, docstrings: bool = True) -> FileIndex | None:
        """`rel`'s index for old_str; without `docstrings`, a Python file's docstring lines are left out."""
        data = self.read(rel)
        if data is None:
            return None
        key = rel if docstrings else f"{rel}\0no-docstrings"
        cached = self._files.get(key)
        if cached is None or cached[0] != data or cached[1].vocab is not vocab:
            protected = (
                frozenset()
                if docstrings or not rel.endswith(".py")
                else docstring_lines(data.decode("utf-8", "surrogateescape"))
            )
            cached = self._files[key] = (data, FileIndex(vocab, data, protected))
        return cached[1]

    def symbols(self, files: list[str]) -> list[str]:
        """Names the repository defines: bare and qualified by their enclosing definitions."""
        from clover.tools.outline import _short_name, language_of, symbols

        names: set[str] = set()
        for rel in [f for f in files if language_of(f)][:MAX_SYMBOL_FILES]:
            data = self.read(rel)
            if data is None:
                continue
            cached = self._symbols.get(rel)
            if cached is None or cached[0] != data:
                found = []
                try:
                    for s in symbols(data, language_of(rel)):
                        short = _short_name(s.name)
                        found += [short, ".".join([*(_short_name(p) for p in s.parents), short])]
                except Exception:  # a grammar that fails on this file: no names from it
                    found = []
                cached = self._symbols[rel] = (data, found)
            names.update(n for n in cached[1] if n.isprintable())
        return sorted(names)


class Grounding:
    """One turn's grounded values, for the tool grammar: `node(tool, param, path)` is the root node
    of a grounded value (None: free text), `lines(path)` the named file's line count. `context`:
    the conversation so far, whose mentions the copy prior prefers; `quotable`: the text the answer's
    code spans may copy (answer_spans.quotable_text); `request`: what the user asked (edit_scope.py:
    the test files and docstrings it names may be edited)."""

    def __init__(
        self, workspace: Workspace, vocab: Vocab, context: str = "", quotable: str = "", request: str = ""
    ) -> None:
        self.ws, self.vocab, self.quotable, self.request = workspace, vocab, quotable, request
        self.mentions = Mentions(context) if context else None
        self._spans: AnswerSpans | None = None
        self.files, self.dirs = workspace.listing()
        self._dir_set = set(self.dirs)
        self._sets: dict[str, CandidateSet] = {}
        self._roots: dict[tuple[str, str, str], Node | None] = {}
        self._lines: dict[str, int | None] = {}

    def answer_spans(self) -> AnswerSpans:
        """What the answer's code spans copy (answer_spans.py): `quotable`, the workspace's files and
        defined names preferred."""
        if self._spans is None:
            self._spans = AnswerSpans(
                self.vocab, self.quotable, lambda: [*self.files, *self.ws.symbols(self.files)]
            )
        return self._spans

    def _set(self, kind: str) -> CandidateSet:
        if kind not in self._sets:
            subdirs = [d for d in self.dirs if d != "."]
            if kind == "file":
                s = CandidateSet(self.vocab, self.files)
            elif kind == "edit":
                s = CandidateSet(self.vocab, [f for f in self.files if may_edit(self.request, f)])
            elif kind == "dir":
                s = CandidateSet(self.vocab, [*self.dirs, *(d + "/" for d in subdirs)])
            elif kind == "any":
                s = CandidateSet(self.vocab, [*self.files, *self.dirs, *(d + "/" for d in subdirs)])
            elif kind == "new":
                s = CandidateSet(self.vocab, self.files, new_dirs=subdirs)
            else:  # symbols
                s = CandidateSet(self.vocab, self.ws.symbols(self.files))
            if self.mentions is not None:
                s.name(self.mentions)
            self._sets[kind] = s
        return self._sets[kind]

    def needs_path(self, tool: str, param: str) -> bool:
        return (tool, param) in NEEDS_PATH and (tool, "path") in PATH_KINDS

    def node(self, tool: str, param: str, path: str) -> Node | None:
        if (tool, param, path) not in self._roots:  # the grammar asks again every round
            self._roots[(tool, param, path)] = self._node(tool, param, path)
        return self._roots[(tool, param, path)]

    def _node(self, tool: str, param: str, path: str) -> Node | None:
        key = (tool, param)
        root: Node | None = None
        if key in PATH_KINDS:
            root = self._set(PATH_KINDS[key]).root()
        elif key == SYMBOL:
            root = self._set("symbol").root()
        elif key == OLD_STR and path:
            index = self.ws.file_index(self.vocab, path, docstrings=asks_for_docstrings(self.request))
            # an empty file has no line to replace: old_str closes at once and str_replace says
            # to use insert or create (free text here was a garbage old_str that could not match)
            root = index.root if index is not None else None
        if root is not None and key != OLD_STR and root.options() == [CLOSE]:
            return None  # nothing to choose from (an empty workspace): leave the value free
        return root

    def is_dir(self, path: str) -> bool:
        return path.rstrip("/") in self._dir_set  # "pkg/" and "./" are written forms too

    def lines(self, path: str) -> int | None:
        if path not in self._lines:
            index = self.ws.file_index(self.vocab, path) if path else None
            self._lines[path] = index.lines if index is not None else None
        return self._lines[path]


__all__ = ["LINE_BOUNDED", "PATH_KINDS", "Grounding", "Workspace"]
