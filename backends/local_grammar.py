"""The tool-call grammar of one local turn (steering/tool_grammar.py), grounded in the workspace
the model was bound to (steering/grounding.py): what the decoder may write in a call."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clover.core.model_protocol import ToolSpec


@dataclass(frozen=True)
class TurnText:
    """What a turn's grammar reads of the conversation: the prompt as text (the copy prior of
    grounded values), what the answer's code spans may copy, and what the user asked (the test
    files and docstrings it names may be edited: edit_scope.py)."""

    context: str = ""
    quotable: str = ""
    request: str = ""


def grammar_for(
    model: Any,
    tools: list[ToolSpec],
    opened: bool,
    budget: int,
    text: TurnText,
    *,
    thought_closed: bool = False,
    answer_only: bool = False,
    call_required: bool = False,
):
    """The tool-call grammar for this turn of `model` (a LocalCloverModel), or None (no tools,
    switched off, or a checkpoint whose template asks for another call format)."""
    if not tools or not model.constrain_tool_calls:
        return None
    if model.chat_template is not None and "<function=" not in model.chat_template:
        return None
    from clover.steering.tool_grammar import ToolCallGrammar

    return ToolCallGrammar.build(
        model.tokenizer,
        tools,
        opened=opened,
        stop_ids=model.stop_ids,
        vocab_size=model.config.vocab_size,
        mask_id=model.config.mask_token_id,
        budget=budget,
        device=model.device,
        grounding=grounding_for(model, text),
        thought_closed=thought_closed,
        copy_bias=float(model.settings.copy_bias),
        answer_only=answer_only,
        call_required=call_required,
        spans=spans_on(model),
    )


def spans_on(model: Any) -> bool:
    """Do the answer's code spans copy the conversation (the `grounded_spans` setting, or the checkpoint's)?"""
    on = model.settings.grounded_spans
    return on == "on" or (on == "auto" and bool(model.config.grounded_spans))


def grounding_for(model: Any, text: TurnText):
    """This turn's workspace grounding, or None (off, or no workspace bound)."""
    if not model.settings.grounded or model.workspace is None:
        return None
    from clover.steering.grounding import Grounding
    from clover.steering.value_nodes import Vocab

    if model.vocab is None:
        model.vocab = Vocab(model.tokenizer, model.config.vocab_size)
    return Grounding(model.workspace, model.vocab, text.context, text.quotable, text.request)


__all__ = ["TurnText", "grammar_for", "grounding_for", "spans_on"]
