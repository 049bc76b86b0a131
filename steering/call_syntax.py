"""The tool-call syntax as token tries, for the decoder's grammar (tool_grammar.py).

After `<tool_call>` a call is `\\n<function=NAME>\\n`, then `<parameter=P>\\nVALUE</parameter>\\n` for
parameters of that tool (each once), then `</function>\\n</tool_call>`, allowed once every required
parameter is written. The tries hold what may come next at each point; `ways` says how few tokens
close the call through each next token, so a call is only opened, and a parameter only started,
where the token budget still lets it close.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from clover.model.text.chat import CALL_CLOSE, FUNC_CLOSE, FUNC_OPEN, PARAM_CLOSE, PARAM_OPEN
from clover.steering.grounding import Grounding


class TrieNode:
    """A trie over token sequences; `action` marks the end of one alternative."""

    __slots__ = ("action", "ban", "children", "ways")

    def __init__(self) -> None:
        self.children: dict[int, TrieNode] = {}
        self.action: tuple[str, str] | None = None
        self.ban: Tensor | None = None  # the grammar's cache: every token but the children banned
        self.ways: dict[int, int] | None = None  # cached: child -> fewest tokens to close the call


def trie(alternatives: list[tuple[list[int], tuple[str, str]]]) -> TrieNode:
    root = TrieNode()
    for ids, action in alternatives:
        node = root
        for t in ids:
            node = node.children.setdefault(t, TrieNode())
        node.action = action
    return root


class CallSyntax:
    """The tries of one turn's tools. `root`: what follows `<tool_call>` (the function names)."""

    def __init__(self, tokenizer: Any, schemas: dict[str, Any], grounding: Grounding | None = None) -> None:
        self.tok, self.schemas, self.grounding = tokenizer, schemas, grounding
        self.root = trie([(tokenizer.encode(f"\n{FUNC_OPEN}{name}>\n"), ("tool", name)) for name in schemas])
        self._params: dict[tuple[str, frozenset[str], bool], TrieNode] = {}
        self._chains: dict[tuple[int, ...], TrieNode] = {}
        self._closes: dict[tuple[str, frozenset[str]], list[int]] = {}

    def signature(self, tool: str) -> tuple[list[str], list[str]]:
        """(parameter names, required names) of a tool's schema."""
        schema = self.schemas.get(tool)
        schema = schema if isinstance(schema, dict) else {}
        props, required = schema.get("properties"), schema.get("required")
        req = [r for r in (required if isinstance(required, list) else []) if isinstance(r, str)]
        names = list(props) if isinstance(props, dict) else []
        return names + [r for r in req if r not in names], req

    def params(self, tool: str, used: frozenset[str], after_value: bool) -> TrieNode:
        """The trie of what may follow `>\\n` of the name or `</parameter>`: another parameter not
        yet written, or the end of the call once no required one is missing."""
        key = (tool, used, after_value)
        node = self._params.get(key)
        if node is None:
            names, req = self.signature(tool)
            lead = "\n" if after_value else ""
            g = self.grounding  # a value grounded in the call's file comes after its path
            alts = [
                (self.tok.encode(f"{lead}{PARAM_OPEN}{p}>\n"), ("param", p))
                for p in names
                if p not in used and not (g is not None and g.needs_path(tool, p) and "path" not in used)
            ]
            if all(r in used for r in req):
                alts.append((self.tok.encode(f"{lead}{FUNC_CLOSE}\n{CALL_CLOSE}"), ("end", "")))
            node = self._params[key] = trie(alts)
        return node

    def rest(self, tool: str, used: frozenset[str], after_value: bool) -> str:
        """The shortest text that closes a call to `tool` here: missing required parameters empty."""
        lead, out = ("\n" if after_value else ""), []
        for r in self.signature(tool)[1]:
            if r not in used:
                out.append(f"{lead}{PARAM_OPEN}{r}>\n{PARAM_CLOSE}")
                lead = "\n"
        return "".join(out) + f"{lead}{FUNC_CLOSE}\n{CALL_CLOSE}"

    def close_value(self, tool: str, used: frozenset[str]) -> list[int]:
        """The fewest tokens that complete the call from inside a value."""
        key = (tool, used)
        if key not in self._closes:
            self._closes[key] = self.tok.encode(PARAM_CLOSE + self.rest(tool, used, True))
        return self._closes[key]

    def ways(self, node: TrieNode, tool: str, used: frozenset[str]) -> dict[int, int]:
        """For each next token at `node` (in a call to `tool` with `used` written): the fewest
        tokens, itself included, that close the call through it. (A node belongs to one tool and
        set of written parameters, so caching on the node is sound.)"""
        if node.ways is None:
            ways = {}
            for t, child in node.children.items():
                if child.action is None:
                    rest = min(self.ways(child, tool, used).values())
                elif child.action[0] == "tool":
                    rest = len(self.tok.encode(self.rest(child.action[1], frozenset(), False)))
                elif child.action[0] == "param":
                    rest = len(self.close_value(tool, used | {child.action[1]}))
                else:
                    rest = 0
                ways[t] = 1 + rest
            node.ways = ways
        return node.ways

    def choices(self, node: TrieNode, tool: str, used: frozenset[str], left: int | None) -> list[int]:
        """The tokens allowed next at `node`: those after which the call still fits in `left`."""
        ways = self.ways(node, tool, used)
        fit = [t for t, n in ways.items() if left is None or n <= left]
        return fit or list(ways)  # nothing fits (the caller forced it late): keep the grammar

    def chain(self, ids: list[int]) -> TrieNode:
        """A one-way trie: these tokens and then the end (a value cut short to close the call)."""
        key = tuple(ids)
        if key not in self._chains:
            self._chains[key] = trie([(ids, ("end", ""))])
        return self._chains[key]


__all__ = ["CallSyntax", "TrieNode", "trie"]
