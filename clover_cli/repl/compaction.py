"""Context compaction: when the conversation nears the model's context window, the older turns are
replaced by a summary the model writes; the system prompt (with AGENTS.md, read afresh) and the
task state are re-injected, and the recent turns are kept verbatim."""

from __future__ import annotations

import json
from dataclasses import dataclass

from clover.core.model_protocol import EventHandler, Message, Model
from clover.core.stops import ModelError

TRIGGER = 0.8  # compact when the context is this full
KEEP = 0.25  # keep recent messages up to this share of the window verbatim
SUMMARY_PROMPT = (
    "The conversation below between a user and you (a coding agent) is too long for your context and "
    "is being compacted. Write a summary you can continue the work from: the user's requests and "
    "constraints, decisions taken, files read or changed (paths, what changed), commands run and their "
    "important results, errors still open, and what remains to do. Plain text, at most 300 words."
)
ACK = "Understood. I will continue from this summary."
CUT_SHORT = ("length", "incomplete", "repetition")  # finish reasons of a summary that is not whole
MARKER = "[Earlier conversation, compacted]"


def message_text(message: Message) -> str:
    content = message.get("content") or ""
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False)
    calls = message.get("tool_calls") or []
    for call in calls:
        fn = call.get("function", {})
        content += f"\n[tool call {fn.get('name')}: {fn.get('arguments')}]"
    return content


def estimate_tokens(messages: list[Message]) -> int:
    """About four characters a token, plus a few tokens of framing per message."""
    return sum(len(message_text(m)) // 4 + 4 for m in messages)


def should_compact(used_tokens: int, window: int) -> bool:
    return window > 0 and used_tokens >= TRIGGER * window


def split_point(messages: list[Message], keep_tokens: int) -> int | None:
    """Index where the kept tail starts: a user or assistant message (tool results stay with the
    assistant turn that asked for them), the tail at most `keep_tokens`. None: nothing to gain."""
    total = 0
    best: int | None = None
    for i in range(len(messages) - 1, 0, -1):
        total += estimate_tokens([messages[i]])
        if total > keep_tokens:
            break
        if messages[i].get("role") in ("user", "assistant"):
            best = i
    if best is None:
        # Even the last turn is too big: keep only the final message group.
        best = next(
            (i for i in range(len(messages) - 1, 0, -1) if messages[i].get("role") in ("user", "assistant")),
            None,
        )
    already = str(messages[1].get("content") or "").startswith(MARKER) if len(messages) > 1 else False
    if best is None or best <= 1 or (already and best <= 3):
        return None
    return best


def transcript(messages: list[Message], budget_chars: int) -> str:
    parts = []
    for m in messages:
        text = message_text(m)
        if len(text) > 2000:
            text = text[:1000] + "\n[...]\n" + text[-800:]
        parts.append(f"## {m.get('role')}\n{text}")
    out = "\n\n".join(parts)
    return out if len(out) <= budget_chars else "[...]\n" + out[-budget_chars:]


@dataclass
class Compaction:
    removed: int
    before_tokens: int
    after_tokens: int
    summary: str
    by_model: bool
    applied: bool = True  # False: the compacted form was no smaller, so the messages were kept
    cut: str = ""  # the summary's finish reason when it was cut short ("length": max_tokens)


def compact(
    messages: list[Message],
    model: Model,
    *,
    system_prompt: str,
    task_state: str,
    window: int,
    keep_tokens: int | None = None,
    on_event: EventHandler | None = None,
) -> Compaction | None:
    """Rewrite `messages` in place. Returns None when there is nothing old enough to compact, and
    `applied=False` (messages untouched) when the summary would not make the conversation smaller.
    `on_event` sees the summary as the model writes it."""
    window = window or 32_000
    cut = split_point(messages, keep_tokens if keep_tokens is not None else int(KEEP * window))
    if cut is None:
        return None
    before = estimate_tokens(messages)
    old, tail = messages[1:cut], messages[cut:]
    request: list[Message] = [
        {"role": "system", "content": "You summarise coding sessions accurately and briefly."},
        {
            "role": "user",
            "content": f"{SUMMARY_PROMPT}\n\n<conversation>\n"
            f"{transcript(old, int(window * 2))}\n</conversation>",
        },
    ]
    summary, by_model, cut_short = "", True, ""
    try:
        turn = model.complete(request, [], on_event)
        summary = turn.text.strip()
        if turn.finish_reason in CUT_SHORT and summary:  # not a whole summary: said, here and to the user
            cut_short, summary = turn.finish_reason, summary + "\n[the summary was cut off here]"
    except KeyboardInterrupt:
        raise
    except Exception:  # the summary is a nicety; a mechanical one keeps the session going
        summary = ""
    if not summary:
        by_model = False
        asks = [message_text(m)[:200] for m in old if m.get("role") == "user"]
        summary = "Earlier requests:\n" + "\n".join(f"- {a}" for a in asks)
    injected: list[Message] = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": f"{MARKER}\n{summary}\n\n{task_state}".rstrip()},
    ]
    if tail and tail[0].get("role") == "user":
        injected.append({"role": "assistant", "content": ACK})
    after = estimate_tokens(injected + tail)
    if after >= before:
        return Compaction(len(old), before, after, summary, by_model, applied=False, cut=cut_short)
    messages[:] = injected + tail
    return Compaction(len(old), before, after, summary, by_model, cut=cut_short)


def is_overflow(exc: Exception) -> bool:
    """A context-length refusal, as the backend flagged it (the OpenAI backend by server_errors.py's
    table, the local model by its own count)."""
    return isinstance(exc, ModelError) and exc.context_overflow


def task_state(current_request: str, changed: str) -> str:
    lines = ["# Task state"]
    if current_request:
        lines.append(f"Current request: {current_request.strip()[:1500]}")
    if changed.strip():
        lines.append("Files changed so far (git status):\n" + changed.strip())
    return "\n".join(lines)
