"""The local Clover backend: a checkpoint directory (or the embedded weights) decoded in-process
with the block-diffusion decoder (model/generate.py).

Streaming: one "block_round" event per denoising round (the block's tokens, None = still masked);
as each block finishes, its text goes through the chat StreamParser as "thinking"/"text" deltas.
Tool calls are parsed from the final text (Qwen3-Coder XML or Hermes JSON). When tools are given,
the decoder is steered by decoding/tool_grammar.py, so a call the model starts is well
formed by construction (scaffold forced, names limited to the tools and their schemas).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections import ChainMap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import clover.model.chat
from clover.core.protocols import (
    AssistantTurn,
    BackendSettings,
    EventHandler,
    Message,
    ModelError,
    StreamEvent,
    ToolCall,
    ToolSpec,
    TurnOptions,
)
from clover.decoding.answer_spans import quotable_text
from clover.decoding.competence import SHORT_BUDGET, HeldStream, Limits, honest_turn, reply_text
from clover.model.chat import (
    THINK_CLOSE,
    THINK_OPEN,
    StreamParser,
    encode_prompt,
    parse_assistant,
    render_messages,
    tool_schemas,
)
from clover.model.repetition import cut_runaway
from clover.model.tokenizer import CloverTokenizer, IncrementalDecoder

DEFAULT_CONTEXT = 32768
EMBEDDED_DIR = Path(clover.model.chat.__file__).resolve().parent / "weights"  # shipped inside the package


def checkpoint_dir(spec: str) -> Path:
    """settings.model -> the checkpoint directory ("embedded": the shipped weights)."""
    if spec == "embedded":
        return EMBEDDED_DIR  # shipped inside the package (package-data)
    d = Path(spec).expanduser()
    if not d.is_dir():
        raise ModelError(f"checkpoint directory not found: {d}")
    return d


def pick_device(asked: str | None) -> str:
    import torch

    name = (asked or "cpu").strip().lower()
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {asked!r} was asked for, but CUDA is not available here")
    try:
        torch.device(name)
    except RuntimeError:
        raise ModelError(f"unknown device {asked!r} (use cpu, cuda, cuda:N or auto)") from None
    return name


SMALL_MODEL_PARAMS = 100_000_000


def cpu_threads(asked: int, params: int) -> int | None:
    """Torch threads for decoding on CPU, or None to keep torch's default. `asked` > 0 wins; else a
    small model gets 1: its matrices are too small to split, and on a busy machine OpenMP threads
    spin-wait for each other (the 9M embedded model decoded ~60x slower with 2 threads than with 1
    on a 2-core machine running other work). OMP_NUM_THREADS, when set, is the user's choice."""
    if asked > 0:
        return asked
    if os.environ.get("OMP_NUM_THREADS") or params >= SMALL_MODEL_PARAMS:
        return None
    return 1


