"""Tool calls well formed by construction: a grammar over the block-diffusion decoder's tokens.

Once the model writes `<tool_call>` in its answer, the rest of the call follows the Qwen3-Coder XML
form: `\\n<function=NAME>\\n`, then `<parameter=P>\\nVALUE` ... `</parameter>\\n` for parameters of
that tool, then `</function>\\n</tool_call>`. Names are limited to the declared tools, parameter
names to the tool's schema (each once), and `</function>` is only allowed once every required
parameter is given. Values hold no markup token (`</tool_call>` inside a value is a small model's
slip; such text is spelt with ordinary tokens), and typed values follow their schema
(typed_values.py). All text outside calls (thinking included) stays free, except for what the
parser (model/text/chat_parse.py) could not read back: an open call cannot end the turn; the answer
cannot hold a bare `<function=` (an unwrapped call) or a second `</think>` (the calls before it
would become thinking); no second `<think>` (the first think block's text would come back into the
answer), nor one after a call (the parser reads thinking before the first call only, so a call
written inside it would count). With a token budget, a call is only opened where it can still be
closed, names and parameters are limited to those that fit, and a value that runs out of room is
cut so the call closes on the last token.

How it drives the decoder (`model.generate`'s `constraint` hook). A block is denoised out of
order, but the grammar reads left to right, so after every round the block is walked from its
start up to the first masked position (the frontier), in the grammar state carried from the
previous block:
- a position the grammar determines (one continuation only, e.g. `\\n<function=`) is placed at
  once, without a forward;
- a choice (tool name, parameter name, next parameter or end) is made by the model at the
  frontier only: its allowed tokens are the tries' continuations, the later positions are held;
- in free text the block decodes in parallel as usual; positions after a token that opens a
  constrained part (`<tool_call>`, `</parameter>`) are held until the frontier reaches it, and
  whatever was accepted after it under the free rules is masked again there.
A token the caller fixed that breaks the grammar switches the grammar off for that sequence.
Allowed sets are ban rows over the vocabulary (tensors, cached per trie node).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from clover.model.text.chat import (
    CALL_OPEN,
    FUNC_CLOSE,
    FUNC_OPEN,
    PARAM_CLOSE,
    PARAM_OPEN,
    SPECIAL_TOKENS,
    THINK_CLOSE,
    THINK_OPEN,
    tool_schemas,
)
from clover.steering.answer_spans import OUT, in_span
from clover.steering.call_syntax import CallSyntax, TrieNode
from clover.steering.grounding import LINE_BOUNDED, Grounding
from clover.steering.typed_values import TypedTokens, ValueShape, value_shape
from clover.steering.value_nodes import CLOSE, Node

THINK, TEXT, CALL, VALUE, OFF = "think", "text", "call", "value", "off"
MAX_LEAD = 2  # whitespace tokens allowed before a required call (`\n\n` after the thinking)


@dataclass(frozen=True)
class _State:
    mode: str
    node: TrieNode | None = None  # CALL: where we are in the current trie
    tool: str = ""
    used: frozenset[str] = frozenset()  # parameters written (VALUE: the current one included)
    shape: ValueShape | None = None  # VALUE: the typed parameter's shape (None: free text)
    value: str = ""  # VALUE of a typed parameter: its text so far
    thought: bool = False  # a think block was opened (a second one would confuse the parser)
    ground: Node | None = None  # VALUE grounded in the workspace (grounding.py): the value so far
    param: str = ""  # VALUE: the parameter being written
    path: str = ""  # CALL/VALUE: the call's grounded path, once written
    called: bool = False  # a call was closed in this turn
    lead: int = 0  # TEXT, a call required: whitespace tokens written before it
    code: tuple = OUT  # TEXT with grounding: where the answer is in its code spans (answer_spans.py)


@dataclass
class _Seq:
    """Per sequence: the state and generated offset at the current block's start, and what the
    latest walk of the block ended with."""

    start: _State
    base: int = 0
    end: _State | None = None
    opened_in_block: int = 0
    frontier: int = 0  # the latest walk's frontier in this block: positions before it are checked
    placed: dict[int, int] = field(default_factory=dict)


class ToolCallGrammar:
    """The decoder constraint (model/decoder/generate.py's BlockConstraint, for
    `generate(..., constraint=)`), one per turn.

    `budget` (the decoder's max_new_tokens): a call is only opened where it can still be closed,
    and one running out of room is closed with the fewest tokens (the value cut short)."""

    def __init__(
        self,
        tokenizer: Any,
        tools: list[dict[str, Any]],
        *,
        opened: bool,
        stop_ids: list[int],
        vocab_size: int,
        mask_id: int,
        budget: int | None = None,
        device: Any = "cpu",
        batch_size: int = 1,
        grounding: Grounding | None = None,
        thought_closed: bool = False,
        copy_bias: float = 0.0,
        answer_only: bool = False,
        call_required: bool = False,
        spans: bool = False,
    ) -> None:
        self.tok, self.vocab, self.mask_id, self.budget = tokenizer, vocab_size, mask_id, budget
        self.grounding, self.copy_bias = grounding, copy_bias  # copy_bias: grounding.py's copy prior
        # spans: the answer's code spans copy the conversation (answer_spans.py), where grounded
        self.spans = grounding.answer_spans() if grounding is not None and spans else None
        self._span_bans: dict[tuple, Tensor] = {}
        self._code_rows: dict[tuple, Tensor] = {}  # mode rows with the code-span state's bans
        self.answer_only = answer_only
        self.device = torch.device(device)
        ids = {m: tokenizer.token_id(m) for m in (CALL_OPEN, PARAM_CLOSE, FUNC_OPEN, THINK_OPEN, THINK_CLOSE)}
        if ids[CALL_OPEN] is None or ids[PARAM_CLOSE] is None:
            raise ValueError(f"the tokenizer needs {CALL_OPEN} and {PARAM_CLOSE} as single tokens")
        self.call_open, self.param_close = ids[CALL_OPEN], ids[PARAM_CLOSE]
        self.think_open, self.think_close = ids[THINK_OPEN], ids[THINK_CLOSE]
        # Stray markup is banned where the model never learnt it and the parser would misread it.
        # In the answer: a bare `<function=` starts an unwrapped call; a second `</think>` would
        # turn everything before it (calls included) into thinking, a second `<think>` would
        # bring the first think block's text back into the answer. In thinking: a call or a turn
        # marker would be swallowed by the think block. An open call cannot end the turn, nor hide
        # itself inside a think block, and a turn cannot end inside its thinking (it would have
        # neither an answer nor a call). Text that looks like markup is spelt with ordinary tokens.
        names = [*SPECIAL_TOKENS, FUNC_OPEN, FUNC_CLOSE, PARAM_OPEN, PARAM_CLOSE]
        markup = {i for m in names if (i := tokenizer.token_id(m)) is not None} - set(stop_ids)
        # answer_only (the caller's tool_choice "none"): no call may be opened
        text_banned = markup - ({self.think_open} if answer_only else {self.call_open, self.think_open})
        thought_banned = text_banned | ({self.think_open} if self.think_open is not None else set())
        self.think_banned = (markup - {self.think_close}) | set(stop_ids)
        self.value_banned = set(stop_ids) | (markup - {self.param_close})
        self.text_banned = text_banned
        self.schemas = tool_schemas(tools)
        self.syntax = CallSyntax(tokenizer, self.schemas, grounding)
        self.typed = TypedTokens(tokenizer, vocab_size, skip={mask_id})
        self._typed_bans: dict[tuple[ValueShape, str], Tensor] = {}
        self.shortest_call = min(
            self.syntax.ways(self.syntax.root, "", frozenset()).values()
        )  # after `<tool_call>`
        self._rows: dict[str, Tensor] = {
            TEXT: self._ban_row(text_banned, ban_listed=True),
            "thought": self._ban_row(thought_banned, ban_listed=True),
            "late": self._ban_row(thought_banned | {self.call_open}, ban_listed=True),
            THINK: self._ban_row(self.think_banned, ban_listed=True),
            VALUE: self._ban_row(self.value_banned, ban_listed=True),
        }
        # call_required (the caller's tool_choice "required"): the answer starts with a call, only
        # whitespace before it, and cannot end before one (unless no call fits in the budget)
        self.required = call_required and not answer_only
        if self.required:
            self.spaces = {
                t for t in range(vocab_size) if t != mask_id and (p := self.typed.text(t)) and not p.strip()
            }
            self._rows["required"] = self._ban_row(self.spaces | {self.call_open}, ban_listed=False)
            self._rows["call now"] = self._ban_row({self.call_open}, ban_listed=False)
        # thought_closed: the prompt ends after a think block the model wrote (a second one is banned)
        first = _State(THINK, thought=True) if opened else _State(TEXT, thought=thought_closed)
        self.seqs = [_Seq(first) for _ in range(batch_size)]
        self.block_index, self.rounds = -1, 0
        # grammar_tokens: placed without a forward (scaffold and grounded values); grounded_tokens:
        # those inside grounded values
        self.stats = {
            "grammar_tokens": 0,
            "grammar_remasked": 0,
            "grammar_closed": 0,
            "grounded_tokens": 0,
            "span_tokens": 0,
        }  # span_tokens: placed inside the answer's code spans

    @classmethod
    def build(cls, tokenizer: Any, tools: list[dict[str, Any]] | None, **kw: Any) -> ToolCallGrammar | None:
        """The grammar for these tools, or None: no tools, or a vocabulary without the markup tokens."""
        if not tools or not tool_schemas(tools):
            return None
        try:
            return cls(tokenizer, tools, **kw)
        except ValueError:
            return None

    @property
    def placed(self) -> list[dict[int, int]]:
        """Per sequence: generated offset -> token the grammar placed there (no forward)."""
        return [s.placed for s in self.seqs]

    # ------------------------------------------------------------------ grammar

    def _choices(self, st: _State, left: int | None) -> list[int]:
        """The tokens allowed next at a CALL node: those after which the call still fits."""
        assert st.node is not None
        return self.syntax.choices(st.node, st.tool, st.used, left)

    def step(self, st: _State, t: int, left: int | None = None) -> _State | None:
        """The state after token t, or None when t is not allowed there. `left`: output positions
        left from t's on (None: no limit)."""
        mode = st.mode
        if mode == OFF:
            return st
        if mode == THINK:
            if t in self.think_banned:  # e.g. a nested `<think>` would split the thinking wrongly
                return None
            return replace(st, mode=TEXT) if t == self.think_close else st
        if mode == TEXT:
            if self.spans is not None:
                code = self.spans.after(st.code, t)
                if code is None:
                    return None
                if code != st.code:
                    st = replace(st, code=code)
            if self._must_call(st, left) and t != self.call_open:
                return replace(st, lead=st.lead + 1) if t in self.spaces and st.lead < MAX_LEAD else None
            if t == self.call_open:
                late = left is not None and left - 1 < self.shortest_call
                return None if late or self.answer_only else replace(st, mode=CALL, node=self.syntax.root)
            if t == self.think_open and not st.thought:
                return replace(st, mode=THINK, thought=True)
            return None if t in self.text_banned or t == self.think_open else st
        if mode == VALUE:
            if st.ground is not None:
                return self._step_grounded(st, t)
            if t == self.param_close:
                if st.shape is not None and not st.shape.complete(st.value) and not self._dead_end(st):
                    return None
                return replace(
                    st, mode=CALL, node=self.syntax.params(st.tool, st.used, True), shape=None, value=""
                )
            if t in self.value_banned:
                return None
            if st.shape is None:
                return st
            text = st.value + self.typed.text(t)
            return replace(st, value=text) if st.shape.prefix_ok(text) else None
        child = st.node.children.get(t) if st.node is not None else None
        if child is None or t not in self._choices(st, left):
            return None
        if child.action is None:
            return replace(st, node=child)
        kind, name = child.action
        if kind == "tool":
            return replace(st, node=self.syntax.params(name, frozenset(), False), tool=name, used=frozenset())
        if kind == "param":
            shape, ground = self._shape(st.tool, name), None
            if self.grounding is not None:
                ground = self.grounding.node(st.tool, name, st.path)
                lines = self.grounding.lines(st.path) if (st.tool, name) in LINE_BOUNDED else None
                shape = replace(shape, lines=lines) if shape is not None and lines else shape
            return replace(
                st, mode=VALUE, node=None, used=st.used | {name}, shape=shape, ground=ground, param=name
            )
        return _State(
            TEXT, thought=True, called=True
        )  # the call is closed; thinking after it would be read as answer

    def _step_grounded(self, st: _State, t: int) -> _State | None:
        assert st.ground is not None
        if t == self.param_close:
            if CLOSE not in st.ground.options():
                return None
            path = st.ground.text() if st.param == "path" else st.path
            used = st.used
            if st.param == "path" and self.grounding is not None and self.grounding.is_dir(path):
                # a directory has no lines: its view takes no view_range (as if already given)
                used = used | {p for tool, p in LINE_BOUNDED if tool == st.tool}
            node = self.syntax.params(st.tool, used, True)
            return replace(
                st, mode=CALL, node=node, shape=None, value="", ground=None, param="", path=path, used=used
            )
        nxt = st.ground.next(t)
        return None if nxt is None else replace(st, ground=nxt)

    def _ground_ban(self, node: Node) -> Tensor:
        """Every token but the grounded value's next ones (and `</parameter>` where it may end)."""
        if node.ban is None or node.ban.shape[0] != self.vocab or node.ban.device != self.device:
            node.ban = self._ban_row(
                [self.param_close if t == CLOSE else t for t in node.options()], ban_listed=False
            )
        return node.ban

    def closing(self, i: int = 0) -> list[int]:
        """Tokens that close sequence i's call if its output stopped inside a value (the decoder's
        repetition stop): the value is cut there, as when the token budget runs out."""
        st = self.seqs[i].end
        return self.syntax.close_value(st.tool, st.used) if st is not None and st.mode == VALUE else []

    def _opens(self, st: _State, t: int) -> bool:
        """Does t leave free text for a constrained part (later positions are then redone)?"""
        return (st.mode == TEXT and t == self.call_open) or (st.mode == VALUE and t == self.param_close)

    def _ban_row(self, ids: set[int] | list[int], *, ban_listed: bool) -> Tensor:
        row = torch.full((self.vocab,), not ban_listed, dtype=torch.bool, device=self.device)
        if ids:
            row[torch.tensor(sorted(ids), dtype=torch.long, device=self.device)] = ban_listed
        return row

    def _choice_ban(self, st: _State, choices: list[int]) -> Tensor:
        node = st.node
        assert node is not None
        if len(choices) < len(node.children):  # cut down by the budget: rare, not cached
            return self._ban_row(choices, ban_listed=False)
        if node.ban is None:
            node.ban = self._ban_row(choices, ban_listed=False)
        return node.ban

    # ------------------------------------------------------------------ typed values

    def _shape(self, tool: str, param: str) -> ValueShape | None:
        schema = self.schemas.get(tool)
        props = schema.get("properties") if isinstance(schema, dict) else None
        return value_shape(props.get(param)) if isinstance(props, dict) else None

    def _dead_end(self, st: _State) -> bool:
        """A typed value no token can continue: `</parameter>` may close it (as its ban row says)."""
        assert st.shape is not None
        return not self.typed.allowed(st.shape, st.value)

    def _typed_ban(self, st: _State) -> Tensor:
        """Every token but those that keep the value a prefix of its shape (and `</parameter>`
        once it is complete)."""
        assert st.shape is not None
        key = (st.shape, st.value)
        if key not in self._typed_bans:
            ok = self.typed.allowed(st.shape, st.value)
            if not ok or st.shape.complete(st.value):  # a dead end (not expected) closes too: never ban all
                ok.append(self.param_close)
            self._typed_bans[key] = self._ban_row(ok, ban_listed=False)
        return self._typed_bans[key]

    # ------------------------------------------------------------------ the decoder hook

    def __call__(
        self, blk: int, block: Tensor, open_: Tensor, fixed: Tensor
    ) -> tuple[Tensor, Tensor | None, Tensor | None, Tensor | None]:
        if blk != self.block_index:  # a new block: the last walk covered the finished one
            for s in self.seqs:
                if self.block_index >= 0 and s.end is not None:
                    s.start, s.base = s.end, s.base + s.opened_in_block
                s.frontier = 0
            self.block_index, self.rounds = blk, 0
        self.rounds += 1
        limit = 4 * block.shape[1] + 16
        if self.rounds > limit:  # never loop: a rule that undoes every round stops here
            if self.rounds == limit + 1:
                self.stats["grammar_gave_up"] = self.stats.get("grammar_gave_up", 0) + 1
                # The block is then decoded unsteered, so no walk's state describes what follows:
                # the rest of the turn stays unsteered rather than being misread from a stale state.
                for s in self.seqs:
                    s.end = _State(OFF)
            return block, None, None, None
        rows, opens, fixes = block.tolist(), open_.tolist(), fixed.tolist()
        n, b = len(rows), len(rows[0])
        frozen = [[False] * b for _ in range(n)]
        bans: list[tuple[int, int, Tensor]] = []  # (sequence, from position, ban row)
        firsts: list[tuple[int, int, Tensor]] = []  # (sequence, frontier, ban row there only)
        copies: list[tuple[int, int, Tensor]] = []  # (sequence, frontier, copy-prior row)
        changed = False
        for i, s in enumerate(self.seqs):
            s.opened_in_block = sum(opens[i])
            f, st, left, ch = self._walk(s, rows[i], opens[i], fixes[i])
            changed |= ch
            s.end, s.frontier = st, f
            if f >= b:
                continue
            front, prior = self._frontier_rows(st, left)
            if front is None:  # not steering
                continue
            if prior is not None:
                copies.append((i, f, prior))
            if (st.mode == CALL and st.node is not None) or (st.mode == VALUE and st.shape is not None):
                frozen[i][f + 1 :] = [True] * (b - f - 1)  # a choice, a typed value: a token at a time
                bans.append((i, f, front))
                continue
            if (
                st.ground is not None or self._span_only(st) is not None
            ):  # later positions are checked on arrival
                firsts.append((i, f, front))
            bans.append((i, f, self._mode_row(st, left)))
            if st.mode != THINK:  # hold what follows a switch the model already wrote further on
                for j in range(f + 1, b):
                    t = rows[i][j]
                    if opens[i][j] and t != self.mask_id and self._opens(st, t):
                        frozen[i][j + 1 :] = [True] * (b - j - 1)
                        break
        if changed:
            block = torch.tensor(rows, dtype=block.dtype, device=block.device)
        ban = None
        if bans:
            ban = torch.zeros(n, b, self.vocab, dtype=torch.bool, device=block.device)
            for i, f, row in bans:
                held = frozen[i].index(True) if True in frozen[i] else b
                ban[i, f:held] = row
            for i, f, row in firsts:
                ban[i, f] = row
        frozen_t = (
            torch.tensor(frozen, dtype=torch.bool, device=block.device) if any(map(any, frozen)) else None
        )
        bias = None
        if copies:
            bias = torch.zeros(n, b, self.vocab, device=block.device)
            for i, f, prior in copies:
                bias[i, f] = prior
        return block, frozen_t, ban, bias

    def verify_rows(self, i: int, row: list[int], open_: list[bool], f: int, e: int) -> list[tuple[Any, Any]]:
        """For a verified round (model/decoder/verify.py): the (ban, bias) rows of positions f, f+1, ... of
        sequence i's block, each in the state after the block's tokens before it (`row`: the
        latest walk's block with the round's draft in its masked positions), as this hook gives
        them at a frontier. Ends after a token the grammar refuses there, or where it stops
        steering; `f` is the latest walk's frontier."""
        s = self.seqs[i]
        st = s.end
        if st is None or f != s.frontier:
            return []
        first = open_.index(True) if True in open_ else 0
        rows: list[tuple[Any, Any]] = []
        for j in range(f, e):
            if not open_[j] or st.mode == OFF:
                break
            left = None
            if self.budget is not None:
                left = self.budget - (s.base + j - first)
                if st.mode == VALUE and left <= len(close := self.syntax.close_value(st.tool, st.used)):
                    st = replace(st, mode=CALL, node=self.syntax.chain(close))
            rows.append(self._frontier_rows(st, left))
            nxt = self.step(st, row[j], left)
            if nxt is None:
                break
            st = nxt
        return rows

    def _frontier_rows(self, st: _State, left: int | None) -> tuple[Tensor | None, Tensor | None]:
        """The ban row and copy-prior row at a frontier in state `st` (as `__call__` sets them)."""
        if st.mode == CALL and st.node is not None:
            return self._choice_ban(st, self._choices(st, left)), None
        if st.mode == VALUE and st.shape is not None:
            return self._typed_ban(st), None
        if st.mode in (TEXT, VALUE) and st.ground is not None:
            bias = None
            if self.copy_bias and (named := st.ground.preferred()):
                bias = torch.zeros(self.vocab, device=self.device)
                bias[[self.param_close if t == CLOSE else t for t in named]] = self.copy_bias
            return self._ground_ban(st.ground), bias
        if (only := self._span_only(st)) is not None:
            bias = None
            if self.copy_bias and in_span(st.code) and (named := self.spans.preferred(st.code[1])):
                bias = torch.zeros(self.vocab, device=self.device)
                bias[named] = self.copy_bias
            return self._span_ban(st.code, only), bias
        return self._mode_row(st, left), None

    def _span_only(self, st: _State) -> list[int] | None:
        """The few tokens allowed in the answer's code-span state (inside a span, after ``); None: many."""
        if st.mode != TEXT or self.spans is None or st.code == OUT:
            return None
        return self.spans.only(st.code)

    def _span_ban(self, code: tuple, only: list[int]) -> Tensor:
        """Every token but those that copy a code span on (or close it), or go on from ``."""
        if code not in self._span_bans:
            self._span_bans[code] = self._ban_row(only, ban_listed=False)
        return self._span_bans[code]

    def _mode_row(self, st: _State, left: int | None) -> Tensor | None:
        """The ban row of free positions in thinking, text or an untyped value (None: other modes)."""
        if st.mode == THINK:
            return self._rows[THINK]
        if st.mode not in (TEXT, VALUE):
            return None
        if self._must_call(st, left):
            return self._rows["required" if st.lead < MAX_LEAD else "call now"]
        late = st.mode == TEXT and left is not None and left - 1 < self.shortest_call
        key = "late" if late else "thought" if st.mode == TEXT and st.thought else st.mode
        if st.mode == TEXT and self.spans is not None:  # no token may open a span that copies nothing
            code_key = (
                key,
                OUT if in_span(st.code) else st.code,
            )  # past a span's frontier: checked on arrival
            if code_key not in self._code_rows:
                banned = self.spans.banned(code_key[1])
                self._code_rows[code_key] = self._rows[key] | self._ban_row(banned, ban_listed=True)
            return self._code_rows[code_key]
        return self._rows[key]

    def _must_call(self, st: _State, left: int | None) -> bool:
        """Is a call required here (tool_choice "required", none made yet, and one still fits)?"""
        return (
            self.required
            and st.mode == TEXT
            and not st.called
            and (left is None or left - 1 >= self.shortest_call)
        )

    def _walk(
        self, s: _Seq, row: list[int], open_: list[bool], fixed: list[bool]
    ) -> tuple[int, _State, int | None, bool]:
        """Walk the block from its start: place determined tokens, re-mask what the grammar rejects.
        Returns (frontier position or B, state there, output positions left there, row changed)."""
        st, changed, left = s.start, False, None
        first = open_.index(True) if True in open_ else 0  # generated offset s.base sits here
        for j in range(len(row)):
            if not open_[j]:
                continue
            if self.budget is not None:
                left = self.budget - (s.base + j - first)
                if st.mode == VALUE and left <= len(close := self.syntax.close_value(st.tool, st.used)):
                    # just room left to close the call: the value ends here
                    st = replace(st, mode=CALL, node=self.syntax.chain(close))
                    self.stats["grammar_closed"] += j >= s.frontier
            t = row[j]
            nxt = self.step(st, t, left) if t != self.mask_id else None
            if t != self.mask_id and nxt is None:
                if fixed[j]:  # the caller's token wins: stop steering this sequence
                    st = _State(OFF)
                    continue
                changed |= self._remask(s, row, open_, fixed, j, first)
                t = self.mask_id
            if t == self.mask_id:
                choices = self._choices(st, left) if st.mode == CALL and st.node is not None else []
                if st.mode == VALUE and st.ground is not None and (one := st.ground.forced()) is not None:
                    choices = [self.param_close if one == CLOSE else one]
                    self.stats["grounded_tokens"] += 1
                elif (only := self._span_only(st)) is not None and len(only) == 1:
                    choices = only  # the one copy left spells on: placed without a forward
                    self.stats["span_tokens"] += 1
                if len(choices) != 1:
                    return j, st, left, changed
                row[j] = t = choices[0]
                s.placed[s.base + j - first] = t
                self.stats["grammar_tokens"] += 1
                changed = True
                nxt = self.step(st, t, left)
            if j >= s.frontier and self._opens(st, t):  # newly reached: what follows was free
                changed |= self._remask(s, row, open_, fixed, j + 1, first)
            st = nxt
        return len(row), st, left, changed

    def _remask(
        self, s: _Seq, row: list[int], open_: list[bool], fixed: list[bool], start: int, first: int
    ) -> bool:
        changed = False
        for j in range(start, len(row)):
            if open_[j] and not fixed[j] and row[j] != self.mask_id:
                row[j] = self.mask_id
                s.placed.pop(s.base + j - first, None)
                self.stats["grammar_remasked"] += 1
                changed = True
        return changed


__all__ = ["ToolCallGrammar"]
