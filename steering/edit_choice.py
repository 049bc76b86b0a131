"""The embedded model's str_replace: its own edit, or a repair a check verifies (`edit_repairs`).

A small model finds the faulty function more often than the faulty line, and the faulty line more
often than the fixed one. So when a turn's str_replace names a unique old_str, one-site
repairs of the lines around it (repairs.py) are candidates beside the model's own new_str, ranked
by the model's likelihood (each (line, repair) pair scored as the continuation of the turn's text
from `<parameter=old_str>`).

Which one is applied (a mutation chosen by likelihood alone replaced correct edits and broke
passing tests):
- the model's own edit is always a candidate, and stands unless a check verifies another one: the
  issue's example and the tests that use it (reproduce.py) pass under that candidate, every check
  the file fails now, while the model's edit does not pass them all;
- without a check (none stated, or the agent's gate does not let it run), the model's edit
  stands as written; only where it is no edit at all (new_str = old_str, or one the edit tools
  would refuse: a syntax error, an undefined name) may the likeliest repair take its place, and
  then at most once per file in a conversation (`may_repair`): unverified mutations in a row were
  how passing code got broken.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from typing import Any

from clover.core.model_protocol import ToolCall
from clover.core.stage_protocol import CheckRunner
from clover.model.text.chat import PARAM_CLOSE, PARAM_OPEN, render_tool_call
from clover.steering.repairs import repairs
from clover.tools.pynames import newly_undefined
from clover.tools.pysyntax import newly_broken

OPEN_OLD = f"{PARAM_OPEN}old_str>\n"
BETWEEN = f"\n{PARAM_CLOSE}\n{PARAM_OPEN}new_str>\n"
MAX_PAIRS = 256  # a scoring pass of ~40 tokens each: about a second on one CPU core for the embedded model
TOP_LINES = 3  # lines whose repairs are scored, the likeliest as old_str (the model's own one too)
REGION_LINES = 40  # at most this many lines around the model's own line
DEFINITION = ("def ", "async def ", "class ")


@dataclass
class EditChoice:
    old_str: str
    new_str: str
    candidates: int
    path: str = ""
    verified: bool = False  # the issue's reproduction passes under this edit (reproduce.py)
    held: str | None = None  # why the edit is not to be applied (it would undo a reproduced fix)
    unverified: bool = False  # a repair that replaced an unusable edit of the model's without a check


def refused(path: str, text: str, old: str, new: str) -> bool:
    """Would the edit tools refuse this edit of `text` (a syntax error or a name nothing defines)?"""
    at = text.find(old)
    after = text[:at] + new + text[at + len(old) :]
    return bool(newly_broken(path, text, after) or newly_undefined(path, text, after))


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


def region_lines(old: str, text: str) -> list[str]:
    """The unique, non-blank lines of the definition around `old`'s first line (old itself first
    when it spans several lines)."""
    lines = text.split("\n")
    out = [old] if "\n" in old.strip("\n") else []
    for i in region(lines, text[: text.index(old)].count("\n")):
        line = lines[i]
        if line.strip() and line not in out and text.count(line) == 1:
            out.append(line)
    return out


def edit_pairs(
    old: str, text: str, path: str, issue: str, context: str, keep: list[str] | None = None
) -> list[tuple[str, str]]:
    """(old line, repaired line) for the lines around `old` (only those in `keep`, when given)."""
    lines = text.split("\n")
    around = region(lines, text[: text.index(old)].count("\n"))
    pairs = [p for p in _missing_return(lines, around, text) if keep is None or p[0] in keep]
    for line in region_lines(old, text):
        if keep is None or line in keep:
            pairs += [
                (line, r) for r in repairs(line, issue=issue, file_text=text, path=path, context=context)
            ]
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


def _kept_lines(scorer: Any, tokenizer: Any, old: str, text: str) -> list[str]:
    """The lines whose repairs are candidates: the likeliest few as old_str (scored up to
    new_str's opening), and the model's own old_str always."""
    lines = region_lines(old, text)
    line_scores = scorer.scores([tokenizer.encode(f"{line}{BETWEEN}") for line in lines])
    ranked = sorted(range(len(lines)), key=lambda i: -line_scores[i])
    own_line = old if "\n" in old.strip("\n") else text.split("\n")[text[: text.index(old)].count("\n")]
    return [lines[i] for i in ranked[:TOP_LINES]] + [own_line]


def choose_edit(
    net: Any,
    tokenizer: Any,
    prompt_ids: list[int],
    reply: str,
    call: ToolCall,
    file_text: str,
    *,
    issue: str = "",
    context: str = "",
    reproduction: Any = None,
    workspace: Any = None,
    may_repair: Any = lambda path: True,
) -> EditChoice | None:
    """The edit this str_replace call makes, or None to leave the call as written (not a
    str_replace with a unique old_str, or nothing to do). The model's own edit stands unless the
    issue's `reproduction` (reproduce.py) verifies another candidate: the likeliest that passes
    every check the file fails now, looking past the likeliest lines to the whole region, then to
    the functions the issue calls (`workspace` finds them). `may_repair(path)`: whether an
    unverified repair may replace an unusable edit of the model's in this file."""
    from clover.model.decoder.score import PrefixScorer

    args = call.arguments
    old, path, new = args.get("old_str"), args.get("path"), args.get("new_str")
    if call.name != "str_replace" or not isinstance(old, str) or not isinstance(path, str) or not old.strip():
        return None
    text = file_text.replace("\r\n", "\n")
    if text.count(old) != 1:
        return None
    usable = isinstance(new, str) and new != old and not refused(path, text, old, new)
    own = EditChoice(old, new, 0, path) if usable else None
    prefix = _prefix_text(reply)
    if (own is not None and reproduction is None) or prefix is None:
        return own  # no check to verify another candidate by: the model's edit stands as written
    scorer = PrefixScorer(net, prompt_ids + tokenizer.encode(prefix))
    pairs = edit_pairs(old, text, path, issue, context, _kept_lines(scorer, tokenizer, old, text))

    def rank(found: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        """Candidates, most likely first (each scored as the continuation of old_str)."""
        got = scorer.scores([tokenizer.encode(f"{o}{BETWEEN}{n}\n{PARAM_CLOSE}") for _, o, n in found])
        return [found[i] for i in sorted(range(len(found)), key=lambda i: -got[i])]

    first = [(path, o, n) for o, n in pairs]

    def fallback(best: list[tuple[str, str, str]] | None = None) -> EditChoice | None:
        """What stands without a verified candidate: the model's edit, else (once per file) the
        likeliest repair (of `best`, the candidates passing the most checks, when there are such)."""
        if own is not None:
            return own
        pool = best or first
        if not pool or not may_repair(path):
            return None
        found = rank(pool)[0]
        return EditChoice(found[1], found[2], len(pairs), found[0], unverified=True)

    if reproduction is None:
        return fallback()

    @functools.cache
    def sites() -> tuple[list[tuple[str, str, str]], str]:
        """The functions the issue calls, and the context widened by their files (their classes'
        fields are candidates too: `user.email`); read only when a stage gets that far."""
        found = reproduction.sites(workspace) if workspace is not None else []
        return found, "\n".join([context, *dict.fromkeys(t for _, t, _ in found)])

    stages = (
        lambda: first,  # the likeliest lines' repairs
        lambda: [
            (path, o, n) for o, n in edit_pairs(old, text, path, issue, sites()[1])
        ],  # the whole region's
        lambda: [
            (p, o, n) for p, t, line in sites()[0] for o, n in edit_pairs(line, t, p, issue, sites()[1])
        ],
    )
    mine = (path, old, new) if own is not None else None
    return verified_choice(reproduction, list(stages), fallback, rank, own=mine)


def verified_choice(
    reproduction: Any,
    stages: list[Any],
    fallback: Any,
    rank: Any = None,
    own: tuple[str, str, str] | None = None,
) -> EditChoice | None:
    """The edit a check verifies, else `fallback`'s. `own` (the model's edit, a candidate before
    every other) wins when it passes every check the file fails now; another candidate replaces it
    only when it passes them all and `own` does not (the likeliest such of the first stage that has
    one, by `rank`: candidates -> most likely first; None keeps the stage's order). Without such a
    candidate, `fallback(best)` (an EditChoice, or a function of the candidates passing the most
    checks) stands; where the file already passes every check, it is held back if it would break one.

    Each stage's candidates are all run at once and only the passing ones are ranked, which chooses
    what running them in order of likelihood would, for a fraction of the scoring."""

    def chosen(best: list[tuple[str, str, str]] | None = None) -> EditChoice | None:
        return fallback(best) if callable(fallback) else fallback

    first = list(dict.fromkeys([*([own] if own else []), *stages[0]()])) if stages else ([own] if own else [])
    judged = reproduction.judge(first, only_if_failing=True)
    if judged is None:
        return chosen()  # the checks cannot run here: nothing verifies another candidate
    if not judged.live:  # nothing to fix by the checks: only keep them passing
        choice = chosen()
        if choice is None:
            return None
        mine = reproduction.judge([(choice.path, choice.old_str, choice.new_str)], test_all=True)
        return (
            replace(choice, held=reproduction.held_message())
            if mine is not None and mine.breaks[0]
            else choice
        )
    if own is not None and judged.counts[0] == judged.live:
        return EditChoice(own[1], own[2], len(first), own[0], verified=True)
    seen = set(first)
    best: tuple[int, list[tuple[str, str, str]]] | None = None
    for i, stage in enumerate(stages):
        candidates = first if i == 0 else [c for c in dict.fromkeys(stage()) if c not in seen]
        if not candidates:
            continue
        if i:  # the first stage ran with the file as it is, above
            seen.update(candidates)
            judged = reproduction.judge(candidates)
            if judged is None:
                break
        top = max(judged.counts)
        if top and (best is None or top > best[0]):
            best = (top, [c for c, n in zip(candidates, judged.counts, strict=True) if n == top])
        if best is not None and best[0] == judged.live:
            path, old, new = (rank(best[1]) if rank is not None else best[1])[0]
            return EditChoice(old, new, len(first), path, verified=True)
    return chosen(best[1] if best is not None else None)


def with_edit(call: ToolCall, old_str: str, new_str: str, path: str | None = None) -> ToolCall:
    """The call with another edit (arguments and the raw text the trajectory records)."""
    args = {**call.arguments, "old_str": old_str, "new_str": new_str, **({"path": path} if path else {})}
    return ToolCall(call.name, args, id=call.id, raw=render_tool_call(call.name, args), error=call.error)


@dataclass
class TurnEdit:
    """The turn stage's edit of a str_replace call: the call as it is to run, why it is held back
    instead (it would undo a fix the issue's example confirms), and the turn's stats."""

    call: ToolCall
    held: str | None
    stats: dict[str, float]


def choose_turn_edit(
    model: Any,
    call: ToolCall,
    decoded: Any,
    messages: list[Any],
    run_check: CheckRunner | None,
) -> TurnEdit | None:
    """A turn's one str_replace call's edit, as choose_edit decides it (None: nothing to decide).
    `model`: the LocalCloverModel (its network scores the candidates; `repairs_spent` keeps the
    unverified repairs of its conversations); `decoded`: the turn's local.Decoded; `run_check`: the
    agent's runner of the issue's example (None: it cannot run). The stats say how many candidates
    there were and whether the edit changed, was verified, or replaced an unusable edit of the
    model's without a check."""
    path = call.arguments.get("path")
    workspace = model.workspace
    data = workspace.read(path) if call.name == "str_replace" and isinstance(path, str) else None
    if data is None:
        return None
    issue = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    reproduction = None
    if run_check is not None:
        from clover.steering.reproduce import Reproduction

        reproduction = Reproduction.from_messages(messages, workspace, run_check)
    # at most one unverified repair per file in a conversation (its first request names it)
    if model.repairs_spent is None:
        model.repairs_spent = set()
    spent, conversation = model.repairs_spent, hash(issue)
    choice = choose_edit(
        model.net,
        model.tokenizer,
        decoded.ids,
        decoded.reply,
        call,
        data.decode("utf-8", "replace"),
        issue=issue,
        context=decoded.context,
        reproduction=reproduction,
        workspace=workspace,
        may_repair=lambda p: (conversation, p) not in spent,
    )
    if choice is None:
        return None
    if choice.unverified:
        spent.add((conversation, choice.path))
    args = call.arguments
    changed = (choice.old_str, choice.new_str, choice.path) != (
        args.get("old_str"),
        args.get("new_str"),
        path,
    )
    stats = {
        "repair_candidates": float(choice.candidates),
        "repaired_edits": float(changed),
        "unverified_repairs": float(choice.unverified),
    }
    if reproduction is not None:
        stats |= {
            "reproduction_runs": float(reproduction.runs),
            "verified_edits": float(choice.verified),
            "held_edits": float(choice.held is not None),
        }
    return TurnEdit(with_edit(call, choice.old_str, choice.new_str, choice.path), choice.held, stats)


__all__ = [
    "EditChoice",
    "TurnEdit",
    "choose_edit",
    "choose_turn_edit",
    "edit_pairs",
    "refused",
    "region",
    "verified_choice",
    "with_edit",
]
