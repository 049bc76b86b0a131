"""The embedded model's str_replace, chosen rather than written (the `edit_repairs` setting).

A small model finds the faulty function more often than the faulty line, and the faulty line more
often than the fixed one (issue 16: in the hand-written set it named the right line in about half
the tasks, then copied it back unchanged or garbled the changed token). So when a turn's
str_replace names a unique old_str, the edit is chosen among (line, repair) pairs: every line of
the function around the model's own old_str, each with its one-site repairs (repairs.py). Each pair
is scored by the model as the continuation of the turn's text from `<parameter=old_str>` (old
line, then new line), and the most probable pair replaces what greedy decoding wrote. The model
still decides which function, which line and which repair; the candidates only keep it from
writing something no small fix looks like.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from clover.backends.repairs import repairs
from clover.core.protocols import ToolCall
from clover.model.chat import PARAM_CLOSE, PARAM_OPEN, render_tool_call

OPEN_OLD = f"{PARAM_OPEN}old_str>\n"
BETWEEN = f"\n{PARAM_CLOSE}\n{PARAM_OPEN}new_str>\n"
MAX_PAIRS = 256  # a scoring pass of ~40 tokens each: about a second on one CPU core for the embedded model
REGION_LINES = 40  # at most this many lines around the model's own line
DEFINITION = ("def ", "async def ", "class ")


@dataclass
class EditChoice:
    old_str: str
    new_str: str
    candidates: int


def _prefix_text(reply: str) -> str | None:
    """The reply up to its str_replace's old_str value, when old_str comes before new_str."""
    call_at = reply.rfind("<tool_call>")
    old_at = reply.find(OPEN_OLD, max(call_at, 0))
    new_at = reply.find(f"{PARAM_OPEN}new_str>", max(call_at, 0))
    if call_at < 0 or old_at < 0 or (0 <= new_at < old_at):
        return None
    return reply[: old_at + len(OPEN_OLD)]


def region(lines: list[str], at: int) -> range:
    """The definition around line `at`: from its `def`/`class` line to the next one (at most
    REGION_LINES lines, centred on `at` when the definition is longer)."""
    lo = at
    while lo > 0 and not lines[lo].lstrip().startswith(DEFINITION):
        lo -= 1
    hi = at + 1
    while hi < len(lines) and not lines[hi].lstrip().startswith(DEFINITION):
        hi += 1
    if hi - lo > REGION_LINES:
        lo = max(lo, at - REGION_LINES // 2)
        hi = min(hi, lo + REGION_LINES)
    return range(lo, hi)


def edit_pairs(old: str, text: str, path: str, issue: str, context: str) -> list[tuple[str, str]]:
    """(old line, repaired line) for every unique line around `old`'s first line; a multi-line
    old_str also keeps its own repairs."""
    lines = text.split("\n")
    first = text[: text.index(old)].count("\n")
    pairs: list[tuple[str, str]] = []
    if "\n" in old.strip("\n"):
        pairs += [(old, r) for r in repairs(old, issue=issue, file_text=text, path=path, context=context)]
    seen: set[str] = set()
    around = region(lines, first)
    pairs += _missing_return(lines, around, text)
    for i in around:
        line = lines[i]
        if not line.strip() or line in seen or text.count(line) != 1:
            continue
        seen.add(line)
        pairs += [(line, r) for r in repairs(line, issue=issue, file_text=text, path=path, context=context)]
    return pairs[:MAX_PAIRS]


def _missing_return(lines: list[str], around: range, text: str) -> list[tuple[str, str]]:
    """A function that never returns: its last line, then `return NAME` for each name it assigns."""
    body = [lines[i] for i in around if lines[i].strip()]
    if len(body) < 2 or not body[0].lstrip().startswith(("def ", "async def ")):
        return []
    if any(line.lstrip().startswith(("return", "yield", "raise")) for line in body[1:]):
        return []
    last = body[-1]
    if text.count(last) != 1:
        return []
    indent = body[1][: len(body[1]) - len(body[1].lstrip())]
    names = re.findall(r"^\s*([A-Za-z_]\w*)\s*(?:[-+*/%]|//)?=(?!=)", "\n".join(body[1:]), re.M)
    return [(last, f"{last}\n{indent}return {n}") for n in dict.fromkeys([*names, "True", "False", "None"])]


def choose_edit(
    net: Any, tokenizer: Any, prompt_ids: list[int], reply: str, call: ToolCall, file_text: str,
    *, issue: str = "", context: str = "",
) -> EditChoice | None:  # fmt: skip
    """The (old_str, new_str) the model finds most likely around this call's old_str, or None (not
    a str_replace with a unique old_str, nothing to offer, or not the usual call layout)."""
    from clover.model.score import continuation_logprobs

    args = call.arguments
    old, path = args.get("old_str"), args.get("path")
    if call.name != "str_replace" or not isinstance(old, str) or not isinstance(path, str) or not old.strip():
        return None
    text = file_text.replace("\r\n", "\n")
    if text.count(old) != 1:
        return None
    prefix = _prefix_text(reply)
    if prefix is None:
        return None
    pairs = edit_pairs(old, text, path, issue, context)
    if not pairs:
        return None
    conts = [tokenizer.encode(f"{o}{BETWEEN}{n}\n{PARAM_CLOSE}") for o, n in pairs]
    scores = continuation_logprobs(net, prompt_ids + tokenizer.encode(prefix), conts)
    best = max(range(len(pairs)), key=scores.__getitem__)
    return EditChoice(pairs[best][0], pairs[best][1], len(pairs))


def with_edit(call: ToolCall, old_str: str, new_str: str) -> ToolCall:
    """The call with another edit (arguments and the raw text the trajectory records)."""
    args = {**call.arguments, "old_str": old_str, "new_str": new_str}
    return ToolCall(call.name, args, id=call.id, raw=render_tool_call(call.name, args), error=call.error)


__all__ = ["EditChoice", "choose_edit", "edit_pairs", "region", "with_edit"]
