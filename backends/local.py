"""The local Clover backend: a checkpoint directory (or the embedded weights) decoded in-process
with the block-diffusion decoder (model/decoder/generate.py).

It only answers: it renders the prompt, decodes under its constraints and parses the reply.
Streaming: one "block_round" event per denoising round (the block's tokens, None = still masked);
as each block finishes, its text goes through the chat StreamParser as "thinking"/"text" deltas
(local_stream.py). Tool calls are parsed from the final text (Qwen3-Coder XML or Hermes JSON).
When tools are given, the decoder is steered by steering/tool_grammar.py (local_grammar.py), so a
call the model starts is well formed by construction. A checkpoint that declares competence limits
(steering/competence.py) answers honestly past them. What the embedded model needs done after a
turn (an edit chosen among repairs and checked against the issue's example, edits out of scope
held back) is its turn stage (steering/turn_stage.py), which the agent runs.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import ChainMap
from dataclasses import dataclass
from typing import Any

from clover.backends.local_grammar import TurnText, grammar_for
from clover.backends.local_load import (
    DEFAULT_CONTEXT,
    checkpoint_dir,
    cpu_threads,
    load_model,
    one_line,
    pick_device,
)
from clover.backends.local_settings import LocalSettings
from clover.backends.local_stream import BlockStreamer, block_size_of, merged_stats, turn_from_text
from clover.core.environment_protocol import Environment
from clover.core.model_protocol import (
    AssistantTurn,
    BackendSettings,
    EventHandler,
    Message,
    ModelCapabilities,
    StreamEvent,
    ToolSpec,
    TurnOptions,
)
from clover.core.stage_protocol import TurnStage
from clover.core.stops import ModelError
from clover.model.decoder.repetition import cut_runaway
from clover.model.text.chat import THINK_CLOSE, THINK_OPEN, StreamParser, encode_prompt, render_messages
from clover.model.text.tokenizer import CloverTokenizer
from clover.steering.answer_spans import quotable_text
from clover.steering.competence import SHORT_BUDGET, HeldStream, Limits, honest_turn, reply_text

STAT_KEYS = ("forwards", "tokens_per_forward", "tok_per_s", "rounds_per_block")
COUNT_KEYS = (
    "prefill_seconds",
    "prefill_tokens",
    "cached_prompt_tokens",
    "prefill_forwards",
    "drafted_tokens",
)


@dataclass(frozen=True)
class Decoded:
    """What the latest turn's decode leaves for the turn stage: the prompt's ids, the reply as
    decoded (text), the prompt as text, and the settings it was decoded under."""

    ids: list[int]
    reply: str
    context: str
    settings: LocalSettings


class LocalCloverModel(ModelCapabilities):
    constrain_tool_calls = True  # steer tool calls with the grammar (off: free decoding, parse only)
    prefix_caching = True  # resume each turn from the previous turns' committed prompt prefix

    def __init__(self, settings: LocalSettings | BackendSettings) -> None:
        """`settings`: the local decoder's (LocalSettings), or the run's, whose local knobs are read."""
        from clover.backends.prefix_cache import PrefixCache
        from clover.model.decoder.decode_width import choose_width
        from clover.model.text.tokenizer import TokenizerError

        self.settings = LocalSettings.of(settings)
        directory = checkpoint_dir(self.settings.model)
        try:
            import torch
        except ImportError:
            raise ModelError("the local Clover model needs torch: pip install 'clover-cli[local]'") from None
        self.device = pick_device(self.settings.device)
        net, config, template = load_model(directory, self.device, self.settings.quantize)
        self.net, self.config = net.eval(), config
        if self.device == "cpu":
            threads = cpu_threads(self.settings.threads, sum(p.numel() for p in net.parameters()))
            if threads is not None:
                torch.set_num_threads(threads)
        try:
            self.tokenizer = CloverTokenizer.from_dir(directory)
            self.tokenizer.check_fits(config.vocab_size, str(directory / "tokenizer.json"))
        except TokenizerError as exc:
            raise ModelError(str(exc)) from None
        self.chat_template = template if template is not None else self.tokenizer.chat_template
        self.name = "clover-embedded" if self.settings.model == "embedded" else directory.resolve().name
        # the checkpoint's own block size, or 1 for a big MoE whose wide forwards cost more than they decode
        self.default_width = choose_width(config, self.device).width
        self.context_window = int(config.max_position_embeddings or DEFAULT_CONTEXT)
        # what the checkpoint declares of itself (config.json): the agent reads these
        self.rolls_back_test_breaks = config.rolls_back_test_breaks  # `clover fix`'s test guard
        self.wrap_up = config.wrap_up  # the agent's last turn at its step limit
        self.early_answer_redos = config.early_answer_redos  # a fix's answers before an edit
        self.stop_ids = sorted(set(config.eos_token_ids) | set(self.tokenizer.stop_ids()))
        self._cancel = threading.Event()
        self.prefix_cache: PrefixCache | None = PrefixCache()
        self.workspace: Any = None  # grounding.Workspace, once bound to the agent's environment
        self.vocab: Any = None  # value_nodes.Vocab, built on the first grounded turn
        self.decoded: Decoded | None = None  # the latest turn's, for its stage
        self.repairs_spent: set[tuple[int, str]] | None = None  # the stage's (edit_choice.py)
        self._think_close = self.tokenizer.token_id(THINK_CLOSE)
        # how a thought ends in the chat format (model/text/chat.py thought_and_reply)
        self._after_thought = (
            self.tokenizer.encode(f"\n{THINK_CLOSE}\n\n") if self._think_close is not None else []
        )

    def bind_workspace(self, env: Environment) -> None:
        """Ground tool values in this environment's files (the `grounded` setting)."""
        from clover.steering.grounding import Workspace

        self.workspace = Workspace(env)

    def turn_stage(self) -> TurnStage | None:
        """The stage of the latest turn the model decoded itself (none after an honest reply)."""
        if self.decoded is None or self.workspace is None:
            return None
        from clover.steering.turn_stage import LocalTurnStage

        return LocalTurnStage(self, self.decoded)

    def cancel(self) -> None:
        """Stop the generation in flight (from another thread) at the next round: it raises
        KeyboardInterrupt in the thread running `complete`."""
        self._cancel.set()

    def with_settings(self, **changes: Any) -> LocalCloverModel:
        """The same loaded network and tokenizer under other settings (no reload), with its own empty
        prefix cache and cancel flag: decoders side by side in one process."""
        from clover.backends.prefix_cache import PrefixCache

        other = LocalCloverModel.__new__(LocalCloverModel)
        other.__dict__.update(self.__dict__)
        other.settings = dataclasses.replace(self.settings, **changes)
        other.prefix_cache, other._cancel = PrefixCache(), threading.Event()
        return other

    # ------------------------------------------------------------------ one turn

    def prompt_ids(
        self, messages: list[Message], tools: list[ToolSpec], think: bool | None = None
    ) -> tuple[list[int], bool]:
        """(token ids of the rendered prompt, whether it opened a think block)."""
        think = self.settings.think if think is None else think
        try:
            text = render_messages(
                messages, tools, think=think, template=self.chat_template, tool_prompt=self.config.tool_prompt
            )
        except Exception as exc:  # a checkpoint's jinja template that fails on these messages
            raise ModelError(f"the checkpoint's chat template failed: {one_line(exc)}") from None
        return encode_prompt(self.tokenizer, self.config, text), text.rstrip().endswith(THINK_OPEN)

    def complete(
        self,
        messages: list[Message],
        tools: list[ToolSpec],
        on_event: EventHandler | None = None,
        options: TurnOptions | None = None,
        *,
        forced: dict[int, int] | None = None,
    ) -> AssistantTurn:
        """One assistant turn. `forced` maps generated-token offsets to token ids the decoder must
        place there (a scaffold, e.g. the opening of a tool call)."""
        start = time.perf_counter()
        self._cancel.clear()
        self.decoded = None
        emit = on_event or (lambda event: None)
        s = dataclasses.replace(self.settings, **options.overrides()) if options else self.settings
        ids, opened = self.prompt_ids(messages, tools, think=s.think)
        room = self.context_window - len(ids)
        if room <= 0:
            overflow = ModelError(
                f"the prompt has {len(ids)} tokens, more than the {self.context_window}-token context of {self.name}"
            )
            overflow.context_overflow = True
            raise overflow
        limits, big_repo, held = Limits.of(self.config), None, None  # the checkpoint's competence
        if limits.active:
            if why := limits.prompt_too_long(len(ids)):
                return honest_turn(why, len(ids), 0, time.perf_counter() - start, emit, messages)
            if self.workspace is not None:
                big_repo = limits.repo_too_big(len(self.workspace.listing()[0]))
            held = HeldStream(emit)  # the reply is shown once it is judged
        decode = self._decode_settings(s, min(room, SHORT_BUDGET) if big_repo else room)
        text = self._turn_text(messages, ids)
        choice = options.tool_choice if options is not None else None
        out, result, stream, grammars, stats = self._generate(
            ids, decode, tools, opened, text, held or emit, forced, choice
        )
        reply = self.tokenizer.decode([t for t in out if t not in stream.stops])
        turn = turn_from_text(reply, tools, opened=opened)
        if choice == "none":  # without the grammar (switched off) a call may still come: not asked for
            turn.tool_calls = []
        scored: list[float] = []  # the reply's mean log-probability, where it was judged by it
        why = None
        if limits.active:
            finish = result.finish_reasons[0]
            why = limits.judge(
                turn, finish, big_repo, lambda: scored.append(self._mean_logprob(ids, out)) or scored[0]
            )
            held.release(why is not None, reply_text(why, messages) if why else "")  # type: ignore[union-attr]
        if why is not None:
            turn = honest_turn(why, messages=messages)
        else:
            self.decoded = Decoded(ids, reply, text.context, s)
        for call in turn.tool_calls:
            emit(StreamEvent("tool_call", data={"name": call.name, "arguments": call.arguments}))
        turn.prompt_tokens, turn.completion_tokens = len(ids), len(out)
        turn.seconds = time.perf_counter() - start
        turn.stats = self._turn_stats(stats, grammars)
        turn.stats |= ({"outside_competence": 1.0} if why else {}) | (
            {"reply_logprob": scored[0]} if scored else {}
        )
        turn.finish_reason = "tool_calls" if turn.tool_calls else "stop" if why else result.finish_reasons[0]
        usage = {"prompt_tokens": len(ids), "completion_tokens": len(out), **turn.stats}
        emit(StreamEvent("usage", data=usage))
        return turn

    def _decode_settings(self, s: LocalSettings, budget: int) -> Any:
        from clover.model.decoder.generate import DecodeSettings

        return DecodeSettings(
            block_size=(s.block_size or self.default_width)
            if self.config.block_size > 1
            else 1,  # AR stays AR
            policy="threshold",
            threshold=s.threshold,
            order=None if s.decode_order == "auto" else s.decode_order,  # None: the checkpoint's
            temperature=s.temperature or 0.0,
            max_new_tokens=min(s.max_tokens, budget),
            stop_token_ids=self.stop_ids,
            draft_ngram=max(s.drafts, 0),
            fused_rounds=s.fused_rounds,
        )

    def _turn_text(self, messages: list[Message], ids: list[int]) -> TurnText:
        """What the grammar reads of this turn's conversation (local_grammar.TurnText)."""
        return TurnText(
            context=self.tokenizer.decode(ids),
            # the conversation, and what the checkpoint's replies quote
            quotable="\n".join([quotable_text(messages), *self.config.answer_quotes]),
            request="\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user"),
        )

    def _generate(
        self,
        ids: list[int],
        decode: Any,
        tools: list[ToolSpec],
        opened: bool,
        text: TurnText,
        emit: EventHandler,
        forced: dict[int, int] | None,
        choice: str | None,
    ) -> tuple[list[int], Any, BlockStreamer, list[Any], dict[str, float]]:
        """The turn's tokens, decoded in one piece or, after a thought that loops, two: (tokens, the
        last GenerateResult, the first piece's streamer, the grammars, the merged stats)."""
        flags = {"answer_only": choice == "none", "call_required": choice == "required"}
        grammar = grammar_for(self, tools, opened, decode.max_new_tokens, text, **flags)
        grammars = [grammar]  # one per decoded piece (their stats add up)
        out, result, stream = self._decode(ids, decode, grammar, emit, forced, thinking=opened)
        stats = dict(result.stats)
        if result.finish_reasons[0] != "repetition":
            return out, result, stream, grammars, stats
        out = cut_runaway(out, decode.repetition)
        if grammar is not None:
            out = out + grammar.closing()  # a runaway value stopped mid-call: the call still closes
        left = decode.max_new_tokens - len(out) - len(self._after_thought)
        if opened and self._think_close not in out and left >= 2 * block_size_of(decode):
            # A thought that loops ends where the loop began; the model then goes on to a call
            # or an answer instead of leaving a turn with neither.
            out = out + self._after_thought
            after = grammar_for(self, tools, False, left, text, thought_closed=True, **flags)
            grammars.append(after)
            piece = dataclasses.replace(decode, max_new_tokens=left)
            more, result, _ = self._decode(ids + out, piece, after, emit, None, thinking=False)
            if result.finish_reasons[0] == "repetition":  # a value cut here still closes its call
                more = cut_runaway(more, decode.repetition) + (after.closing() if after is not None else [])
            out = out + more
            stats = merged_stats(stats, result.stats)
        return out, result, stream, grammars, stats

    @staticmethod
    def _turn_stats(stats: dict[str, float], grammars: list[Any]) -> dict[str, float]:
        out = {k: float(stats[k]) for k in STAT_KEYS} | {k: float(stats.get(k, 0.0)) for k in COUNT_KEYS}
        for g in grammars:  # tokens the grammar placed without a forward, and ones it redid
            for k, v in (g.stats if g is not None else {}).items():
                out[k] = out.get(k, 0.0) + float(v)
        return out

    def _mean_logprob(self, ids: list[int], out: list[int]) -> float:
        from clover.model.decoder.score import continuation_logprobs

        return continuation_logprobs(self.net, ids, [out])[0] / max(len(out), 1) if out else 0.0

    def _decode(
        self,
        ids: list[int],
        decode: Any,
        grammar: Any,
        emit: EventHandler,
        forced: dict[int, int] | None,
        *,
        thinking: bool,
    ) -> tuple[list[int], Any, BlockStreamer]:
        """One generation after `ids`, streamed: (its tokens, the GenerateResult, the streamer)."""
        from clover.model.decoder.generate import generate

        block = block_size_of(decode)
        placed = grammar.placed[0] if grammar is not None else {}
        stream = BlockStreamer(
            self.tokenizer,
            set(self.stop_ids),
            StreamParser(thinking=thinking),
            emit,
            ChainMap(forced or {}, placed),
            len(ids) % block,
            block,
        )

        def on_round(ev) -> None:
            if self._cancel.is_set():
                raise KeyboardInterrupt
            stream.round(ev)

        prefix = self.prefix_cache if self.prefix_caching else None
        steer = {"fixed": [forced] if forced else None, "on_round": on_round, "constraint": grammar}
        try:
            if prefix is not None:  # resumes from the committed prefix of earlier turns
                result = prefix.generate(self.net, ids, decode, **steer)
            else:
                result = generate(self.net, [ids], decode, **steer)
        except (RuntimeError, ValueError) as exc:
            raise ModelError(f"local generation failed: {one_line(exc)}") from None
        stream.finish(result.tokens[0])
        return result.tokens[0], result, stream


__all__ = [
    "LocalCloverModel",
    "checkpoint_dir",
    "cpu_threads",
    "load_model",
    "pick_device",
    "turn_from_text",
]