def load_model(directory: Path, device: str, quantize: str = "none"):
    """load_checkpoint's (network, config, chat template or None); errors as one-line ModelErrors.
    `quantize`: int4 / int8 quantize the checkpoint's floating-point matrices on load; none: as stored."""
    from clover.model.load import CheckpointError, load_checkpoint

    try:  # the loader picks the dtype: bf16 on a GPU, fp32 on CPU only for a small model
        return load_checkpoint(directory, device=device, quantize=None if quantize == "none" else quantize)
    except CheckpointError as exc:
        raise ModelError(_one_line(exc)) from None
    except Exception as exc:  # e.g. safetensors' error on a truncated file: still one line
        raise ModelError(f"cannot load the checkpoint in {directory}: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class LocalCloverModel:
    constrain_tool_calls = True  # steer tool calls with the grammar (off: free decoding, parse only)
    prefix_caching = True  # resume each turn from the previous turns' committed prompt prefix

    def __init__(self, settings: BackendSettings) -> None:
        from clover.model.tokenizer import TokenizerError

        self.settings = settings
        directory = checkpoint_dir(settings.model)
        try:
            import torch  # noqa: F401
        except ImportError:
            raise ModelError("the local Clover model needs torch: pip install 'clover-cli[local]'") from None
        self.device = pick_device(settings.device)
        net, config, template = load_model(directory, self.device, settings.quantize)
        self.net, self.config = net.eval(), config
        if self.device == "cpu":
            import torch

            threads = cpu_threads(settings.threads, sum(p.numel() for p in net.parameters()))
            if threads is not None:
                torch.set_num_threads(threads)
        try:
            self.tokenizer = CloverTokenizer.from_dir(directory)
            self.tokenizer.check_fits(config.vocab_size, str(directory / "tokenizer.json"))
        except TokenizerError as exc:
            raise ModelError(str(exc)) from None
        self.chat_template = template if template is not None else self.tokenizer.chat_template
        self.name = "clover-embedded" if settings.model == "embedded" else directory.resolve().name
        from clover.model.decode_width import choose_width

        # the checkpoint's own block size, or 1 for a big MoE whose wide forwards cost more than they decode
        self.default_width = choose_width(config, self.device).width
        # `clover fix` rolls back a change of the embedded model's that breaks a passing test (test_guard.py)
        self.rolls_back_test_breaks = settings.model == "embedded"
        self.context_window = int(config.max_position_embeddings or DEFAULT_CONTEXT)
        self.wrap_up = bool(getattr(config, "wrap_up", True))  # the agent's last turn at its step limit
        self.early_answer_redos = int(
            getattr(config, "early_answer_redos", 0)
        )  # a fix's answers before an edit
        self.stop_ids = sorted(set(config.eos_token_ids) | set(self.tokenizer.stop_ids()))
        self._cancel = threading.Event()
        from clover.backends.prefix_cache import PrefixCache

        self.prefix_cache = PrefixCache()
        self.workspace: Any = None  # grounding.Workspace, once bound to the agent's environment
        self._vocab: Any = None
        self._think_close = self.tokenizer.token_id(THINK_CLOSE)
        # how a thought ends in the chat format (model/chat.py thought_and_reply)
        self._after_thought = (
            self.tokenizer.encode(f"\n{THINK_CLOSE}\n\n") if self._think_close is not None else []
        )

    def bind_workspace(self, env: Any, may_run: Any = None) -> None:
        """Ground tool values in this environment's files (the `grounded` setting); `may_run(command)`
        says whether the permission policy runs a command unasked (an issue's reproduction)."""
        from clover.decoding.grounding import Workspace

        self.workspace, self.may_run = Workspace(env), may_run

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
            raise ModelError(f"the checkpoint's chat template failed: {_one_line(exc)}") from None
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
        from clover.model.generate import DecodeSettings

        start = time.perf_counter()
        self._cancel.clear()
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
        limits, big_repo = Limits.of(self.config), None  # the checkpoint's competence (competence.py)
        if limits.active:
            if why := limits.prompt_too_long(len(ids)):
                return honest_turn(why, len(ids), 0, time.perf_counter() - start, emit, messages)
            big_repo = (
                limits.repo_too_big(len(self.workspace.listing()[0])) if self.workspace is not None else None
            )
            emit = held = HeldStream(emit)  # the reply is shown once it is judged
        decode = DecodeSettings(
            block_size=(s.block_size or self.default_width)
            if self.config.block_size > 1
            else 1,  # AR stays AR
            policy="threshold",
            threshold=s.threshold,
            order=None if s.decode_order == "auto" else s.decode_order,  # None: the checkpoint's
            temperature=s.temperature or 0.0,
            max_new_tokens=min(s.max_tokens, room, SHORT_BUDGET if big_repo else room),
            stop_token_ids=self.stop_ids,
            draft_ngram=max(int(getattr(s, "drafts", 0)), 0),
            fused_rounds=bool(getattr(s, "fused_rounds", False)),
        )
        context = self.tokenizer.decode(
            ids
        )  # the prompt as text: what the copy prior of grounded values reads
        # what the answer's code spans may copy: the conversation, and what the checkpoint's replies quote
        quotable = "\n".join([quotable_text(messages), *getattr(self.config, "answer_quotes", [])])
        # what the user asked: the test files and docstrings it names may be edited (edit_scope.py)
        request = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
        answer_only = options is not None and options.tool_choice == "none"
        required = options is not None and options.tool_choice == "required"
        grammar = self._grammar(
            tools,
            opened,
            decode.max_new_tokens,
            context,
            answer_only=answer_only,
            call_required=required,
            quotable=quotable,
            request=request,
        )
        grammars = [grammar]  # the turn's grammars, one per decoded piece (their stats add up)
        out, result, stream = self._decode(ids, decode, grammar, emit, forced, thinking=opened)
        stats = dict(result.stats)
        if result.finish_reasons[0] == "repetition":
            out = cut_runaway(out, decode.repetition)
            if grammar is not None:
                out = out + grammar.closing()  # a runaway value stopped mid-call: the call still closes
            thought_open = opened and self._think_close not in out
            left = decode.max_new_tokens - len(out) - len(self._after_thought)
            if thought_open and left >= 2 * block_size_of(decode):
                # A thought that loops ends where the loop began; the model then goes on to a call
                # or an answer instead of leaving a turn with neither.
                out = out + self._after_thought
                after = self._grammar(
                    tools,
                    False,
                    left,
                    context,
                    thought_closed=True,
                    answer_only=answer_only,
                    call_required=required,
                    quotable=quotable,
                    request=request,
                )
                grammars.append(after)
                more, result, _ = self._decode(
                    ids + out,
                    dataclasses.replace(decode, max_new_tokens=left),
                    after,
                    emit,
                    None,
                    thinking=False,
                )
                if result.finish_reasons[0] == "repetition":  # a value cut here still closes its call
                    more = cut_runaway(more, decode.repetition) + (
                        after.closing() if after is not None else []
                    )
                out = out + more
                stats = _merged(stats, result.stats)
        text = self.tokenizer.decode([t for t in out if t not in stream.stops])
        turn = turn_from_text(text, tools, opened=opened)
        if answer_only:  # without the grammar (switched off) a call may still come: not asked for
            turn.tool_calls = []
        scored: list[float] = []  # the reply's mean log-probability, where it was judged by it
        why = (
            limits.judge(
                turn,
                result.finish_reasons[0],
                big_repo,
                lambda: scored.append(self._mean_logprob(ids, out)) or scored[0],
            )
            if limits.active
            else None
        )
        if limits.active:
            held.release(why is not None, reply_text(why, messages) if why else "")
        if why is not None:
            turn, repaired = honest_turn(why, messages=messages), {"outside_competence": 1.0}
        else:
            repaired = self._choose_edits(turn, ids, text, messages, context, s)
            repaired |= self._hold_out_of_scope(turn, request, messages)
        for call in turn.tool_calls:
            emit(StreamEvent("tool_call", data={"name": call.name, "arguments": call.arguments}))
        turn.prompt_tokens, turn.completion_tokens = len(ids), len(out)
        turn.seconds = time.perf_counter() - start
        st = stats
        turn.stats = {
            k: float(st[k]) for k in ("forwards", "tokens_per_forward", "tok_per_s", "rounds_per_block")
        }
        for k in (
            "prefill_seconds",
            "prefill_tokens",
            "cached_prompt_tokens",
            "prefill_forwards",
            "drafted_tokens",
        ):
            turn.stats[k] = float(st.get(k, 0.0))
        turn.stats.update(repaired | ({"reply_logprob": scored[0]} if scored else {}))
        for g in grammars:  # tokens the grammar placed without a forward, and ones it redid
            for k, v in (g.stats if g is not None else {}).items():
                turn.stats[k] = turn.stats.get(k, 0.0) + float(v)
        turn.finish_reason = "tool_calls" if turn.tool_calls else "stop" if why else result.finish_reasons[0]
        emit(
            StreamEvent(
                "usage", data={"prompt_tokens": len(ids), "completion_tokens": len(out), **turn.stats}
            )
        )
        return turn

    def _mean_logprob(self, ids: list[int], out: list[int]) -> float:
        from clover.model.score import continuation_logprobs

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
    ) -> tuple[list[int], Any, _BlockStreamer]:
        """One generation after `ids`, streamed: (its tokens, the GenerateResult, the streamer)."""
        from clover.model.generate import generate

        block = block_size_of(decode)
        placed = grammar.placed[0] if grammar is not None else {}
        stream = _BlockStreamer(
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

        prefix = getattr(self, "prefix_cache", None) if self.prefix_caching else None
        steer = {"fixed": [forced] if forced else None, "on_round": on_round, "constraint": grammar}
        try:
            if prefix is not None:  # resumes from the committed prefix of earlier turns
                result = prefix.generate(self.net, ids, decode, **steer)
            else:
                result = generate(self.net, [ids], decode, **steer)
        except (RuntimeError, ValueError) as exc:
            raise ModelError(f"local generation failed: {_one_line(exc)}") from None
        stream.finish(result.tokens[0])
        return result.tokens[0], result, stream

    def _choose_edits(
        self,
        turn: AssistantTurn,
        ids: list[int],
        reply: str,
        messages: list[Message],
        context: str,
        s: BackendSettings,
    ) -> dict[str, float]:
        """A str_replace's edit chosen among (line, one-site repair) pairs around its old_str by the
        model's likelihood, and checked against the issue's reproduction where the permission policy
        lets it run (edit_choice.py, reproduce.py), where the `edit_repairs` setting (or the
        checkpoint) asks."""
        on = s.edit_repairs == "on" or (s.edit_repairs == "auto" and self.config.edit_repairs)
        if not on or getattr(self, "workspace", None) is None or len(turn.tool_calls) != 1:
            return {}  # one call: the reply's text up to its old_str is the scoring prefix
        from clover.decoding.edit_choice import choose_turn_edit

        return choose_turn_edit(self, turn, ids, reply, messages, context)

    def _hold_out_of_scope(
        self, turn: AssistantTurn, request: str, messages: list[Message]
    ) -> dict[str, float]:
        """Edits of test files or docstrings the request does not name, and any edit when the request
        is a question, are held back (edit_scope.py)."""
        if getattr(self, "workspace", None) is None or not getattr(self.settings, "grounded", True):
            return {}
        from clover.decoding.edit_scope import hold_out_of_scope

        current = next(
            (str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), ""
        )
        return hold_out_of_scope(turn.tool_calls, request, self.workspace, current)

    def _grammar(
        self,
        tools: list[ToolSpec],
        opened: bool,
        budget: int,
        context: str = "",
        thought_closed: bool = False,
        answer_only: bool = False,
        call_required: bool = False,
        quotable: str = "",
        request: str = "",
    ):
        """The tool-call grammar for this turn, or None (no tools, switched off, or a vocabulary
        without the markup tokens)."""
        if not tools or not self.constrain_tool_calls:
            return None
        if self.chat_template is not None and "<function=" not in self.chat_template:
            return None  # the checkpoint's own template asks for another call format
        from clover.decoding.tool_grammar import ToolCallGrammar

        return ToolCallGrammar.build(
            self.tokenizer,
            tools,
            opened=opened,
            stop_ids=self.stop_ids,
            vocab_size=self.config.vocab_size,
            mask_id=self.config.mask_token_id,
            budget=budget,
            device=self.device,
            grounding=self._grounding(context, quotable, request),
            thought_closed=thought_closed,
            copy_bias=float(getattr(self.settings, "copy_bias", 0.0)),
            answer_only=answer_only,
            call_required=call_required,
            spans=self._spans_on(),
        )

    def _spans_on(self) -> bool:
        """Do the answer's code spans copy the conversation (the `grounded_spans` setting, or the checkpoint's)?"""
        on = getattr(self.settings, "grounded_spans", "auto")
        return on == "on" or (on == "auto" and bool(getattr(self.config, "grounded_spans", False)))

    def _grounding(self, context: str = "", quotable: str = "", request: str = ""):
        """This turn's workspace grounding, or None (off, or no workspace bound). `quotable`: what
        the answer's code spans may copy."""
        if not getattr(self.settings, "grounded", True) or getattr(self, "workspace", None) is None:
            return None
        from clover.decoding.grounding import Grounding
        from clover.decoding.value_nodes import Vocab

        if getattr(self, "_vocab", None) is None:
            self._vocab = Vocab(self.tokenizer, self.config.vocab_size)
        return Grounding(self.workspace, self._vocab, context, quotable, request)


def block_size_of(decode: Any) -> int:
    return decode.block_size or 1


def _merged(first: Mapping[str, float], second: Mapping[str, float]) -> dict[str, float]:
    """Decoding stats of a turn decoded in two pieces: counts add up, rates are recomputed."""
    out = dict(first)
    for k in (
        "forwards",
        "tokens",
        "blocks",
        "prefill_seconds",
        "seconds",
        "prefill_tokens",
        "prefill_forwards",
        "drafted_tokens",
    ):
        out[k] = first.get(k, 0.0) + second.get(k, 0.0)
    tokens, forwards = out.get("tokens", 0.0), max(out.get("forwards", 0.0), 1.0)
    out["tokens_per_forward"] = tokens / forwards
    out["tok_per_s"] = tokens / max(out["seconds"] - out["prefill_seconds"], 1e-9)
    rounds = first.get("rounds_per_block", 0.0) * first.get("blocks", 0.0)
    rounds += second.get("rounds_per_block", 0.0) * second.get("blocks", 0.0)
    out["rounds_per_block"] = rounds / max(out["blocks"], 1.0)
    return out


def turn_from_text(text: str, tools: list[ToolSpec] | None, *, opened: bool) -> AssistantTurn:
    """A decoded reply -> AssistantTurn (thinking, answer, parsed tool calls; never raises)."""
    thinking, answer, parsed = parse_assistant(text, tool_schemas(tools), opened=opened)
    calls = [ToolCall(p.name, p.arguments, raw=p.raw, error=p.error) for p in parsed]
    return AssistantTurn(text=answer.strip(), thinking=thinking, tool_calls=calls)


class _BlockStreamer:
    """Turns the decoder's round events into block_round events and, once a block is complete,
    text deltas classified by the chat StreamParser. A block whose positions were all forced has
    no rounds: its text is taken from `forced` (the caller's and the grammar's placements) when the
    next block starts (or at the end)."""

    def __init__(
        self,
        tok: CloverTokenizer,
        stops: set[int],
        parser: StreamParser,
        emit: EventHandler,
        forced: Mapping[int, int],
        first_offset: int,
        block_size: int,
    ) -> None:
        self.tok, self.stops, self.parser, self.emit = tok, stops, parser, emit
        self.forced, self.first_offset, self.block_size = forced, first_offset, block_size
        self.text = IncrementalDecoder(tok)
        self.done_blocks = -1
        self.streamed = 0  # generated tokens already passed on as text

    def round(self, ev: Any) -> None:
        row = ev.tokens[0]
        pieces = [None if t is None else self.tok.piece(t) for t in row]
        if ev.block > self.done_blocks + 1:  # blocks without rounds came first: fully forced
            start = max(ev.block * self.block_size - self.first_offset, 0)
            self._push([self.forced[o] for o in range(self.streamed, start) if o in self.forced])
            self.streamed = start
        self.emit(StreamEvent("block_round", data={"tokens": pieces, "block": ev.block, "round": ev.round}))
        if None not in row and ev.block > self.done_blocks:  # the block's last round: it is final
            self.done_blocks = ev.block
            self._push(row)
            self.streamed += len(row)

    def _push(self, ids: list[int]) -> None:
        delta = self.text.push([t for t in ids if t not in self.stops])
        if delta:
            self._pieces(self.parser.feed(delta))

    def _pieces(self, pieces: list[tuple[str, str]]) -> None:
        for kind, text in pieces:
            if kind in ("thinking", "text"):  # call markup is held back; calls are emitted parsed
                self.emit(StreamEvent(kind, text))  # type: ignore[arg-type]

    def finish(self, out: list[int]) -> None:
        self._push(out[self.streamed :])
        self.streamed = len(out)
        delta = self.text.flush()
        if delta:
            self._pieces(self.parser.feed(delta))
        self._pieces(self.parser.finish())


__all__ = ["LocalCloverModel", "checkpoint_dir", "pick_device", "turn_from_text"]
